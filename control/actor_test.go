package control

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestCallerActor: the actor that runs and events record names where the
// caller came in and who it is.
func TestCallerActor(t *testing.T) {
	for _, tt := range []struct {
		c    Caller
		want string
	}{
		{Caller{Name: "ci", Role: RoleOperate, Via: ViaAPI}, "api:ci"},
		{Caller{Name: "alice", Role: RoleAdmin, Via: ViaSocket}, "socket:alice"},
		{Caller{Name: "uid 1001", Role: RoleAdmin, Via: ViaSocket}, "socket:uid 1001"},
		{Caller{}, ""},
	} {
		if got := tt.c.Actor(); got != tt.want {
			t.Errorf("%+v.Actor() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestActorInRunsAndEvents: the handlers give the engine the caller of
// each request, and the run and event JSON carry the actor the store
// recorded: the token's name over the API, the peer's user on the socket.
func TestActorInRunsAndEvents(t *testing.T) {
	ctx := context.Background()
	ta := startAPI(t, nil)
	api, err := NewAPIClient(ta.url, operateToken)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	run, err := api.Trigger(ctx, "adhoc", TriggerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Actor != "api:ci" || run.CancelledBy != "" {
		t.Errorf("trigger over the API: actor %q, cancelled_by %q; want api:ci and none", run.Actor, run.CancelledBy)
	}
	rerun, err := api.Rerun(ctx, run.ID)
	if err != nil || rerun.Actor != "api:ci" {
		t.Fatalf("rerun over the API: %+v, %v", rerun, err)
	}
	cancelled, err := api.Cancel(ctx, run.ID)
	if err != nil || cancelled.CancelledBy != "api:ci" || cancelled.Actor != "api:ci" {
		t.Fatalf("cancel over the API: %+v, %v", cancelled, err)
	}
	evs, err := api.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Actor != "api:ci" || evs[1].Actor != "api:ci" || evs[1].To != "cancelled" {
		t.Errorf("events over the API: %+v", evs)
	}

	ts := startServer(t, nil)
	me := userName(uint32(os.Getuid()))
	if me == "" {
		me = fmt.Sprintf("uid %d", os.Getuid())
	}
	local, err := ts.c.Trigger(ctx, "adhoc", TriggerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.c.Run(ctx, local.ID)
	if err != nil || got.Actor != "socket:"+me {
		t.Errorf("trigger on the socket: %+v, %v; want actor socket:%s", got, err, me)
	}
}

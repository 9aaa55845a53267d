package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testActors: a run keeps who made it (Actor) and who asked to cancel it
// (CancelledBy), and each event who asked for its change: the creation
// event the run's actor, a cancel of a waiting run the canceller, and the
// end of an attempt stopped by a cancel request the one who asked. What
// the engine does on its own (a tick, a claim, a failed attempt, an
// overlap replace) has no actor. The text is stored as given, whatever its
// bytes: escaping it is for whoever prints it.
func testActors(t *testing.T, s store.Store) {
	ctx := t.Context()
	const (
		ci    = "api:ci"
		alice = "socket:alice"
		odd   = "socket:uid 1001 \x1b[31m\u00e9"
	)
	made := func(job, actor string, at time.Time) store.RunInsertParams {
		p := manual(job, at)
		p.Actor = actor
		return p
	}
	created := func(r *jobs.Run, actor string) jobs.Event {
		return jobs.Event{RunID: r.ID, Time: r.CreatedAt, Node: nodeA, To: jobs.StatusPending,
			Reason: jobs.ReasonCreated, Actor: actor}
	}

	// Made by a caller, one at a time and in a batch; made by a tick.
	one := mustInsert(t, s, made("a", ci, t0))
	many, err := s.RunInsertMany(ctx, []store.RunInsertParams{made("b", alice, t0), made("c", odd, t0)})
	if err != nil {
		t.Fatal(err)
	}
	ticked := mustInsert(t, s, tick("d", t0))
	for _, c := range []struct {
		run   *jobs.Run
		actor string
	}{{one, ci}, {many[0], alice}, {many[1], odd}, {ticked, ""}} {
		if c.run.Actor != c.actor {
			t.Fatalf("run %s made by %q: returned with actor %q", c.run.Job, c.actor, c.run.Actor)
		}
		if got := mustGet(t, s, c.run.ID); got.Actor != c.actor || got.CancelledBy != "" {
			t.Fatalf("run %s made by %q: stored with actor %q, cancelled_by %q", c.run.Job, c.actor, got.Actor, got.CancelledBy)
		}
		if listed := listRuns(t, s, c.run.Job); len(listed) != 1 || listed[0].Actor != c.actor {
			t.Fatalf("run %s made by %q: listed as %+v", c.run.Job, c.actor, listed)
		}
		wantEvents(t, mustEvents(t, s, c.run.ID), []jobs.Event{created(c.run, c.actor)})
	}

	// A pending run cancelled by a user: the run and the event say who.
	cancel := userCancel(one.ID, nodeA, t0.Add(time.Second))
	cancel.Actor = alice
	got, err := s.RunCancel(ctx, cancel)
	if err != nil {
		t.Fatal(err)
	}
	if got.CancelledBy != alice || mustGet(t, s, one.ID).CancelledBy != alice || got.Actor != ci {
		t.Fatalf("cancelled run: actor %q, cancelled_by %q (stored %q), want %q and %q",
			got.Actor, got.CancelledBy, mustGet(t, s, one.ID).CancelledBy, ci, alice)
	}
	wantEvents(t, mustEvents(t, s, one.ID), []jobs.Event{created(one, ci),
		{RunID: one.ID, Time: t0.Add(time.Second), Node: nodeA, From: jobs.StatusPending, To: jobs.StatusCancelled,
			Reason: jobs.ReasonCancelled, Actor: alice}})

	// A running run: its first attempt fails (the engine's doing), the
	// second is asked to stop by a user; a later request without an actor
	// (overlap=replace) keeps the user's; the attempt's end says who asked.
	b := many[0]
	claimed := claimOne(t, s, "b", incA, t0)
	fail(t, s, claimed, t0.Add(time.Second))
	second := claimOne(t, s, "b", incA, t0.Add(20*time.Second))
	cancel = userCancel(b.ID, nodeA, t0.Add(21*time.Second))
	cancel.Actor = ci
	if got, err = s.RunCancel(ctx, cancel); err != nil || got.CancelledBy != ci || !got.CancelRequested {
		t.Fatalf("cancel request: %+v, %v; want cancelled_by %q", got, err, ci)
	}
	if got, err = s.RunCancel(ctx, userCancel(b.ID, nodeA, t0.Add(22*time.Second))); err != nil || got.CancelledBy != ci {
		t.Fatalf("cancel request without an actor: %+v, %v; want cancelled_by kept %q", got, err, ci)
	}
	stopped := mustTransition(t, s, jobs.Finish(second, fenceOf(second), nodeB,
		jobs.Result{Reason: jobs.ReasonCancelled}, t0.Add(23*time.Second), nil))
	wantStatus(t, stopped, jobs.StatusCancelled, jobs.ReasonCancelled)
	if stopped.Actor != alice || stopped.CancelledBy != ci {
		t.Fatalf("stopped run: actor %q, cancelled_by %q; want %q, %q", stopped.Actor, stopped.CancelledBy, alice, ci)
	}
	wantEvents(t, mustEvents(t, s, b.ID), []jobs.Event{created(b, alice),
		{RunID: b.ID, Time: t0, Node: nodeB, Attempt: 1, From: jobs.StatusPending, To: jobs.StatusRunning, Reason: jobs.ReasonClaimed},
		{RunID: b.ID, Time: t0.Add(time.Second), Node: nodeB, Attempt: 1, From: jobs.StatusRunning, To: jobs.StatusRetrying,
			Reason: jobs.ReasonFailed, Message: "exit status 1"},
		{RunID: b.ID, Time: t0.Add(20 * time.Second), Node: nodeB, Attempt: 2, From: jobs.StatusRetrying, To: jobs.StatusRunning,
			Reason: jobs.ReasonClaimed},
		{RunID: b.ID, Time: t0.Add(23 * time.Second), Node: nodeB, Attempt: 2, From: jobs.StatusRunning, To: jobs.StatusCancelled,
			Reason: jobs.ReasonCancelled, Actor: ci},
	})
}

package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// pollResult is the reply of one raw long poll.
type pollResult struct {
	status     int
	code       string
	retryAfter string
	run        Run
	err        error
}

// rawPoll sends GET /v1/runs/{id}?wait= on a connection of its own.
func rawPoll(path, id string, wait time.Duration) pollResult {
	hc := rawClient(path)
	hc.Timeout = wait + time.Minute
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://schedulerd/v1/runs/" + id + "?wait=" + wait.String())
	if err != nil {
		return pollResult{err: err}
	}
	defer resp.Body.Close()
	res := pollResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode == http.StatusOK {
		res.err = json.NewDecoder(resp.Body).Decode(&res.run)
	} else {
		var eb errorBody
		res.err = json.NewDecoder(resp.Body).Decode(&eb)
		res.code = eb.Code
	}
	return res
}

// TestLongPollBudget: more long polls than the server has connections
// (the daemon once held 64 polls of `trigger --wait` and `schedulerd
// health` timed out). At most MaxLongPolls wait; the others are refused at
// once with 429 busy and a Retry-After, so health and the other short
// requests are served while the polls wait; the typed client asks again
// after a refusal; and the polls that wait return when the run changes.
func TestLongPollBudget(t *testing.T) {
	const maxConns, maxPolls, polls = 8, 2, 12
	ts := startServer(t, func(c *ServerConfig) {
		c.MaxConns, c.MaxLongPolls = maxConns, maxPolls
		c.WaitPoll = 20 * time.Millisecond
	})
	run := insertRun(t, ts.st, "backup", "")
	refused := func() int { return len(ts.logs.records("long poll refused")) }
	// One poll after the other, each once the server has it waiting or
	// has refused it, well before the polls' minute: connections that all
	// come at once could be closed unread to make room for each other.
	results := make(chan pollResult, polls)
	for i := range polls {
		go func() { results <- rawPoll(ts.Path(), run.ID, time.Minute) }()
		waitUntil(t, fmt.Sprintf("long poll %d to wait or be refused", i+1), 30*time.Second, func() bool {
			return len(ts.polls)+refused() == i+1
		})
	}
	if n := len(ts.polls); n != maxPolls {
		t.Fatalf("%d long polls wait, want %d", n, maxPolls)
	}
	for range polls - maxPolls {
		res := <-results
		if res.err != nil || res.status != http.StatusTooManyRequests || res.code != CodeBusy || res.retryAfter != "1" {
			t.Fatalf("a long poll past the budget: %+v, want 429 busy with Retry-After 1", res)
		}
	}

	// Short requests are served while the polls wait.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if h, err := ts.c.Health(ctx); err != nil || !h.OK {
		t.Fatalf("health next to %d long polls: %+v %v", maxPolls, h, err)
	}
	if _, err := ts.c.Jobs(ctx); err != nil {
		t.Fatalf("jobs next to %d long polls: %v", maxPolls, err)
	}

	// The typed client is refused too, and asks again after Retry-After;
	// refused for its whole wait, it returns the run as a poll that saw no
	// change does.
	if r, err := ts.c.WaitRun(ctx, run.ID, jobs.StatusPending, 1500*time.Millisecond); err != nil || r.Status != jobs.StatusPending {
		t.Fatalf("WaitRun refused for its whole wait: %+v %v", r, err)
	}
	typed := make(chan *Run, 1)
	before := refused()
	go func() {
		r, err := ts.c.WaitRun(context.Background(), run.ID, jobs.StatusPending, time.Minute)
		if err != nil {
			t.Errorf("WaitRun past the budget: %v", err)
		}
		typed <- r
	}()
	waitUntil(t, "WaitRun to be refused", 10*time.Second, func() bool { return refused() > before })
	if _, err := ts.c.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	for range maxPolls {
		select {
		case res := <-results:
			if res.err != nil || res.status != http.StatusOK || res.run.Status != jobs.StatusCancelled {
				t.Fatalf("a waiting long poll after the cancel: %+v", res)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a waiting long poll did not return after the run changed")
		}
	}
	select {
	case r := <-typed:
		if r == nil || r.Status != jobs.StatusCancelled {
			t.Fatalf("WaitRun after the cancel: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitRun did not return after the run changed")
	}
	if n := len(ts.polls); n != 0 {
		t.Errorf("%d long-poll slots still taken", n)
	}
}

package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// runWithAttempts makes a run of backup in st with one finished attempt
// per output, through the store's claim and its transitions, which store
// an attempt's output: every attempt but the last fails.
func runWithAttempts(t *testing.T, st store.Store, outputs ...string) *jobs.Run {
	t.Helper()
	ctx := context.Background()
	now := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	r, err := st.RunInsert(ctx, store.RunInsertParams{
		Job: "backup", Trigger: jobs.TriggerManual, ScheduledAt: now, NotBefore: now, Node: "test-node", Now: now,
		Retry: jobs.RetryPolicy{MaxAttempts: len(outputs), Backoff: jobs.BackoffFixed, InitialDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range outputs {
		rs, err := st.RunsClaim(ctx, store.ClaimParams{
			Node: "test-node", Incarnation: testIncarnation, Jobs: store.NewJobLimits(map[string]int{"backup": 0}), Limit: 1, Now: now,
		})
		if err != nil || len(rs) != 1 || rs[0].ID != r.ID {
			t.Fatalf("claim of attempt %d: %v %v", i+1, rs, err)
		}
		code := 1
		if i == len(outputs)-1 {
			code = 0
		}
		f := jobs.Fence{RunID: r.ID, Attempt: rs[0].Attempt, Incarnation: testIncarnation}
		res := jobs.Result{ExitCode: &code, Output: out, OutputBytes: int64(len(out))}
		if _, err := st.RunTransition(ctx, jobs.Finish(rs[0], f, "test-node", res, now.Add(time.Second), func() float64 { return 0 })); err != nil {
			t.Fatalf("end of attempt %d: %v", i+1, err)
		}
		now = now.Add(time.Minute)
	}
	return r
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAttemptsReplyStreamed: the attempts of a run whose output is large
// are streamed: the server allocates for the reply a bounded amount beyond
// what the store's read of the attempts takes, whatever the reply's size
// (the old reply was built whole in memory, six times the output for
// bytes that JSON escapes), and the client reads all of it.
func TestAttemptsReplyStreamed(t *testing.T) {
	ts := startServer(t, nil)
	const size = 2 << 20
	// Control bytes are escaped as \u0001: the reply is six times the output.
	outputs := []string{strings.Repeat("\x01", size), strings.Repeat("\x02", size), strings.Repeat("\x03", size)}
	run := runWithAttempts(t, ts.st, outputs...)

	storeRead := allocated(func() {
		if _, err := ts.st.RunAttempts(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
	})
	hc := rawClient(ts.Path())
	hc.Timeout = time.Minute
	var replied int64
	served := allocated(func() {
		resp, err := hc.Get("http://schedulerd/v1/runs/" + run.ID + "/attempts")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("attempts: %s", resp.Status)
		}
		if replied, err = io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
	})
	if replied < 6*3*size {
		t.Fatalf("the reply has %d bytes, want at least %d", replied, 6*3*size)
	}
	const bound = 8 << 20
	t.Logf("reply of %d MiB: the store's read allocates %d MiB, the request %d MiB",
		replied>>20, storeRead>>20, served>>20)
	if served > storeRead+bound {
		t.Errorf("the request allocated %d MiB, more than the store's read (%d MiB) and %d MiB: the reply is not streamed",
			served>>20, storeRead>>20, bound>>20)
	}

	as, err := ts.c.Attempts(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != len(outputs) {
		t.Fatalf("%d attempts, want %d", len(as), len(outputs))
	}
	for i, a := range as {
		if a.Number != i+1 || a.Output != outputs[i] || a.OutputBytes != size {
			t.Errorf("attempt %d: number %d, %d bytes of output (output_bytes %d)", i+1, a.Number, len(a.Output), a.OutputBytes)
		}
	}
}

// TestAttemptsReplyEscaping: the streamed reply is the JSON that
// encoding/json makes of the same attempts: quotes, backslashes, control
// bytes, multi-byte runes, U+2028 and invalid UTF-8 come out the same.
func TestAttemptsReplyEscaping(t *testing.T) {
	ts := startServer(t, nil)
	outputs := []string{
		"plain line\n",
		"quote \" backslash \\ tab \t cr \r nul \x00 esc \x1b del \x7f <b>&amp;</b>",
		"é ü 日本 😀 \u2028 \u2029 invalid \xff\xfe end \xe6\x97",
		"",
	}
	run := runWithAttempts(t, ts.st, outputs...)
	stored, err := ts.st.RunAttempts(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := rawClient(ts.Path())
	resp, err := hc.Get("http://schedulerd/v1/runs/" + run.ID + "/attempts")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("attempts: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got struct {
		Attempts []Attempt `json:"attempts"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the reply is not JSON: %v\n%q", err, body)
	}
	if len(got.Attempts) != len(stored) {
		t.Fatalf("%d attempts, want %d", len(got.Attempts), len(stored))
	}
	for i, a := range stored {
		b, err := json.Marshal(newAttempt(a))
		if err != nil {
			t.Fatal(err)
		}
		var want Attempt
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		// Both as encoding/json writes them, which compares the values.
		g, _ := json.Marshal(got.Attempts[i])
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("attempt %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
}

// TestAttemptRepliesBudget: at most MaxAttemptReplies attempts replies are
// made at once; one more is refused at once with 429 busy and a
// Retry-After, never queued behind a client that reads slowly, and the
// typed client asks again until it gets the reply. Short requests are
// served meanwhile.
func TestAttemptRepliesBudget(t *testing.T) {
	ts := startServer(t, func(c *ServerConfig) { c.MaxAttemptReplies = 1 })
	big := strings.Repeat("o", 8<<20) // more than the socket buffers: the writer blocks
	run := runWithAttempts(t, ts.st, big)

	// A client that asks and does not read holds the only slot.
	slow, err := net.Dial("unix", ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /v1/runs/%s/attempts HTTP/1.1\r\nHost: schedulerd\r\n\r\n", run.ID)
	waitUntil(t, "the slow reply to take the slot", 10*time.Second, func() bool { return len(ts.replies) == 1 })

	resp, err := rawClient(ts.Path()).Get("http://schedulerd/v1/runs/" + run.ID + "/attempts")
	if err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || eb.Code != CodeBusy || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a second attempts reply: %s %+v Retry-After %q, want 429 busy", resp.Status, eb, resp.Header.Get("Retry-After"))
	}
	if _, err := ts.c.Jobs(context.Background()); err != nil {
		t.Fatalf("a short request next to the attempts replies: %v", err)
	}

	// The typed client is refused, waits, and asks again.
	got := make(chan error, 1)
	go func() {
		as, err := ts.c.Attempts(context.Background(), run.ID)
		if err == nil && (len(as) != 1 || as[0].Output != big) {
			err = fmt.Errorf("attempts %d, output of %d bytes", len(as), len(as[0].Output))
		}
		got <- err
	}()
	waitUntil(t, "Attempts to be refused", 10*time.Second, func() bool {
		return len(ts.logs.records("attempts reply refused")) >= 2
	})
	// The slow client reads its reply: the slot frees.
	sr := bufio.NewReader(slow)
	r, err := http.ReadResponse(sr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Attempts []Attempt `json:"attempts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&first); err != nil || len(first.Attempts) != 1 || first.Attempts[0].Output != big {
		t.Fatalf("the slow client's reply: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Attempts after a busy refusal: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Attempts did not return after the slot was free")
	}
	if !errors.Is(&APIError{Code: CodeBusy}, ErrBusy) {
		t.Error("the code busy does not match ErrBusy")
	}
}

// TestAttemptOutput: GET /v1/runs/{id}/attempts/{n}/output is the
// attempt's stored output as it is, text/plain, whatever bytes it holds;
// an attempt or a run that does not exist gets 404, a number that is not
// one 400; it takes a slot of the attempts replies (429 busy when none is
// free), and a read token may ask for it on the API.
func TestAttemptOutput(t *testing.T) {
	ts := startServer(t, func(c *ServerConfig) { c.MaxAttemptReplies = 1 })
	outputs := []string{"first <b>&amp;</b> \x00\xff\n", strings.Repeat("second ", 20000)}
	run := runWithAttempts(t, ts.st, outputs...)
	hc := rawClient(ts.Path())
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := hc.Get("http://schedulerd" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	for i, want := range outputs {
		status, h, body := get(fmt.Sprintf("/v1/runs/%s/attempts/%d/output", run.ID, i+1))
		if status != 200 || body != want || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("the output of attempt %d: %d %v, %d bytes", i+1, status, h, len(body))
		}
	}
	for path, want := range map[string]int{
		"/v1/runs/" + run.ID + "/attempts/3/output":   404,
		"/v1/runs/no-such-run/attempts/1/output":      404,
		"/v1/runs/" + run.ID + "/attempts/0/output":   400,
		"/v1/runs/" + run.ID + "/attempts/one/output": 400,
		"/v1/runs/" + run.ID + "/attempts/1/output?x": 400,
	} {
		if status, _, body := get(path); status != want {
			t.Errorf("GET %s: %d %s, want %d", path, status, body, want)
		}
	}

	// The only slot taken by a client that does not read a large output.
	big := runWithAttempts(t, ts.st, strings.Repeat("o", 8<<20))
	slow, err := net.Dial("unix", ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /v1/runs/%s/attempts/1/output HTTP/1.1\r\nHost: schedulerd\r\n\r\n", big.ID)
	waitUntil(t, "the slow reply to take the slot", 10*time.Second, func() bool { return len(ts.replies) == 1 })
	if status, h, _ := get("/v1/runs/" + run.ID + "/attempts/1/output"); status != http.StatusTooManyRequests || h.Get("Retry-After") != "1" {
		t.Errorf("an output while the slot is taken: %d %v", status, h)
	}
	slow.Close()

	ta := startAPI(t, nil)
	r := runWithAttempts(t, ta.eng.st, "over the API\n")
	if got := ta.do(t, "GET", "/v1/runs/"+r.ID+"/attempts/1/output", "", bearer(readToken)); got.status != 200 || string(got.body) != "over the API\n" {
		t.Errorf("the output with a read token: %d %s", got.status, got.body)
	}
}

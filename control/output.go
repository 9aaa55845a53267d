package control

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// LiveOutput is the output of an attempt running on this node as it is
// written (scheduler.LiveOutput): bounded as the stored output is, with a
// line "[... N bytes not kept ...]" in place of what a follower fell too
// far behind to get.
type LiveOutput interface {
	// Next returns the output from offset from on, waiting until there
	// is some, the attempt ends or ctx is done; next is the offset to ask
	// from next time, and done is set once the attempt has ended and all
	// of it has been returned.
	Next(ctx context.Context, from int64) (data []byte, next int64, done bool, err error)
}

// OutputState says where the output of GET /v1/runs/{id}/output comes
// from, in its header OutputStateHeader.
type OutputState string

// The states of an attempt's output.
const (
	// OutputLive: the attempt runs on this node; the body is its output
	// as it is written (with follow, until the attempt ends).
	OutputLive OutputState = "live"
	// OutputStored: the attempt has ended; the body is its stored output.
	OutputStored OutputState = "stored"
	// OutputElsewhere: the attempt runs on another node (OutputNodeHeader
	// names it), whose output this node cannot see as it is written: the
	// body is empty, or with follow the stored output once it ends.
	OutputElsewhere OutputState = "elsewhere"
	// OutputNone: the run has not started an attempt; the body is empty.
	OutputNone OutputState = "none"
)

// Headers of the reply of GET /v1/runs/{id}/output.
const (
	// OutputStateHeader is the OutputState of the reply.
	OutputStateHeader = "Schedulerd-Output"
	// OutputAttemptHeader is the number of the attempt whose output the
	// reply carries; 0 with OutputNone.
	OutputAttemptHeader = "Schedulerd-Attempt"
	// OutputNodeHeader is the node that runs, or ran, the attempt.
	OutputNodeHeader = "Schedulerd-Node"
	// OutputNextHeader is the offset to ask from next time (from=), in a
	// reply without follow of a live or stored output.
	OutputNextHeader = "Schedulerd-Output-Next"
)

// runOutput serves GET /v1/runs/{id}/output[?attempt=N][&from=OFFSET]
// [&follow=1]: the output of an attempt, the run's current one by
// default, as text/plain from offset from (in bytes of the output as the
// attempt wrote it). Without follow the reply is what there is now,
// within the budget of the attempts replies. With follow, within the
// budget of MaxFollows, a live output is sent as it is written until the
// attempt ends, and that of an attempt running on another node once it
// ends; a follow ends when its client goes away or the server closes.
func (s *Server) runOutput(w http.ResponseWriter, r *http.Request) {
	oq, ok := parseOutputQuery(w, r)
	if !ok {
		return
	}
	want, from, follow := oq.attempt, oq.from, oq.follow
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// A follow ends when the server closes, as a long poll does.
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	id := r.PathValue("id")
	run, err := s.cfg.Store.RunGet(ctx, id)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	if want > max(run.Attempt, 0) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("run %s has no attempt %d (it has made %d)", clip(strconv.Quote(id)), want, run.Attempt))
		return
	}
	if want == 0 && run.Attempt == 0 {
		writeOutputHeader(w, OutputNone, 0, "", -1)
		return
	}
	budget, what := s.replies, "attempts replies are being sent"
	if follow {
		budget, what = s.follows, "outputs are being followed"
	}
	if !budget.take() {
		s.log.DebugContext(ctx, "output reply refused: busy", "follow", follow, "budget", cap(budget))
		writeBusy(w, fmt.Sprintf("%d %s already, the most this daemon serves at once; ask again after Retry-After", cap(budget), what))
		return
	}
	defer budget.give()
	n := cmp.Or(want, run.Attempt)
	src, err := s.locateOutput(ctx, id, n, run)
	if err != nil {
		if ctx.Err() == nil {
			s.engineError(w, r, err, CodeUnknownRun)
		}
		return
	}
	rc := http.NewResponseController(w)
	switch src.state {
	case OutputLive:
		if !follow {
			// What is kept now, without waiting for more.
			now, stop := context.WithCancel(ctx)
			stop()
			data, next, _, _ := src.live.Next(now, from)
			writeOutputHeader(w, OutputLive, n, src.node, next)
			s.writeOutput(w, rc, r, data, false)
			return
		}
		writeOutputHeader(w, OutputLive, n, src.node, -1)
		s.followLive(ctx, w, rc, r, src.live, from)
	case OutputElsewhere:
		writeOutputHeader(w, OutputElsewhere, n, src.node, -1)
		if follow {
			s.followElsewhere(ctx, w, rc, r, id, n, from)
		}
	default:
		s.sendStored(ctx, w, rc, r, id, n, from, follow)
	}
}

// outputQuery is what GET /v1/runs/{id}/output asks for: the attempt (0:
// the run's current one), the offset to send from, and whether to follow.
type outputQuery struct {
	attempt int
	from    int64
	follow  bool
}

// parseOutputQuery reads the query of GET /v1/runs/{id}/output; false
// when it answered 400.
func parseOutputQuery(w http.ResponseWriter, r *http.Request) (outputQuery, bool) {
	var oq outputQuery
	if !checkQuery(w, r, "attempt", "from", "follow") {
		return oq, false
	}
	q := r.URL.Query()
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "attempt: want a number from 1, got "+clip(strconv.Quote(v)))
			return oq, false
		}
		oq.attempt = n
	}
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "from: want an offset in bytes from 0, got "+clip(strconv.Quote(v)))
			return oq, false
		}
		oq.from = n
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "follow: want 1 or 0, got "+clip(strconv.Quote(v)))
			return oq, false
		}
		oq.follow = b && r.Method != http.MethodHead
	}
	return oq, true
}

// followElsewhere follows attempt n of run id, which runs on another
// node: it waits for its end, then sends its stored output from from.
func (s *Server) followElsewhere(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, r *http.Request, id string, n int, from int64) {
	if err := s.writeOutput(w, rc, r, nil, true); err != nil {
		return
	}
	a, err := s.awaitEnd(ctx, id, n)
	if err != nil {
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "output follow: wait for the attempt's end", "run", id, "attempt", n, "error", err)
		}
		return
	}
	// The stored output is sent within the budget of the replies,
	// waiting for a turn: the reply has begun.
	if !s.replies.wait(ctx) {
		return
	}
	defer s.replies.give()
	out := storedFrom(a, from)
	a = nil
	s.writeOutput(w, rc, r, []byte(out), false)
}

// sendStored sends the stored output of attempt n of run id from from.
func (s *Server) sendStored(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, r *http.Request, id string, n int, from int64, follow bool) {
	if follow {
		// A stored output is sent within the budget of the replies too.
		if !s.replies.take() {
			writeBusy(w, fmt.Sprintf("%d attempts replies are being sent already, the most this daemon makes at once; ask again after Retry-After", cap(s.replies)))
			return
		}
		defer s.replies.give()
	}
	a, err := s.storedAttempt(ctx, id, n)
	if err != nil {
		if ctx.Err() == nil {
			s.engineError(w, r, err, CodeUnknownRun)
		}
		return
	}
	out := storedFrom(a, from)
	node, total := a.Node, a.OutputBytes
	a = nil
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	writeOutputHeader(w, OutputStored, n, node, total)
	if r.Method != http.MethodHead {
		s.writeOutput(w, rc, r, []byte(out), false)
	}
}

// outputSource is where the output of an attempt is read.
type outputSource struct {
	state OutputState
	live  LiveOutput // OutputLive
	node  string
}

// settleWait bounds how long locateOutput waits for an attempt of this
// node that the store says runs, but that is not running here: it is
// about to start, or has just ended and its result is being written.
const settleWait = 10 * time.Second

// locateOutput finds where the output of attempt n of run id is: live on
// this node, stored, or running on another node. run is the run as read
// before.
func (s *Server) locateOutput(ctx context.Context, id string, n int, run *jobs.Run) (outputSource, error) {
	node := s.cfg.Engine.NodeID()
	var settle <-chan time.Time
	for {
		if live, attempt, ok := s.cfg.Engine.LiveOutput(id); ok && attempt == n {
			return outputSource{state: OutputLive, live: live, node: node}, nil
		}
		if run.Attempt != n || run.Status != jobs.StatusRunning {
			return outputSource{state: OutputStored}, nil
		}
		if run.Node != node {
			return outputSource{state: OutputElsewhere, node: run.Node}, nil
		}
		if settle == nil {
			t := time.NewTimer(settleWait)
			defer t.Stop()
			settle = t.C
		}
		select {
		case <-ctx.Done():
			return outputSource{}, ctx.Err()
		case <-settle:
			// Not here after all (a store that names this node for
			// another's attempt): as another node's.
			return outputSource{state: OutputElsewhere, node: run.Node}, nil
		case <-time.After(min(s.cfg.WaitPoll, 50*time.Millisecond)):
		}
		var err error
		if run, err = s.cfg.Store.RunGet(ctx, id); err != nil {
			return outputSource{}, err
		}
	}
}

// awaitEnd polls the store, every WaitPoll, until attempt n of run id
// has ended, and returns it with its output.
func (s *Server) awaitEnd(ctx context.Context, id string, n int) (*store.ClippedAttempt, error) {
	tick := time.NewTicker(s.cfg.WaitPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		run, err := s.cfg.Store.RunGet(ctx, id)
		if err != nil {
			return nil, err
		}
		if run.Attempt == n && run.Status == jobs.StatusRunning {
			continue
		}
		a, err := s.storedAttempt(ctx, id, n)
		if err != nil {
			return nil, err
		}
		if !a.FinishedAt.IsZero() {
			return a, nil
		}
	}
}

// storedAttempt reads attempt n of run id with its whole stored output.
func (s *Server) storedAttempt(ctx context.Context, id string, n int) (*store.ClippedAttempt, error) {
	as, err := s.cfg.Store.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: id, Number: n})
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, fmt.Errorf("%w: run %s has no attempt %d", store.ErrNotFound, clip(strconv.Quote(id)), n)
	}
	return as[0], nil
}

// followLive sends a live output from offset from as it is written, each
// piece flushed, until the attempt ends, the client goes away (ctx) or a
// write fails: a client that does not read is cut off after WriteTimeout.
func (s *Server) followLive(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, r *http.Request, live LiveOutput, from int64) {
	// No read deadline while the follow waits for output (the server
	// clears it for its read that watches for the client's going away,
	// which cancels ctx). Each write has a deadline of its own.
	_ = rc.SetReadDeadline(time.Time{})
	if s.writeOutput(w, rc, r, nil, true) != nil {
		return
	}
	for {
		data, next, done, err := live.Next(ctx, from)
		if err != nil {
			return
		}
		if s.writeOutput(w, rc, r, data, true) != nil {
			return
		}
		from = next
		if done {
			return
		}
	}
}

// writeOutput writes data in pieces of streamChunk bytes, each with a
// write deadline of WriteTimeout, then flushes when flush is set.
func (s *Server) writeOutput(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, data []byte, flush bool) error {
	for len(data) > 0 {
		n := min(len(data), streamChunk)
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(data[:n]); err != nil {
			s.log.DebugContext(r.Context(), "output reply cut short", "path", clip(r.URL.Path), "error", err)
			return err
		}
		data = data[n:]
	}
	if !flush {
		return nil
	}
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err := rc.Flush(); err != nil {
		s.log.DebugContext(r.Context(), "output reply cut short", "path", clip(r.URL.Path), "error", err)
		return err
	}
	return nil
}

// writeOutputHeader writes the header of a 200 output reply; next < 0
// leaves OutputNextHeader out.
func writeOutputHeader(w http.ResponseWriter, state OutputState, attempt int, node string, next int64) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set(OutputStateHeader, string(state))
	h.Set(OutputAttemptHeader, strconv.Itoa(attempt))
	if node != "" {
		h.Set(OutputNodeHeader, node)
	}
	if next >= 0 {
		h.Set(OutputNextHeader, strconv.FormatInt(next, 10))
	}
	w.WriteHeader(http.StatusOK)
}

// storedFrom returns the stored output of a from offset from of the
// output as the attempt wrote it. A stored output that was truncated is
// its head, a line "[... N bytes truncated ...]" and its tail, each as
// long as the other: an offset in the part left out gets that line, its
// count from the offset on, and the tail.
func storedFrom(a *store.ClippedAttempt, from int64) string {
	out := a.Output + a.Tail
	if from <= 0 {
		return out
	}
	if !a.Truncated {
		return out[min(from, int64(len(out))):]
	}
	head, tail, ok := splitTruncated(out, a.OutputBytes)
	if !ok {
		return out
	}
	tailFrom := a.OutputBytes - int64(len(tail))
	switch {
	case from < int64(len(head)):
		return out[from:]
	case from < tailFrom:
		return truncationMarker(tailFrom-from) + tail
	}
	return tail[min(from-tailFrom, int64(len(tail))):]
}

// truncationMarker is the line of jobs/command's Output in place of n
// bytes left out.
func truncationMarker(n int64) string {
	return "\n[... " + strconv.FormatInt(n, 10) + " bytes truncated ...]\n"
}

// splitTruncated splits a truncated stored output of total bytes written
// into its head and tail, which are as long as each other around the
// marker.
func splitTruncated(out string, total int64) (head, tail string, ok bool) {
	for digits := 1; digits <= 20; digits++ {
		m := len(truncationMarker(0)) - 1 + digits
		if (len(out)-m)%2 != 0 || len(out) < m {
			continue
		}
		l := (len(out) - m) / 2
		marker := truncationMarker(total - 2*int64(l))
		if len(marker) == m && strings.HasPrefix(out[l:], marker) {
			return out[:l], out[l+m:], true
		}
	}
	return "", "", false
}

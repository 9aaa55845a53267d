package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// checkAttemptToken checks an AttemptTokenHeader value against the
// request: the token must be that of the run in the path, and the request
// POST .../progress or POST .../cancel of it. It returns the attempt the
// request acts as, or why it is refused.
func (s *Server) checkAttemptToken(r *http.Request, header string) (attemptScope, string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/")
	id, action, _ := strings.Cut(rest, "/")
	if !ok || r.Method != http.MethodPost || (action != "progress" && action != "cancel") || id == "" {
		return attemptScope{}, "an attempt token acts only on the progress and cancel of its own run; " +
			"send other requests without it, as a user who may use the socket"
	}
	n, token, _ := strings.Cut(header, ":")
	attempt, err := strconv.Atoi(n)
	if err != nil || attempt < 1 || !s.cfg.Engine.CheckAttemptToken(id, attempt, token) {
		return attemptScope{}, "the attempt token is not one that this daemon gave an attempt of this run"
	}
	return attemptScope{runID: id, attempt: attempt}, ""
}

// listRuns answers GET /v1/runs: a page of runs, newest first, and the
// id of its last run as next when another page follows (read by asking the
// store for one run more than the page).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "job", "status", "since", "until", "before", "limit") {
		return
	}
	q := r.URL.Query()
	f := store.RunFilter{Job: q.Get("job"), Before: q.Get("before"), Limit: 100}
	if v := q.Get("status"); v != "" {
		st, err := jobs.ParseStatus(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "status: "+err.Error())
			return
		}
		f.Status = st
	}
	if !queryLimit(w, q, &f.Limit) || !queryRange(w, q, &f.Since, &f.Until) {
		return
	}
	page := f.Limit
	f.Limit++
	runs, err := s.cfg.Store.RunsList(r.Context(), f)
	switch {
	case errors.Is(err, store.ErrNotFound) && f.Before != "":
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("before: there is no run %s (a page starts after a run that is listed)",
			clip(strconv.Quote(f.Before))))
		return
	case err != nil:
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	reply := RunsPage{Runs: make([]Run, 0, min(len(runs), page))}
	if len(runs) > page {
		runs = runs[:page]
		reply.Next = runs[page-1].ID
	}
	for _, run := range runs {
		reply.Runs = append(reply.Runs, NewRun(run))
	}
	writeJSON(w, http.StatusOK, reply)
}

// RunsPage is the reply of GET /v1/runs: a page of runs, newest first,
// and Next, the id of the last of them when more runs follow ("" when
// none): the before of the next page.
type RunsPage struct {
	Runs []Run  `json:"runs"`
	Next string `json:"next,omitempty"`
}

// getRun returns a run, after a long poll when wait is given.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "wait", "status") {
		return
	}
	q := r.URL.Query()
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "wait: want a duration such as 60s, got "+clip(strconv.Quote(v)))
			return
		}
		wait = min(d, s.cfg.MaxWait)
	}
	var seen jobs.Status
	if v := q.Get("status"); v != "" {
		st, err := jobs.ParseStatus(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "status: "+err.Error())
			return
		}
		seen = st
	}
	ctx := r.Context()
	id := r.PathValue("id")
	run, err := s.cfg.Store.RunGet(ctx, id)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	if seen == "" {
		seen = run.Status
	}
	if wait > 0 && run.Status == seen && !run.Status.Terminal() {
		if !s.polls.take() {
			s.log.DebugContext(ctx, "long poll refused: busy", "max_long_polls", cap(s.polls))
			writeBusy(w, fmt.Sprintf("%d long polls are waiting already, the most this daemon serves at once; ask again after Retry-After", cap(s.polls)))
			return
		}
		defer s.polls.give()
		// The long poll outlives the server's read and write timeouts.
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(wait + 10*time.Second)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		run, err = s.waitRun(ctx, id, run, seen, wait)
		if err != nil {
			s.engineError(w, r, err, CodeUnknownRun)
			return
		}
	}
	writeJSON(w, http.StatusOK, NewRun(run))
}

// waitRun polls the run (another node may change it) until its status is
// not seen, it is finished, wait is over, the client is gone or the server
// closes.
func (s *Server) waitRun(ctx context.Context, id string, run *jobs.Run, seen jobs.Status, wait time.Duration) (*jobs.Run, error) {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	tick := time.NewTicker(s.cfg.WaitPoll)
	defer tick.Stop()
	for run.Status == seen && !run.Status.Terminal() {
		select {
		case <-tick.C:
		case <-timeout.C:
			return run, nil
		case <-ctx.Done():
			return run, nil
		case <-s.done:
			return run, nil
		}
		next, err := s.cfg.Store.RunGet(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return run, nil
			}
			return nil, err
		}
		run = next
	}
	return run, nil
}

// runAttempts streams a run's attempts with their output (replyStream):
// the reply is not built in memory, whatever its size, and at most
// MaxAttemptReplies are made at once.
func (s *Server) runAttempts(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	if !s.replies.take() {
		s.log.DebugContext(r.Context(), "attempts reply refused: busy", "max_attempt_replies", cap(s.replies))
		writeBusy(w, fmt.Sprintf("%d attempts replies are being sent already, the most this daemon makes at once; ask again after Retry-After", cap(s.replies)))
		return
	}
	defer s.replies.give()
	as, err := s.cfg.Store.RunAttempts(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := newReplyStream(w, s.cfg.WriteTimeout).writeAttempts(as); err != nil {
		s.log.DebugContext(r.Context(), "attempts reply cut short", "path", clip(r.URL.Path), "error", err)
	}
}

// attemptOutput streams the output of one attempt as it is stored, as
// text/plain, within the budget of the attempts replies: the attempt's
// output is the one the daemon holds for the reply.
func (s *Server) attemptOutput(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("attempt %s: want a number from 1", clip(strconv.Quote(r.PathValue("n")))))
		return
	}
	if !s.replies.take() {
		s.log.DebugContext(r.Context(), "attempt output refused: busy", "max_attempt_replies", cap(s.replies))
		writeBusy(w, fmt.Sprintf("%d attempts replies are being sent already, the most this daemon makes at once; ask again after Retry-After", cap(s.replies)))
		return
	}
	defer s.replies.give()
	as, err := s.cfg.Store.RunAttemptsClipped(r.Context(), store.AttemptsParams{RunID: r.PathValue("id"), Number: n})
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	if len(as) == 0 {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("run %s has no attempt %d", clip(strconv.Quote(r.PathValue("id"))), n))
		return
	}
	out := as[0].Output
	as[0] = nil
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rs := newReplyStream(w, s.cfg.WriteTimeout)
	for i := 0; i < len(out) && rs.err == nil; i += streamChunk {
		rs.buf = append(rs.buf, out[i:min(i+streamChunk, len(out))]...)
		rs.flush()
	}
	if rs.err != nil {
		s.log.DebugContext(r.Context(), "attempt output cut short", "path", clip(r.URL.Path), "error", rs.err)
	}
}

// runChildren lists the runs that the end of a run made (its chain).
func (s *Server) runChildren(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	id := r.PathValue("id")
	kids, err := s.cfg.Store.RunChildren(r.Context(), id)
	if err == nil && len(kids) == 0 {
		_, err = s.cfg.Store.RunGet(r.Context(), id) // none, or no such run
	}
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	out := make([]Run, 0, len(kids))
	for _, k := range kids {
		out = append(out, NewRun(k))
	}
	writeJSON(w, http.StatusOK, struct {
		Runs []Run `json:"runs"`
	}{out})
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	es, err := s.cfg.Store.RunEvents(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	out := make([]Event, 0, len(es))
	for _, e := range es {
		out = append(out, newEvent(e))
	}
	writeJSON(w, http.StatusOK, struct {
		Events []Event `json:"events"`
	}{out})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	if scope, ok := r.Context().Value(attemptKey{}).(attemptScope); ok && scope.runID != r.PathValue("id") {
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: an attempt token acts on its own run only")
		return
	}
	run, err := s.cfg.Engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	writeJSON(w, http.StatusOK, NewRun(run))
}

func (s *Server) rerun(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	run, err := s.cfg.Engine.Rerun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	writeJSON(w, http.StatusCreated, NewRun(run))
}

func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	var req ProgressRequest
	if !checkQuery(w, r) || !decodeBody(w, r, &req, false) {
		return
	}
	switch {
	case req.Attempt < 1:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "attempt: want the job's SCHEDULERD_ATTEMPT, a number from 1")
		return
	case req.Percent < 0 || req.Percent > 100:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("percent: want 0 to 100, got %d", req.Percent))
		return
	case len(req.Message) > MaxProgressMessage:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("message is longer than %d bytes", MaxProgressMessage))
		return
	}
	// Only the attempt's own process reports its progress.
	scope, ok := r.Context().Value(attemptKey{}).(attemptScope)
	if c, _ := CallerFrom(r.Context()); c.Via == ViaAPI {
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: progress is reported on the control socket only, "+
			"by `schedulerd progress` from inside the job")
		return
	}
	switch {
	case !ok:
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: progress needs the attempt's token "+
			"(SCHEDULERD_ATTEMPT_TOKEN, sent by `schedulerd progress` from inside the job) in the "+AttemptTokenHeader+" header")
		return
	case scope.runID != r.PathValue("id"):
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: an attempt token acts on its own run only")
		return
	case scope.attempt != req.Attempt:
		writeError(w, http.StatusForbidden, CodePermissionDenied, fmt.Sprintf(
			"permission denied: the attempt token is that of attempt %d, not %d", scope.attempt, req.Attempt))
		return
	}
	if err := s.cfg.Engine.Progress(r.Context(), r.PathValue("id"), req.Attempt, req.Percent, req.Message); err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

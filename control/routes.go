package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// readWhole reads the whole request body, at most MaxBodyBytes of it, in
// place of r.Body (413 past it), and tells the limit listener that the
// connection's request is being served: a client stuck halfway through
// its body can be evicted to make room, and a request being served cannot.
func readWhole(w http.ResponseWriter, r *http.Request) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "read the request body: "+err.Error())
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
		lc.l.markRead(lc)
	}
	return true
}

// routes is the API. Each route needs a caller (CallerFrom) whose role
// allows it, else 403. Each path answers 405 to other methods and every
// other path 404, both with a JSON error; a path with dot segments gets
// 400.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, need Role, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, requireRole(need, h))
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, path, method))
		})
	}
	handle("GET", "/v1/jobs", RoleRead, s.listJobs)
	handle("POST", "/v1/jobs/{job}/trigger", RoleOperate, s.trigger)
	handle("POST", "/v1/jobs/{job}/pause", RoleOperate, s.pause(true))
	handle("POST", "/v1/jobs/{job}/resume", RoleOperate, s.pause(false))
	handle("POST", "/v1/jobs/{job}/forget", RoleOperate, s.forget)
	handle("POST", "/v1/jobs/{job}/backfill", RoleOperate, s.backfill)
	handle("GET", "/v1/runs", RoleRead, s.listRuns)
	handle("GET", "/v1/runs/{id}", RoleRead, s.getRun)
	handle("GET", "/v1/runs/{id}/attempts", RoleRead, s.runAttempts)
	handle("GET", "/v1/runs/{id}/attempts/{n}/output", RoleRead, s.attemptOutput)
	handle("GET", "/v1/runs/{id}/output", RoleRead, s.runOutput)
	handle("GET", "/v1/runs/{id}/events", RoleRead, s.runEvents)
	handle("GET", "/v1/runs/{id}/children", RoleRead, s.runChildren)
	handle("POST", "/v1/runs/{id}/cancel", RoleOperate, s.cancel)
	handle("POST", "/v1/runs/{id}/rerun", RoleOperate, s.rerun)
	// Progress needs the attempt's token besides (the socket only).
	handle("POST", "/v1/runs/{id}/progress", RoleOperate, s.progress)
	handle("GET", "/v1/stats/runs", RoleRead, s.runStats)
	handle("GET", "/v1/nodes", RoleRead, s.listNodes)
	handle("GET", "/v1/notifications", RoleRead, s.listNotifications)
	handle("GET", "/v1/health", RoleRead, s.health)
	handle("POST", "/v1/reload", RoleAdmin, s.reload)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, clip(r.URL.Path)))
	})
	return s.recoverPanics(rejectDotSegments(mux))
}

// recoverPanics turns a panic in a handler into a logged 500.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("control request panicked", "method", r.Method, "path", clip(r.URL.Path), "panic", p)
				writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// engineError maps an error of the engine or the store to a reply.
// notFound is the code of store.ErrNotFound on this route.
func (s *Server) engineError(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	msg := err.Error()
	switch {
	case errors.Is(err, ErrUnknownJob):
		writeError(w, http.StatusNotFound, CodeUnknownJob, msg)
	case errors.Is(err, ErrUnknownRun):
		writeError(w, http.StatusNotFound, CodeUnknownRun, msg)
	case errors.Is(err, store.ErrNotFound):
		if id := r.PathValue("id"); notFound == CodeUnknownRun && id != "" {
			msg = fmt.Sprintf("unknown run %s", clip(strconv.Quote(id)))
		}
		writeError(w, http.StatusNotFound, notFound, msg)
	case errors.Is(err, ErrDuplicate), errors.Is(err, store.ErrDuplicate):
		writeError(w, http.StatusConflict, CodeDuplicate, msg)
	case errors.Is(err, ErrInvalidWindow), errors.Is(err, jobs.ErrWindow):
		writeError(w, http.StatusBadRequest, CodeInvalidWindow, msg)
	case errors.Is(err, ErrFenced), errors.Is(err, store.ErrFenced):
		writeError(w, http.StatusConflict, CodeFenced, msg)
	case errors.Is(err, ErrInvalidTransition), errors.Is(err, jobs.ErrInvalidTransition):
		writeError(w, http.StatusConflict, CodeInvalidTransition, msg)
	case errors.Is(err, ErrNoSchedule):
		writeError(w, http.StatusConflict, CodeNoSchedule, msg)
	case errors.Is(err, ErrJobDeclared):
		writeError(w, http.StatusConflict, CodeJobDeclared, msg)
	case errors.Is(err, ErrNotExpected):
		writeError(w, http.StatusNotFound, CodeNotExpected, msg)
	case errors.Is(err, ErrReloadRejected):
		writeError(w, http.StatusUnprocessableEntity, CodeReloadRejected, msg)
	case errors.Is(err, ErrBadRequest):
		writeError(w, http.StatusBadRequest, CodeBadRequest, msg)
	default:
		s.log.ErrorContext(r.Context(), "control request failed", "method", r.Method, "path", clip(r.URL.Path), "error", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, msg)
	}
}

// checkQuery rejects query parameters other than allowed, and repeated ones.
func checkQuery(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "malformed query: "+err.Error())
		return false
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		switch {
		case !ok:
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("unknown query parameter %s", clip(strconv.Quote(k))))
			return false
		case len(vs) > 1:
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %s is given twice", clip(strconv.Quote(k))))
			return false
		}
	}
	return true
}

// decodeBody reads a JSON object into v, rejecting unknown fields, trailing
// data and bodies over MaxBodyBytes. An empty body is accepted when
// allowEmpty and leaves v alone.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "read the request body: "+err.Error())
		return false
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		if allowEmpty {
			return true
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the request needs a JSON object body")
		return false
	}
	if data[0] != '{' {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the request body must be a JSON object")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "invalid JSON body: "+clip(err.Error()))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "invalid JSON body: data after the object")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode reply: " + err.Error(), Code: CodeInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

// clip shortens text that comes from a request before it is echoed.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// userName returns the name of uid, or "".
func userName(uid uint32) string {
	u, err := lookupUserID(uid)
	if err != nil {
		return ""
	}
	return u.Username
}

// queryLimit reads the query's limit, 1 to store.MaxListLimit, into
// *limit when it is given; a bad one gets 400 and false.
func queryLimit(w http.ResponseWriter, q url.Values, limit *int) bool {
	v := q.Get("limit")
	if v == "" {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxListLimit {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("limit: want a number from 1 to %d, got %s", store.MaxListLimit, clip(strconv.Quote(v))))
		return false
	}
	*limit = n
	return true
}

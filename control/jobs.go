package control

import (
	"fmt"
	"net/http"
	"strings"
)

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	js, err := s.cfg.Engine.Jobs(r.Context())
	if err != nil {
		s.engineError(w, r, err, CodeUnknownJob)
		return
	}
	if js == nil {
		js = []JobInfo{}
	}
	writeJSON(w, http.StatusOK, struct {
		Jobs []JobInfo `json:"jobs"`
	}{js})
}

func (s *Server) trigger(w http.ResponseWriter, r *http.Request) {
	var req TriggerRequest
	if !checkQuery(w, r) || !decodeBody(w, r, &req, true) {
		return
	}
	p := TriggerParams{DedupID: req.DedupID, Payload: req.Payload, NotBefore: Time(req.NotBefore), NotAfter: Time(req.NotAfter)}
	switch {
	case len(p.DedupID) > MaxDedupID:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("dedup_id is longer than %d bytes", MaxDedupID))
		return
	case len(p.Payload) > MaxPayload:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("payload is longer than %d bytes", MaxPayload))
		return
	case strings.ContainsRune(p.DedupID, 0) || strings.ContainsRune(p.Payload, 0):
		// The payload reaches the job as an environment variable.
		writeError(w, http.StatusBadRequest, CodeBadRequest, "dedup_id and payload must not contain a NUL byte")
		return
	case !p.NotBefore.IsZero() && !p.NotAfter.IsZero() && !p.NotAfter.After(p.NotBefore):
		writeError(w, http.StatusBadRequest, CodeInvalidWindow, "invalid window: not_after must be after not_before")
		return
	}
	run, err := s.cfg.Engine.Trigger(r.Context(), r.PathValue("job"), p)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownJob)
		return
	}
	writeJSON(w, http.StatusCreated, NewRun(run))
}

func (s *Server) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
			return
		}
		job := r.PathValue("job")
		f := s.cfg.Engine.Resume
		if paused {
			f = s.cfg.Engine.Pause
		}
		if err := f(r.Context(), job); err != nil {
			s.engineError(w, r, err, CodeUnknownJob)
			return
		}
		writeJSON(w, http.StatusOK, PauseReply{Job: job, Paused: paused})
	}
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	job := r.PathValue("job")
	if err := s.cfg.Engine.Forget(r.Context(), job); err != nil {
		s.engineError(w, r, err, CodeNotExpected)
		return
	}
	writeJSON(w, http.StatusOK, ForgetReply{Job: job, Forgotten: true})
}

package control

import (
	"net/http"
)

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	ns, err := s.cfg.Store.NodesList(r.Context(), true)
	if err != nil {
		s.engineError(w, r, err, CodeNotFound)
		return
	}
	out := make([]Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, NewNode(n, s.cfg.InactiveThreshold))
	}
	writeJSON(w, http.StatusOK, struct {
		Nodes []Node `json:"nodes"`
	}{out})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	writeHealth(w, s.gate.health(r.Context()))
}

func writeHealth(w http.ResponseWriter, h Health) {
	if h.Problems == nil {
		h.Problems = []string{}
	}
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	if err := s.cfg.Engine.Reload(r.Context()); err != nil {
		writeError(w, http.StatusUnprocessableEntity, CodeReloadRejected, "reload rejected, the running config stays: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ReloadReply{Applied: true})
}

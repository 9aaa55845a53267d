package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// BackfillRequest is the body of POST /v1/jobs/{job}/backfill. From and
// To bound the ticks, both included: RFC 3339 times, or dates
// (2026-11-01) in the job's time zone, a date being the start of its day
// for From and the end of it for To.
type BackfillRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	DryRun bool   `json:"dry_run,omitempty"`
	// MaxParallel bounds the backfill's runs active at once; 0: 1.
	MaxParallel int `json:"max_parallel,omitempty"`
	// Yes allows more than 10,000 ticks.
	Yes bool `json:"yes,omitempty"`
}

// BackfillParams are the options of a backfill, as the engine takes them
// (see BackfillRequest).
type BackfillParams struct {
	From, To    string
	DryRun      bool
	MaxParallel int
	Yes         bool
}

// BackfillReply is the reply of a backfill.
type BackfillReply struct {
	Job string `json:"job"`
	// From and To are the range as resolved, both included, in the time
	// zone dates were read in (TimeZone).
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	TimeZone string    `json:"time_zone"`
	// Ticks counts the ticks in the range, Taken those that already had a
	// run (which get none).
	Ticks  int  `json:"ticks"`
	Taken  int  `json:"taken"`
	DryRun bool `json:"dry_run"`
	// List is the ticks, of a dry run (the first 10,000).
	List []BackfillTick `json:"list,omitempty"`
	// Backfill is the backfill made; absent for a dry run and when every
	// tick had a run.
	Backfill *BackfillState `json:"backfill,omitempty"`
}

// BackfillTick is a tick of a dry run, with the run it has, if any.
type BackfillTick struct {
	At    time.Time `json:"at"`
	RunID string    `json:"run_id,omitempty"`
}

// BackfillState is a backfill as stored.
type BackfillState struct {
	ID          string `json:"id"`
	MaxParallel int    `json:"max_parallel"`
	// Created counts the runs made so far, Skipped the ticks found with a
	// run; Next is the next tick to handle, null once all are.
	Created int64      `json:"created"`
	Skipped int64      `json:"skipped"`
	Next    *time.Time `json:"next"`
	Done    bool       `json:"done"`
}

func (s *Server) backfill(w http.ResponseWriter, r *http.Request) {
	var req BackfillRequest
	if !checkQuery(w, r) || !decodeBody(w, r, &req, false) {
		return
	}
	switch {
	case req.From == "" || req.To == "":
		writeError(w, http.StatusBadRequest, CodeBadRequest, "from and to are required: RFC 3339 times or dates (2026-11-01)")
		return
	case len(req.From) > 64 || len(req.To) > 64 || strings.ContainsRune(req.From+req.To, 0):
		writeError(w, http.StatusBadRequest, CodeBadRequest, "from and to must be RFC 3339 times or dates (2026-11-01)")
		return
	case req.MaxParallel < 0:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("max_parallel must be at least 1, not %d", req.MaxParallel))
		return
	}
	reply, err := s.cfg.Engine.Backfill(r.Context(), r.PathValue("job"), BackfillParams(req))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownJob)
		return
	}
	status := http.StatusCreated
	if reply.Backfill == nil {
		status = http.StatusOK
	}
	writeJSON(w, status, reply)
}

// Backfill makes runs of a cron job's past ticks that have none, or with
// DryRun lists them.
func (c *Client) Backfill(ctx context.Context, job string, req BackfillRequest) (*BackfillReply, error) {
	var out BackfillReply
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/backfill", nil, req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

// jobAction serves the forms of a job's page: trigger (with a payload, a
// window and a dedup id), pause and resume. Each goes through the route
// of the API (Act), as the session's caller: the route's role check,
// validation and errors are the API's.
func (d *Dashboard) jobAction(w http.ResponseWriter, r *http.Request, s *session) {
	job, action := r.PathValue("job"), r.PathValue("action")
	path := "/v1/jobs/" + url.PathEscape(job) + "/" + action
	var body []byte
	switch action {
	case "trigger":
		req, msg := triggerRequest(r, time.Now())
		if msg != "" {
			d.fail(w, r, s, http.StatusBadRequest, msg)
			return
		}
		body, _ = json.Marshal(req)
	case "pause", "resume":
	default:
		d.fail(w, r, s, http.StatusNotFound, "There is no such action.")
		return
	}
	status, reply := d.cfg.API.Act(r.Context(), s.caller, http.MethodPost, path, body)
	if !d.acted(w, r, s, status, reply) {
		return
	}
	if action == "trigger" {
		d.toRun(w, r, reply)
		return
	}
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(job), http.StatusSeeOther)
}

// runAction serves the forms of a run's page: cancel and rerun, through
// the routes of the API as jobAction does.
func (d *Dashboard) runAction(w http.ResponseWriter, r *http.Request, s *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if action != "cancel" && action != "rerun" {
		d.fail(w, r, s, http.StatusNotFound, "There is no such action.")
		return
	}
	status, reply := d.cfg.API.Act(r.Context(), s.caller, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/"+action, nil)
	if !d.acted(w, r, s, status, reply) {
		return
	}
	d.toRun(w, r, reply)
}

// acted reports whether an action succeeded; when it did not, it answers
// with the API's status and message. A success makes the pages read
// their data anew.
func (d *Dashboard) acted(w http.ResponseWriter, r *http.Request, s *session, status int, reply []byte) bool {
	if status >= 200 && status < 300 {
		d.snaps.forget()
		return true
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := "The daemon refused the action."
	if json.Unmarshal(reply, &e) == nil && e.Error != "" {
		msg = "The daemon refused the action: " + e.Error
	}
	d.fail(w, r, s, status, msg)
	return false
}

// toRun sends the browser to the page of the run an action replied with.
func (d *Dashboard) toRun(w http.ResponseWriter, r *http.Request, reply []byte) {
	var run control.Run
	if err := json.Unmarshal(reply, &run); err != nil || run.ID == "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
}

// triggerRequest reads the trigger form: payload, dedup_id, not_before
// and not_after (RFC 3339, or +DURATION from now). A browser sends the
// line breaks of a text area as CRLF; the payload gets LF, as typed.
func triggerRequest(r *http.Request, now time.Time) (control.TriggerRequest, string) {
	req := control.TriggerRequest{
		Payload: strings.ReplaceAll(r.PostFormValue("payload"), "\r\n", "\n"),
		DedupID: strings.TrimSpace(r.PostFormValue("dedup_id")),
	}
	for _, f := range []struct {
		name string
		to   **time.Time
	}{{"not_before", &req.NotBefore}, {"not_after", &req.NotAfter}} {
		t, err := parseWhen(strings.TrimSpace(r.PostFormValue(f.name)), now)
		if err != nil {
			return req, fmt.Sprintf("%s: %v", strings.ReplaceAll(f.name, "_", " "), err)
		}
		*f.to = t
	}
	return req, ""
}

// parseWhen reads a time of the trigger form: RFC 3339, or "+DURATION"
// from now; nil for "".
func parseWhen(s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d >= 0 {
			t := now.Add(d).UTC()
			return &t, nil
		}
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		t = t.UTC()
		return &t, nil
	}
	return nil, fmt.Errorf("want a time such as 2026-05-01T03:00:00Z or +DURATION such as +30m, got %q", clip(s))
}

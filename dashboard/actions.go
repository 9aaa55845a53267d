package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

// jobAction serves the forms of a job's page: trigger (with a payload, a
// window and a dedup id), backfill, pause and resume. Each goes through the route
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
	case "backfill":
		form, req, msg := backfillRequest(r)
		if msg != "" {
			d.fail(w, r, s, http.StatusBadRequest, msg)
			return
		}
		body, _ = json.Marshal(req)
		status, reply := d.cfg.API.Act(r.Context(), s.caller, http.MethodPost, path, body)
		if !d.acted(w, r, s, status, reply) {
			return
		}
		d.backfilled(w, r, s, form, reply)
		return
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

// backfillForm is what the backfill form sent, kept to send again from
// the page of its dry run.
type backfillForm struct {
	From, To    string
	MaxParallel int
	Yes         bool
}

// backfillRequest reads the backfill form: from and to (RFC 3339 times or
// dates, which the daemon reads), max_parallel (1 when empty), and the
// dry_run and yes boxes.
func backfillRequest(r *http.Request) (backfillForm, control.BackfillRequest, string) {
	f := backfillForm{From: strings.TrimSpace(r.PostFormValue("from")), To: strings.TrimSpace(r.PostFormValue("to")),
		MaxParallel: 1, Yes: r.PostFormValue("yes") != ""}
	if v := strings.TrimSpace(r.PostFormValue("max_parallel")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, control.BackfillRequest{}, fmt.Sprintf("max parallel: want a whole number of at least 1, got %q", clip(v))
		}
		f.MaxParallel = n
	}
	if f.From == "" || f.To == "" {
		return f, control.BackfillRequest{}, "from and to: both are needed, each an RFC 3339 time or a date such as 2026-11-01"
	}
	return f, control.BackfillRequest{From: f.From, To: f.To, DryRun: r.PostFormValue("dry_run") != "",
		MaxParallel: f.MaxParallel, Yes: f.Yes}, ""
}

// backfillPage is the data of the page that says what a backfill found
// and did.
type backfillPage struct {
	base
	Reply control.BackfillReply
	Form  backfillForm
	// More counts the ticks of a dry run that its list leaves out; ToMake
	// those without a run.
	More, ToMake int
}

// backfilled shows the reply of a backfill.
func (d *Dashboard) backfilled(w http.ResponseWriter, r *http.Request, s *session, f backfillForm, reply []byte) {
	p := backfillPage{Form: f}
	if err := json.Unmarshal(reply, &p.Reply); err != nil {
		d.fail(w, r, s, http.StatusBadGateway, "The daemon's reply to the backfill could not be read.")
		return
	}
	title := "Backfill of " + p.Reply.Job
	if p.Reply.DryRun {
		title = "Backfill dry run of " + p.Reply.Job
	}
	p.base = d.base(r, s, title)
	p.More = p.Reply.Ticks - len(p.Reply.List)
	p.ToMake = p.Reply.Ticks - p.Reply.Taken
	d.render(w, r, http.StatusOK, "backfill", p)
}

package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// funcs are the functions of the templates. None returns template.HTML:
// every value a page shows, job text above all, is escaped by
// html/template.
var funcs = template.FuncMap{
	"asset":       assetURL,
	"statusText":  statusText,
	"statusClass": statusClass,
	"reasonText":  reasonText,
	"eventReason": eventReason,
	"isSet":       isSet,
	"utc":         utcText,
	"iso":         isoText,
	"inZone":      inZone,
	"weekday":     func(v any, tz string) string { return when(v).In(zone(tz)).Format("Mon") },
	"zoneName":    zoneName,
	"sameAsUTC":   sameAsUTC,
	"zoned":       func(v any, tz string) zonedTime { return zonedTime{T: when(v), Zone: tz} },
	"dur":         durText,
	"since":       since,
	"shortID":     shortID,
	"jobURL":      jobURL,
	"runURL":      runURL,
	"runsURL":     runsURL,
	"pct":         func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"px":          func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"output":      func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") },
	"bytes":       bytesText,
	"deref":       func(p *int) int { return *p },
	"schedule":    scheduleText,
	"kindText":    kindText,
	"jobState":    jobState,
	"jitter":      func(t Tick) time.Duration { return t.Start.Sub(t.Fire) },
	"terminal":    func(st jobs.Status) bool { return st.Terminal() },
	"outputURL":   outputURL,
	"followURL":   followURL,
	"gap":         func(a *store.ClippedAttempt) int64 { return a.StoredBytes - int64(len(a.Output)+len(a.Tail)) },
	"earlier":     func(n int) []int { return seq(min(n, maxEarlier)) },
	"maxEarlier":  func() int { return maxEarlier },
}

// maxEarlier bounds the links of a run's page to the output of the
// attempts it does not show.
const maxEarlier = 100

// seq is 1 to n.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// outputURL is the page of the whole output of attempt n of run id.
func outputURL(id string, n int) string {
	return runURL(id) + "/attempts/" + strconv.Itoa(n) + "/output"
}

// followURL is the output of attempt n of run id as it is written, as
// text: it ends when the attempt ends.
func followURL(id string, n int) string {
	return runURL(id) + "/output?attempt=" + strconv.Itoa(n) + "&follow=1"
}

// statusText is a run status in words, after a symbol that tells it
// without colour.
func statusText(st jobs.Status) string {
	switch st {
	case jobs.StatusPending:
		return "◷ pending"
	case jobs.StatusRunning:
		return "▶ running"
	case jobs.StatusCompleted:
		return "✓ completed"
	case jobs.StatusRetrying:
		return "↻ retrying"
	case jobs.StatusCancelled:
		return "⊘ cancelled"
	case jobs.StatusDeadLetter:
		return "✗ dead letter"
	case "":
		return "—"
	}
	return string(st)
}

// statusClass is the CSS class of a status; the colour only repeats what
// statusText says.
func statusClass(st jobs.Status) string {
	if st == "" {
		return "st"
	}
	return "st st-" + strings.ReplaceAll(string(st), "_", "-")
}

// reasonText is the reason of a status in words; "" for none, and for a
// reason that the status tells already (created, claimed, succeeded, or
// the status's own name).
func reasonText(st jobs.Status, r jobs.Reason) string {
	switch r {
	case jobs.ReasonCreated, jobs.ReasonClaimed, jobs.ReasonSucceeded, jobs.Reason(st):
		return ""
	}
	return strings.ReplaceAll(string(r), "_", " ")
}

// eventReason is the reason of an event in words, whatever it is.
func eventReason(r jobs.Reason) string { return strings.ReplaceAll(string(r), "_", " ") }

// when reads the times that the pages show: a time.Time or a *time.Time
// (nil for none).
func when(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

func isSet(v any) bool { return !when(v).IsZero() }

// utcText is a time as the pages show it, in UTC to the second.
func utcText(v any) string {
	t := when(v)
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// isoText is a time in RFC 3339, for a <time> element and the script.
func isoText(v any) string {
	t := when(v)
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// inZone is a time on the wall clock of the time zone tz ("" or unknown:
// UTC), with the zone's abbreviation.
func inZone(v any, tz string) string {
	t := when(v)
	if t.IsZero() {
		return "—"
	}
	loc := zone(tz)
	if loc == time.UTC {
		return utcText(t)
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// zone is the time zone called tz; UTC for "" or an unknown one.
func zone(tz string) *time.Location {
	loc, err := time.LoadLocation(tz)
	if tz == "" || err != nil {
		return time.UTC
	}
	return loc
}

// zoneName is the name a page shows of the time zone tz: for "Local",
// that of the daemon's local zone, which Go calls Local (localZone).
func zoneName(tz string) string {
	if tz == "Local" {
		return localZone
	}
	return tz
}

// localZone is the name of the daemon's local time zone: $TZ, else the
// zone /etc/localtime links to, else the zone's abbreviation, with
// "(local)" after it.
var localZone = func() string {
	name := strings.TrimPrefix(os.Getenv("TZ"), ":")
	if name == "" {
		if target, err := os.Readlink("/etc/localtime"); err == nil {
			if _, after, ok := strings.Cut(target, "zoneinfo/"); ok {
				name = after
			}
		}
	}
	if name == "" || strings.HasPrefix(name, "/") {
		name, _ = time.Now().In(time.Local).Zone()
	}
	return name + " (local)"
}()

// sameAsUTC reports whether the wall clock of tz at v reads as UTC's,
// such as that of a local zone that is UTC: a page then shows the time
// once.
func sameAsUTC(v any, tz string) bool { return inZone(v, tz) == utcText(v) }

// zonedTime is a time to show on the wall clock of a time zone.
type zonedTime struct {
	T    time.Time
	Zone string
}

// durText is a duration rounded for a person: 850ms, 4.2s, 3m 5s, 2h 10m,
// 3d 4h.
func durText(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// since is how long from a to b; b zero means now.
func since(a, b any) time.Duration {
	from, to := when(a), when(b)
	if to.IsZero() {
		to = time.Now()
	}
	return to.Sub(from)
}

// shortID is the end of a run id: the ids are UUIDv7, whose first half is
// the time they were made, alike for runs made together, and whose end
// is random.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-12:]
}

func jobURL(name string) string { return "/ui/jobs/" + url.PathEscape(name) }
func runURL(id string) string   { return "/ui/runs/" + url.PathEscape(id) }

// runsURL is the runs page of a job and a status ("" for any).
func runsURL(job string, st jobs.Status) string {
	q := url.Values{}
	if job != "" {
		q.Set("job", job)
	}
	if st != "" {
		q.Set("status", string(st))
	}
	if len(q) == 0 {
		return "/ui/runs"
	}
	return "/ui/runs?" + q.Encode()
}

// bytesText is a size for a person: n is an int or an int64.
func bytesText(v any) string {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int64:
		n = v
	}
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// scheduleText says when a job fires.
func scheduleText(j control.JobInfo) string {
	switch j.Kind {
	case "cron":
		return j.Schedule
	case "once":
		return "once, at " + utcText(j.At)
	case "": // not declared here, still expected (control.JobInfo.Declared)
		return "not declared; expected to succeed within " + j.ExpectSuccessWithin
	}
	return "when triggered"
}

// kindText is the kind of a job in words.
func kindText(kind string) string {
	switch kind {
	case "cron":
		return "cron schedule"
	case "once":
		return "one-off"
	case "trigger":
		return "on trigger only"
	case "":
		return "not declared"
	}
	return kind
}

// jobState is the state of a job in words: paused or active for a cron
// job, and overdue (expect_success_within) for any job, so that it reads
// without colour.
func jobState(j control.JobInfo) string {
	var parts []string
	switch {
	case j.Kind == "cron" && j.Paused:
		parts = append(parts, "‖ paused")
	case j.Kind == "cron":
		parts = append(parts, "active")
	}
	if j.Overdue {
		parts = append(parts, "⚠ overdue")
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

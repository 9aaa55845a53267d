package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNextScheduleSyntax: next previews the syntax of crontab(5) and Cronos
// with the daemon's code, DST rules included, and refuses what never fires.
func TestNextScheduleSyntax(t *testing.T) {
	for _, tc := range []struct {
		spec, zone, from string
		want             []string
	}{
		// The last Sunday of March: 02:30 is skipped, the job runs at the jump.
		{"30 2 * 3 0L", "Europe/Berlin", "2026-01-01T00:00:00Z", []string{"2026-03-29T03:00:00+02:00", "2027-03-28T03:00:00+02:00"}},
		{"0 0 L * *", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"}},
		{"0 9 15W * *", "UTC", "2026-02-01T00:00:00Z", []string{"2026-02-16T09:00:00Z", "2026-03-16T09:00:00Z"}},
		{"0 9 * * FRI#3", "America/New_York", "2026-01-01T00:00:00Z", []string{"2026-01-16T09:00:00-05:00", "2026-02-20T09:00:00-05:00"}},
		{"0 23-1 * * 7", "UTC", "2026-01-03T00:00:00Z", []string{"2026-01-04T00:00:00Z", "2026-01-04T01:00:00Z", "2026-01-04T23:00:00Z"}},
	} {
		r := runBinary(t, "", "", "next", "--schedule", tc.spec, "--timezone", tc.zone, "--from", tc.from, "-n", itoa(len(tc.want)))
		if got := strings.Fields(r.stdout); r.code != 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("next %q: exit %d, %q %s; want %v", tc.spec, r.code, got, r.stderr, tc.want)
		}
	}
	// The first and the last fire times there are: from the epoch, to the
	// end of year 9999, which RFC 3339 can write.
	for _, tc := range []struct {
		from string
		want []string
	}{
		{"1970-01-01T00:00:00Z", []string{"1970-01-01T00:01:00Z", "1970-01-01T00:02:00Z"}},
		{"9999-12-31T23:58:00Z", []string{"9999-12-31T23:59:00Z"}},
	} {
		r := runBinary(t, "", "", "next", "--schedule", "* * * * *", "--timezone", "UTC", "--from", tc.from, "-n", "2")
		if got := strings.Fields(r.stdout); r.code != 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("next --from %s: exit %d, %q %s; want %v", tc.from, r.code, got, r.stderr, tc.want)
		}
	}
	// Before the epoch: refused, not an empty answer (a fire time at
	// 0001-01-01T00:00:00Z is Go's zero time, "no more fire times").
	for _, from := range []string{"0000-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z"} {
		r := runBinary(t, "", "", "next", "--schedule", "* * * * *", "--from", from)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "--from "+from+" is before 1970-01-01T00:00:00Z") {
			t.Errorf("next --from %s: exit %d, %q %q; want exit %d and a refusal", from, r.code, r.stdout, r.stderr, exitUsage)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"0 0 L-30 2 *", "never fires"},
		{"0 0 31W 4 *", "never fires"},
		{"0 9 * * 1,,5", `day of week field "1,,5": empty list item`},
		{"@reboot", "@reboot is not supported"},
	} {
		r := runBinary(t, "", "", "next", "--schedule", tc.spec)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("next %q: exit %d, %q; want exit %d and %q", tc.spec, r.code, r.stderr, exitUsage, tc.want)
		}
	}
}

// TestCheckConfigScheduleSyntax: check-config accepts the new syntax and
// prints its fire times, and rejects a schedule that never fires or has a
// typo with the file, the line and the key.
func TestCheckConfigScheduleSyntax(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedulerd.toml")
	good := `[[job]]
name = "month-end"
schedule = "0 0 L * *"
timezone = "UTC"
command = ["/bin/true"]

[[job]]
name = "third-friday"
schedule = "0 9 * * 5#3"
timezone = "UTC"
command = ["/bin/true"]

[[job]]
name = "weekend-nights"
schedule = "0 22-2 * * FRI-MON"
timezone = "UTC"
command = ["/bin/true"]
`
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, dir, "", "check-config", "--config", path, "-n", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "0 0 L * * (UTC)") || !strings.Contains(r.stdout, "0 9 * * 5#3 (UTC)") ||
		!strings.Contains(r.stdout, "0 22-2 * * FRI-MON (UTC)") {
		t.Fatalf("check-config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct{ spec, want string }{
		{"0 0 L-30 2 *", `"0 0 L-30 2 *": never fires`},
		{"0 0 31W 4 *", `"0 0 31W 4 *": never fires`},
		{"0 9 * * 1,,5", `day of week field "1,,5": empty list item`},
		{"0 9 * * 1,5,", `day of week field "1,5,": a comma ends the list`},
		{"0 0 * * 5#6", "#6: a month has a first to a fifth"},
		{"@reboot", "@reboot is not supported"},
	} {
		bad := good + "\n[[job]]\nname = \"bad\"\ncommand = [\"/bin/true\"]\nschedule = \"" + tc.spec + "\"\n"
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runBinary(t, dir, "", "check-config", "--config", path)
		line := strings.Count(bad, "\n") // the schedule is on the last line
		want := path + ":" + itoa(line) + `: job "bad": schedule: `
		if r.code != exitUsage || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("check-config with schedule %q: exit %d\n%s\nwant exit %d, %q and %q", tc.spec, r.code, r.stderr, exitUsage, want, tc.want)
		}
	}
}

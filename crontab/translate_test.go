package crontab

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden")

// translate translates crontab with opts, failing the test on an error.
func translate(t *testing.T, crontab string, opts Options) *Translation {
	t.Helper()
	if opts.File == "" {
		opts.File = "-"
	}
	tr, err := Translate([]byte(crontab), opts)
	if err != nil {
		t.Fatalf("Translate(%q): %v", crontab, err)
	}
	return tr
}

// load parses a translation as the daemon's config would be.
func load(t *testing.T, toml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("imported.toml", []byte(toml))
	if err != nil {
		t.Fatalf("the translation is no valid config: %v\n%s", err, toml)
	}
	return cfg
}

// crontabFiles are the crontabs of testdata: the examples of crontab(5)
// (cronie's and Debian's pages), Debian's /etc/crontab, files of
// /etc/cron.d as Debian packages ship them, and edge cases.
func crontabFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "golden" || d.Name() == "fuzz"):
			return filepath.SkipDir
		case !d.IsDir():
			files = append(files, path)
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("crontab test files: %v %v", files, err)
	}
	return files
}

// TestGolden: the translation of each crontab of testdata is its golden
// file (go test -run Golden -update rewrites them), and a valid config.
func TestGolden(t *testing.T) {
	for _, file := range crontabFiles(t) {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := Translate(data, Options{File: file})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata/golden", strings.ReplaceAll(strings.TrimPrefix(file, "testdata/"), "/", "_")+".toml")
			if *update {
				if err := os.WriteFile(golden, []byte(tr.TOML), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if tr.TOML != string(want) {
				t.Errorf("the translation of %s differs from %s (-update rewrites it):\n%s", file, golden, tr.TOML)
			}
			load(t, tr.TOML)
		})
	}
}

// importedJob is what a crontab line must become.
type importedJob struct {
	name, schedule, zone, user string
	shell                      string   // or
	command                    []string //
	env                        map[string]string
}

// TestRoundTrip loads the translations and checks that each job means what
// its crontab line means: schedule, zone, user, what it runs, its
// environment, and cron's behaviour (no timeout, no retry, no catch-up).
func TestRoundTrip(t *testing.T) {
	sh := map[string]string{"SHELL": "/bin/sh"}
	bash := map[string]string{"SHELL": "/bin/bash"}
	edge := map[string]string{"SHELL": "/bin/sh", "GREETING": "hello world  ", "EMPTY": "", "HOME": "/srv"}
	for file, want := range map[string][]importedJob{
		"testdata/cronie-crontab.5": {
			{"daily.job", "5 0 * * *", "Japan", "", "$HOME/bin/daily.job >> $HOME/tmp/out 2>&1", nil, sh},
			{"monthly", "15 14 1 * *", "Japan", "", "$HOME/bin/monthly", nil, sh},
			{"mail", "0 22 * * 1-5", "Japan", "", `printf '%s' 'Joe,` + "\n\n" + `Where are your kids?` + "\n" + `' | /bin/sh -c 'mail -s "It'\''s 10pm" joe'`, nil, sh},
			{"echo", "23 0-23/2 * * *", "Japan", "", `echo "run 23 minutes after midn, 2am, 4am ..., everyday"`, nil, sh},
			{"echo-2", "5 4 * * sun", "Japan", "", `echo "run at 5 after 4 every sunday"`, nil, sh},
		},
		"testdata/debian-crontab.5": {
			{"daily.job", "5 0 * * *", "", "", "", []string{"/bin/bash", "-c", "$HOME/bin/daily.job >> $HOME/tmp/out 2>&1"}, bash},
			{"monthly", "15 14 1 * *", "", "", "", []string{"/bin/bash", "-c", "$HOME/bin/monthly"}, bash},
			{"mail", "0 22 * * 1-5", "", "", "", []string{"/bin/bash", "-c", `printf '%s' 'Joe,` + "\n\n" + `Where are your kids?` + "\n" + `' | /bin/bash -c 'mail -s "It'\''s 10pm" joe'`}, bash},
			{"echo", "23 0-23/2 * * *", "", "", "", []string{"/bin/bash", "-c", `echo "run 23 minutes after midn, 2am, 4am ..., everyday"`}, bash},
			{"echo-2", "5 4 * * sun", "", "", "", []string{"/bin/bash", "-c", `echo "run at 5 after 4 every sunday"`}, bash},
			{"echo-3", "0 */4 1 * mon", "", "", "", []string{"/bin/bash", "-c", `echo "run every 4th hour on the 1st and on every Monday"`}, bash},
			{"echo-4", "0 0 */2 * sun", "", "", "", []string{"/bin/bash", "-c", `echo "run at midn on every Sunday that's an uneven date"`}, bash},
			{"echo-5", "0 4 8-14 * *", "", "", "", []string{"/bin/bash", "-c", `test $(date +%u) -eq 6 && echo "2nd Saturday"`}, bash},
		},
		"testdata/debian-etc-crontab": {
			{"run-parts-cron.hourly", "17 * * * *", "", "root", "cd / && run-parts --report /etc/cron.hourly", nil, sh},
			{"run-parts-cron.daily", "25 6 * * *", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", nil, sh},
			{"run-parts-cron.weekly", "47 6 * * 7", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }", nil, sh},
			{"run-parts-cron.monthly", "52 6 1 * *", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }", nil, sh},
		},
		"testdata/cron.d/e2scrub_all": {
			{"e2scrub_all_cron", "30 3 * * 0", "", "root", "test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron", nil, nil},
			{"e2scrub_all", "10 3 * * *", "", "root", "test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r", nil, nil},
		},
		"testdata/cron.d/php": {
			{"sessionclean", "09,39 * * * *", "", "root", "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi", nil, nil},
		},
		"testdata/cron.d/sysstat": {
			{"debian-sa1", "5-55/10 * * * *", "", "root", "command -v debian-sa1 > /dev/null && debian-sa1 1 1", nil, map[string]string{"PATH": "/usr/lib/sysstat:/usr/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}},
			{"debian-sa1-2", "59 23 * * *", "", "root", "command -v debian-sa1 > /dev/null && debian-sa1 60 2", nil, map[string]string{"PATH": "/usr/lib/sysstat:/usr/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		},
		"testdata/edge-cases": {
			{"backup", "@daily", "", "", "/usr/local/bin/backup --full", nil, edge},
			{"backup-2", "@hourly", "", "", "/usr/local/bin/backup --incremental", nil, edge},
			{"sunday", "0 0 * * 7", "", "", "/usr/local/bin/sunday", nil, edge},
			{"weekdays", "0 12 * * Mon-FRI", "", "", "/usr/local/bin/weekdays", nil, edge},
			{"ny", "30 2 * * *", "America/New_York", "", "/usr/local/bin/ny", nil, edge},
			{"cat", "0 3 * * *", "", "", "printf '%s' 'line one\nline % two\n' | /bin/sh -c 'cat'", nil, edge},
			{"printf", "0 4 * * *", "", "", `printf '%s\n' x   # a shell comment, passed on`, nil, edge},
			{"python3-manage.py", "0 5 * * *", "", "", "cd /srv && exec nice -n 10 ionice -c3 /usr/bin/python3 /srv/app/manage.py cleanup >/dev/null 2>&1", nil, edge},
			{"sync.sh", "0 6 * * *", "", "", "VAR=1 timeout 10m /opt/sync.sh", nil, edge},
			{"x-y_z.sh", "0 7 * * *", "", "", "~/bin/x-y_z.sh", nil, edge},
			{"echo", "0 9 * * *", "", "", `printf '%s' ''\'' >> out.log' | /bin/sh -c 'echo '\''percent 100'`, nil, edge},
			{"echo-2", "0 8 * * *", "", "", "", []string{"/bin/csh", "-c", "echo csh"},
				map[string]string{"SHELL": "/bin/csh", "GREETING": "hello world  ", "EMPTY": "", "HOME": "/srv"}},
		},
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg := load(t, translate(t, string(data), Options{File: file}).TOML)
			if len(cfg.Jobs) != len(want) {
				var names []string
				for _, d := range cfg.Jobs {
					names = append(names, d.Name)
				}
				t.Fatalf("%d jobs %v, want %d", len(cfg.Jobs), names, len(want))
			}
			for i, w := range want {
				checkImportedJob(t, cfg.Jobs[i], w)
			}
		})
	}
}

func checkImportedJob(t *testing.T, d *jobs.Definition, w importedJob) {
	t.Helper()
	zone := time.Local.String()
	if w.zone != "" {
		zone = w.zone
	}
	sched, ok := d.Schedule.(interface{ Location() *time.Location })
	switch {
	case d.Name != w.name:
		t.Errorf("job %q, want %q", d.Name, w.name)
	case d.Schedule == nil || d.Schedule.String() != w.schedule:
		t.Errorf("%s: schedule %v, want %q", w.name, d.Schedule, w.schedule)
	case !ok || sched.Location().String() != zone:
		t.Errorf("%s: zone %v, want %s", w.name, sched, zone)
	case d.User != w.user:
		t.Errorf("%s: user %q, want %q", w.name, d.User, w.user)
	case d.Shell != w.shell || !slices.Equal(d.Command, w.command):
		t.Errorf("%s: shell %q command %q, want %q %q", w.name, d.Shell, d.Command, w.shell, w.command)
	case !maps.Equal(d.Env, w.env) && len(d.Env)+len(w.env) > 0:
		t.Errorf("%s: env %v, want %v", w.name, d.Env, w.env)
	case d.Timeout != 0 || d.Retry.MaxAttempts != 1 || d.Catchup != jobs.CatchupNone || d.Overlap != jobs.OverlapAllow:
		t.Errorf("%s: timeout %v, retry %d, catchup %s, overlap %s; want cron's: none, 1, none, allow",
			w.name, d.Timeout, d.Retry.MaxAttempts, d.Catchup, d.Overlap)
	}
}

// TestUser: Options.User makes the crontab the user's, its jobs run as the
// user, and a user column is then part of the command, as cron reads such
// a line in a user crontab.
func TestUser(t *testing.T) {
	data, err := os.ReadFile("testdata/cronie-crontab.5")
	if err != nil {
		t.Fatal(err)
	}
	tr := translate(t, string(data), Options{User: "root"})
	if !strings.Contains(tr.TOML, "# read as the crontab of root: its jobs run as root.") ||
		!strings.Contains(tr.TOML, "from a crontab on standard input") {
		t.Fatalf("the header says neither the user nor the source:\n%s", tr.TOML)
	}
	cfg := load(t, tr.TOML)
	if len(cfg.Jobs) != 5 {
		t.Fatalf("%d jobs, want 5", len(cfg.Jobs))
	}
	for _, d := range cfg.Jobs {
		if d.User != "root" {
			t.Errorf("%s: user %q, want root", d.Name, d.User)
		}
	}
	tr = translate(t, "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n", Options{User: "root"})
	if !strings.Contains(tr.TOML, `shell = "root cd / && run-parts --report /etc/cron.hourly"`) {
		t.Errorf("a system crontab read as root's:\n%s", tr.TOML)
	}
	if _, err := Translate(nil, Options{User: "a\nb"}); err == nil || !strings.Contains(err.Error(), "is not a user name") {
		t.Errorf("user a\\nb: %v", err)
	}
}

// TestStandardInputOfCommands runs what the jobs of lines with % run, and
// checks that the command reads on its standard input what cron would
// write there: the text after the first %, each further % a newline, \% a
// %, no newline added.
func TestStandardInputOfCommands(t *testing.T) {
	for _, tc := range []struct{ line, stdout string }{
		{`cat%line one%line \% two%`, "line one\nline % two\n"},
		{`cat%no newline at the end`, "no newline at the end"},
		{`cat%`, ""},
		{`cat%it's 'quoted' "twice"%`, "it's 'quoted' \"twice\"\n"},
		{`echo \%before; cat%after`, "%before\nafter"},
		{`tr a-z A-Z # a comment%abc`, "ABC"},
		{`cat%\n stays%`, "\\n stays\n"},
	} {
		cfg := load(t, translate(t, "0 0 * * * "+tc.line+"\n", Options{}).TOML)
		if len(cfg.Jobs) != 1 {
			t.Fatalf("%q: %d jobs", tc.line, len(cfg.Jobs))
		}
		out, err := exec.Command("/bin/sh", "-c", cfg.Jobs[0].Shell).Output()
		if err != nil || string(out) != tc.stdout {
			t.Errorf("%q: the job prints %q (%v), want %q\n%s", tc.line, out, err, tc.stdout, cfg.Jobs[0].Shell)
		}
	}
}

// TestNotTranslated: lines that cannot be translated are comments, and a
// warning counts them.
func TestNotTranslated(t *testing.T) {
	tr := translate(t, "@reboot /bin/true\nMAILTO=ops\n0 0 * * * /bin/true\n", Options{})
	if tr.Skipped != 2 || tr.Jobs != 1 || !slices.Contains(tr.Warnings, "2 lines not translated; comments in the output say why") ||
		!strings.Contains(tr.TOML, "# line 1: @reboot /bin/true\n#   not translated: @reboot") ||
		!strings.Contains(tr.TOML, "# line 2: MAILTO=ops\n#   not translated yet: schedulerd sends no mail") {
		t.Errorf("skipped %d, jobs %d, warnings %q\n%s", tr.Skipped, tr.Jobs, tr.Warnings, tr.TOML)
	}
	tr = translate(t, "@reboot /bin/true\n", Options{})
	if !slices.Equal(tr.Warnings, []string{"1 line not translated; a comment in the output says why"}) {
		t.Errorf("warnings %q", tr.Warnings)
	}
}

// TestFormatDetection: a crontab is a system crontab when every job line has
// a user of this machine and a command after its schedule.
func TestFormatDetection(t *testing.T) {
	for _, tc := range []struct {
		crontab string
		system  bool
	}{
		{"0 0 * * * root /bin/true\n@daily root /bin/true\n", true},
		{"0 0 * * * root /bin/true\n0 0 * * * /bin/true\n", false},
		{"0 0 * * * root\n", false}, // root is the command
		{"0 0 * * * no-such-user-here /bin/true\n", false},
		{"# only comments\nA=1\n", false},
	} {
		tr := translate(t, tc.crontab, Options{})
		if got := strings.Contains(tr.TOML, "# read as a system crontab"); got != tc.system {
			t.Errorf("%q: system %v, want %v\n%s", tc.crontab, got, tc.system, tr.TOML)
		}
	}
}

// TestTooLarge: a crontab whose translation no config could hold (each job
// repeats the environment) is refused, not translated.
func TestTooLarge(t *testing.T) {
	crontab := "BIG=" + strings.Repeat("x", 64<<10) + "\n" + strings.Repeat("0 0 * * * /bin/true\n", 300)
	if tr, err := Translate([]byte(crontab), Options{File: "-"}); err != ErrTooLarge || tr != nil {
		t.Errorf("err %v, want ErrTooLarge", err)
	}
	if _, err := Translate(make([]byte, MaxSize+1), Options{File: "-"}); err == nil {
		t.Error("a crontab larger than MaxSize is translated")
	}
}

// runIn runs argv in a new directory with stdin, and returns what it
// printed, its exit code and the files it left there.
func runIn(t *testing.T, stdin string, argv ...string) (stdout string, code int, files []string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%q: %v", argv, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files = append(files, e.Name())
	}
	return string(out), code, files
}

// TestStandardInputAsCron runs the job of each line as the daemon would,
// and the line as cron does (SHELL -c COMMAND, the text after % on its
// standard input), each in a new directory: both print the same, exit
// with the same code and leave the same files. A line that is no valid
// shell under cron, built to close the way the job feeds the standard
// input, must not run the command it hides (touch pwned).
func TestStandardInputAsCron(t *testing.T) {
	for _, tc := range []struct{ line, cmd, stdin string }{
		{`echo a) ; touch pwned #%stdin`, `echo a) ; touch pwned #`, "stdin"},
		{`cat ) ; touch pwned ; ( cat %x`, `cat ) ; touch pwned ; ( cat `, "x"},
		{`echo a ) & touch pwned %`, `echo a ) & touch pwned `, ""},
		{`cat <<EOF%x`, `cat <<EOF`, "x"},
		{`cat "%x`, `cat "`, "x"},
		{`echo a' ; touch pwned%`, `echo a' ; touch pwned`, ""},
		{`echo ') ; touch pwned ; echo '%x`, `echo ') ; touch pwned ; echo '`, "x"},
		{`touch made; cat%x`, `touch made; cat`, "x"},
		{`cat%line one%line \% two%`, `cat`, "line one\nline % two\n"},
		{`cat; exit 3%x`, `cat; exit 3`, "x"},
		{`echo "$0"; cat%in`, `echo "$0"; cat`, "in"},
		{`read a; echo "[$a]"; cat%one%two`, `read a; echo "[$a]"; cat`, "one\ntwo"},
	} {
		for _, shell := range []string{"/bin/sh", "/bin/bash"} {
			if _, err := os.Stat(shell); err != nil {
				t.Logf("no %s: %v", shell, err)
				continue
			}
			cfg := load(t, translate(t, "SHELL="+shell+"\n0 0 * * * "+tc.line+"\n", Options{}).TOML)
			if len(cfg.Jobs) != 1 {
				t.Fatalf("%q: %d jobs", tc.line, len(cfg.Jobs))
			}
			job := cfg.Jobs[0]
			argv := job.Command
			if job.Shell != "" {
				argv = []string{"/bin/sh", "-c", job.Shell}
			}
			jobOut, jobCode, jobFiles := runIn(t, "", argv...)
			cronOut, cronCode, cronFiles := runIn(t, tc.stdin, shell, "-c", tc.cmd)
			if jobOut != cronOut || jobCode != cronCode || !slices.Equal(jobFiles, cronFiles) || slices.Contains(jobFiles, "pwned") {
				t.Errorf("%s, %q:\n the job prints %q, exits %d, leaves %q\n cron's %s prints %q, exits %d, leaves %q\n the job: %q",
					shell, tc.line, jobOut, jobCode, jobFiles, shell, cronOut, cronCode, cronFiles, argv)
			}
		}
	}
}

// TestGuessedSystemCrontab: a crontab read as a system crontab only because
// every job line's sixth field names a user (a user crontab whose commands
// start with a user's name looks just so) says it loudly, in the output
// and in a warning, and how to read it as a user crontab.
func TestGuessedSystemCrontab(t *testing.T) {
	const crontab = "0 0 * * * root /bin/true\n@daily root /bin/true\n"
	tr := translate(t, crontab, Options{File: "mine"})
	if !strings.Contains(tr.TOML, "\n# WARNING: if this is a user crontab") || !strings.Contains(tr.TOML, "--user NAME") ||
		!slices.ContainsFunc(tr.Warnings, func(w string) bool {
			return strings.Contains(w, "mine is read as a system crontab") && strings.Contains(w, "(root)") && strings.Contains(w, "--user NAME")
		}) {
		t.Errorf("no loud word of the guess: warnings %q\n%s", tr.Warnings, tr.TOML)
	}
	for _, opts := range []Options{{File: "/etc/crontab"}, {File: "/etc/cron.d/x"}, {File: "mine", User: "root"}} {
		tr := translate(t, crontab, opts)
		if strings.Contains(tr.TOML, "if this is a user crontab") || slices.ContainsFunc(tr.Warnings, func(w string) bool { return strings.Contains(w, "--user NAME") }) {
			t.Errorf("%+v: a warning of a guess that was none: %q\n%s", opts, tr.Warnings, tr.TOML)
		}
	}
}

// TestOtherUsers: jobs that run as other users, which the packaged service
// (user schedulerd) refuses, come with a warning that says how to run them
// (the drop-in root.conf), in the output and on standard error.
func TestOtherUsers(t *testing.T) {
	for _, tc := range []struct {
		crontab string
		opts    Options
		users   string // "" for no warning
	}{
		{"0 0 * * * root /bin/true\n0 1 * * * nobody /bin/true\n0 2 * * * root /bin/true\n", Options{File: "/etc/crontab"}, "root, nobody"},
		{"0 0 * * * /bin/true\n", Options{User: "alice"}, "alice"},
		{"0 0 * * * /bin/true\n", Options{}, ""},
		{"0 0 * * * /bin/true\n", Options{User: "schedulerd"}, ""},
		{"0 0 * * * schedulerd /bin/true\n", Options{File: "/etc/crontab"}, ""},
		{"@reboot root /bin/true\n", Options{File: "/etc/crontab"}, ""},
	} {
		tr := translate(t, tc.crontab, tc.opts)
		warned := slices.ContainsFunc(tr.Warnings, func(w string) bool {
			return strings.Contains(w, "the jobs run as "+tc.users+":") && strings.Contains(w, "root.conf")
		})
		commented := strings.Contains(tr.TOML, "\n# WARNING: the jobs below run as "+tc.users+".") &&
			strings.Contains(tr.TOML, "\n#   install -D -m 0644 /usr/share/schedulerd/root.conf /etc/systemd/system/schedulerd.service.d/root.conf\n")
		anyWarning := strings.Contains(tr.TOML, "root.conf") || slices.ContainsFunc(tr.Warnings, func(w string) bool { return strings.Contains(w, "root.conf") })
		if tc.users != "" && (!warned || !commented) || tc.users == "" && anyWarning {
			t.Errorf("%q %+v: want a warning of %q; warnings %q\n%s", tc.crontab, tc.opts, tc.users, tr.Warnings, tr.TOML)
		}
	}
}

// uncomment returns the lines of toml that start with "# " and follow a line
// that is "#" alone (the commented examples), without their "# ".
func uncomment(toml string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(toml, "\n") {
		switch {
		case l == "#":
			in = true
		case in && strings.HasPrefix(l, "# "):
			b.WriteString(l[2:] + "\n")
		default:
			in = false
		}
	}
	return b.String()
}

// TestMailto: MAILTO is not translated yet (schedulerd sends no mail), and
// says so with a commented [[notifier]] that, uncommented and named in a
// job's notify, makes a valid config whose notifier mails MAILTO.
func TestMailto(t *testing.T) {
	tr := translate(t, "MAILTO=ops@example.com, o'brien\n0 0 * * * /bin/true\nMAILTO=other\nMAILFROM=cron@example.com\n", Options{})
	if tr.Skipped != 3 || strings.Contains(tr.TOML, "no notifications") ||
		!strings.Contains(tr.TOML, "# line 1: MAILTO=ops@example.com, o'brien\n#   not translated yet: schedulerd sends no mail") ||
		!strings.Contains(tr.TOML, "docs/notifications.md") || strings.Count(tr.TOML, "\n# [[notifier]]\n") != 1 {
		t.Fatalf("skipped %d\n%s", tr.Skipped, tr.TOML)
	}
	example := uncomment(tr.TOML)
	if strings.Count(example, "[[notifier]]") != 1 {
		t.Fatalf("want one example notifier, not %q\n%s", example, tr.TOML)
	}
	cfg := load(t, tr.TOML+"\n"+example+"\n[[job]]\nname = \"x\"\nschedule = \"@daily\"\nshell = \"true\"\nnotify = [\"mail\"]\n")
	if len(cfg.Notifiers) != 1 {
		t.Fatalf("%d notifiers from %q", len(cfg.Notifiers), example)
	}
	if n := cfg.Notifiers[0]; n.Name != "mail" || n.Shell != `mail -s 'schedulerd: a job event' ops@example.com 'o'\''brien'` {
		t.Errorf("notifier %q: shell %q", n.Name, n.Shell)
	}
}

// TestSyntaxWarning: a line whose command does not parse as its shell
// (sh -n), which failed at each run under cron and will as a job, is
// translated with a WARNING comment and a warning that names its line.
func TestSyntaxWarning(t *testing.T) {
	for _, tc := range []struct {
		crontab string
		line    string // "" for no warning
		hint    bool   // the warning tells of cron's %
	}{
		{"# cron's % ends the command:\n0 0 * * * echo 'percent 100%' >> out.log\n", "line 2", true},
		{"0 0 * * * echo a) ; touch pwned #%stdin\n", "line 1", true},
		{"0 0 * * * echo 'unterminated\n", "line 1", false},
		{"0 0 * * * echo 'percent 100\\%' >> out.log\n", "", false},
		{"0 0 * * * if true; then echo; fi\n", "", false},
		{"SHELL=/bin/csh\n0 0 * * * echo 'unterminated\n", "", false}, // not a POSIX shell: unchecked
		{"SHELL=/bin/bash\n0 0 * * * cat <(echo a)\n", "", false},
		{"SHELL=/bin/bash\n0 0 * * * cat <(echo a\n", "line 2", false},
	} {
		if strings.Contains(tc.crontab, "/bin/bash") {
			if _, err := exec.LookPath("bash"); err != nil {
				t.Logf("no bash: %v", err)
				continue
			}
		}
		tr := translate(t, tc.crontab, Options{})
		var warnings []string
		for _, w := range tr.Warnings {
			if strings.Contains(w, "does not parse") {
				warnings = append(warnings, w)
			}
		}
		commented := strings.Contains(tr.TOML, "\n#   WARNING: the command does not parse as ")
		switch {
		case tc.line == "" && (len(warnings) > 0 || commented):
			t.Errorf("%q: warned of a command that parses: %q\n%s", tc.crontab, warnings, tr.TOML)
		case tc.line != "" && (len(warnings) != 1 || !commented || !strings.HasPrefix(warnings[0], tc.line+": the command does not parse as ")):
			t.Errorf("%q: want one warning of %s, got %q\n%s", tc.crontab, tc.line, warnings, tr.TOML)
		case tc.line != "" && strings.Contains(warnings[0], `write \% for a %`) != tc.hint:
			t.Errorf("%q: hint of %% %v, want %v: %q", tc.crontab, !tc.hint, tc.hint, warnings[0])
		}
		load(t, tr.TOML)
	}
}

// TestSyntaxCheckRunsNothing: checking a command's syntax runs none of it,
// nor the crontab's SHELL, nor the files that ENV and BASH_ENV name.
func TestSyntaxCheckRunsNothing(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sh", "bash", "env.sh"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\ntouch "+dir+"/ran-"+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ENV", filepath.Join(dir, "env.sh"))
	t.Setenv("BASH_ENV", filepath.Join(dir, "env.sh"))
	var crontab strings.Builder
	for _, shell := range []string{dir + "/sh", dir + "/bash", "/bin/sh", "/bin/bash"} {
		crontab.WriteString("SHELL=" + shell + "\n")
		for i, cmd := range []string{"touch %s/a", "echo $(touch %s/b)", "echo `touch %s/c`", "touch %s/d; (", "cat <<EOF $(touch %s/e)", "x=${y:=$(touch %s/f)}"} {
			fmt.Fprintf(&crontab, "%d 0 * * * "+cmd+"\n", i, dir)
		}
	}
	tr := translate(t, crontab.String(), Options{})
	if !slices.ContainsFunc(tr.Warnings, func(w string) bool { return strings.Contains(w, "does not parse") }) {
		t.Errorf("the broken lines were not checked: %q", tr.Warnings)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("checking the syntax ran something: %q", names)
	}
}

package main

import (
	"flag"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
)

var update = flag.Bool("update", false, "rewrite the golden files of the import-crontab tests")

// checkConfig runs the real check-config on toml and loads it.
func checkConfig(t *testing.T, toml string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "imported.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, dir, "", "check-config", "--config", path); r.code != 0 {
		t.Fatalf("check-config of the import: exit %d\n%s%s\n%s", r.code, r.stdout, r.stderr, toml)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// crontabFiles are the crontabs of testdata/crontab: the examples of
// crontab(5) (cronie's and Debian's pages), Debian's /etc/crontab, files of
// /etc/cron.d as Debian packages ship them, and edge cases.
func crontabFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("testdata/crontab", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "golden":
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

// TestImportCrontabGolden: import-crontab prints, for each crontab of
// testdata, its golden translation (go test -run ImportCrontabGolden
// -update rewrites them), and check-config accepts it.
func TestImportCrontabGolden(t *testing.T) {
	for _, file := range crontabFiles(t) {
		t.Run(file, func(t *testing.T) {
			r := runBinary(t, "", "", "import-crontab", file)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			golden := filepath.Join("testdata/crontab/golden", strings.ReplaceAll(strings.TrimPrefix(file, "testdata/crontab/"), "/", "_")+".toml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if r.stdout != string(want) {
				t.Errorf("import-crontab %s differs from %s (-update rewrites it):\n%s", file, golden, r.stdout)
			}
			checkConfig(t, r.stdout)
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

// TestImportCrontabRoundTrip loads the translations and checks that each
// job means what its crontab line means: schedule, zone, user, what it runs,
// its environment, and cron's behaviour (no timeout, no retry, no catch-up).
func TestImportCrontabRoundTrip(t *testing.T) {
	sh := map[string]string{"SHELL": "/bin/sh"}
	bash := map[string]string{"SHELL": "/bin/bash"}
	edge := map[string]string{"SHELL": "/bin/sh", "GREETING": "hello world  ", "EMPTY": "", "HOME": "/srv"}
	for file, want := range map[string][]importedJob{
		"testdata/crontab/cronie-crontab.5": {
			{"daily.job", "5 0 * * *", "Japan", "", "$HOME/bin/daily.job >> $HOME/tmp/out 2>&1", nil, sh},
			{"monthly", "15 14 1 * *", "Japan", "", "$HOME/bin/monthly", nil, sh},
			{"mail", "0 22 * * 1-5", "Japan", "", "printf '%s' 'Joe,\n\nWhere are your kids?\n' | (\nmail -s \"It's 10pm\" joe\n)", nil, sh},
			{"echo", "23 0-23/2 * * *", "Japan", "", `echo "run 23 minutes after midn, 2am, 4am ..., everyday"`, nil, sh},
			{"echo-2", "5 4 * * sun", "Japan", "", `echo "run at 5 after 4 every sunday"`, nil, sh},
		},
		"testdata/crontab/debian-crontab.5": {
			{"daily.job", "5 0 * * *", "", "", "", []string{"/bin/bash", "-c", "$HOME/bin/daily.job >> $HOME/tmp/out 2>&1"}, bash},
			{"monthly", "15 14 1 * *", "", "", "", []string{"/bin/bash", "-c", "$HOME/bin/monthly"}, bash},
			{"mail", "0 22 * * 1-5", "", "", "", []string{"/bin/bash", "-c", "printf '%s' 'Joe,\n\nWhere are your kids?\n' | (\nmail -s \"It's 10pm\" joe\n)"}, bash},
			{"echo", "23 0-23/2 * * *", "", "", "", []string{"/bin/bash", "-c", `echo "run 23 minutes after midn, 2am, 4am ..., everyday"`}, bash},
			{"echo-2", "5 4 * * sun", "", "", "", []string{"/bin/bash", "-c", `echo "run at 5 after 4 every sunday"`}, bash},
			{"echo-3", "0 */4 1 * mon", "", "", "", []string{"/bin/bash", "-c", `echo "run every 4th hour on the 1st and on every Monday"`}, bash},
			{"echo-4", "0 0 */2 * sun", "", "", "", []string{"/bin/bash", "-c", `echo "run at midn on every Sunday that's an uneven date"`}, bash},
			{"echo-5", "0 4 8-14 * *", "", "", "", []string{"/bin/bash", "-c", `test $(date +%u) -eq 6 && echo "2nd Saturday"`}, bash},
		},
		"testdata/crontab/debian-etc-crontab": {
			{"run-parts-cron.hourly", "17 * * * *", "", "root", "cd / && run-parts --report /etc/cron.hourly", nil, sh},
			{"run-parts-cron.daily", "25 6 * * *", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", nil, sh},
			{"run-parts-cron.weekly", "47 6 * * 7", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }", nil, sh},
			{"run-parts-cron.monthly", "52 6 1 * *", "", "root", "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }", nil, sh},
		},
		"testdata/crontab/cron.d/e2scrub_all": {
			{"e2scrub_all_cron", "30 3 * * 0", "", "root", "test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron", nil, nil},
			{"e2scrub_all", "10 3 * * *", "", "root", "test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r", nil, nil},
		},
		"testdata/crontab/cron.d/php": {
			{"sessionclean", "09,39 * * * *", "", "root", "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi", nil, nil},
		},
		"testdata/crontab/cron.d/sysstat": {
			{"debian-sa1", "5-55/10 * * * *", "", "root", "command -v debian-sa1 > /dev/null && debian-sa1 1 1", nil, map[string]string{"PATH": "/usr/lib/sysstat:/usr/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}},
			{"debian-sa1-2", "59 23 * * *", "", "root", "command -v debian-sa1 > /dev/null && debian-sa1 60 2", nil, map[string]string{"PATH": "/usr/lib/sysstat:/usr/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		},
		"testdata/crontab/edge-cases": {
			{"backup", "@daily", "", "", "/usr/local/bin/backup --full", nil, edge},
			{"backup-2", "@hourly", "", "", "/usr/local/bin/backup --incremental", nil, edge},
			{"sunday", "0 0 * * 7", "", "", "/usr/local/bin/sunday", nil, edge},
			{"weekdays", "0 12 * * Mon-FRI", "", "", "/usr/local/bin/weekdays", nil, edge},
			{"ny", "30 2 * * *", "America/New_York", "", "/usr/local/bin/ny", nil, edge},
			{"cat", "0 3 * * *", "", "", "printf '%s' 'line one\nline % two\n' | (\ncat\n)", nil, edge},
			{"printf", "0 4 * * *", "", "", `printf '%s\n' x   # a shell comment, passed on`, nil, edge},
			{"python3-manage.py", "0 5 * * *", "", "", "cd /srv && exec nice -n 10 ionice -c3 /usr/bin/python3 /srv/app/manage.py cleanup >/dev/null 2>&1", nil, edge},
			{"sync.sh", "0 6 * * *", "", "", "VAR=1 timeout 10m /opt/sync.sh", nil, edge},
			{"x-y_z.sh", "0 7 * * *", "", "", "~/bin/x-y_z.sh", nil, edge},
			{"echo", "0 8 * * *", "", "", "", []string{"/bin/csh", "-c", "echo csh"},
				map[string]string{"SHELL": "/bin/csh", "GREETING": "hello world  ", "EMPTY": "", "HOME": "/srv"}},
		},
	} {
		t.Run(file, func(t *testing.T) {
			r := runBinary(t, "", "", "import-crontab", file)
			cfg := checkConfig(t, r.stdout)
			if len(cfg.Jobs) != len(want) {
				var names []string
				for _, d := range cfg.Jobs {
					names = append(names, d.Name)
				}
				t.Fatalf("%d jobs %v, want %d", len(cfg.Jobs), names, len(want))
			}
			for i, w := range want {
				d := cfg.Jobs[i]
				checkImportedJob(t, d, w)
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

// TestImportCrontabStandardInput: "-" reads standard input; --user makes
// the crontab NAME's, its jobs run as NAME; flags may follow the file.
func TestImportCrontabStandardInput(t *testing.T) {
	crontab, err := os.ReadFile("testdata/crontab/cronie-crontab.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"import-crontab", "--user", "root", "-"}, {"import-crontab", "-", "--user", "root"}} {
		r := runBinary(t, "", string(crontab), args...)
		if r.code != 0 || !strings.Contains(r.stdout, "# read as the crontab of root: its jobs run as root.") ||
			!strings.Contains(r.stdout, "from a crontab on standard input") {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		cfg := checkConfig(t, r.stdout)
		if len(cfg.Jobs) != 5 {
			t.Fatalf("%d jobs, want 5", len(cfg.Jobs))
		}
		for _, d := range cfg.Jobs {
			if d.User != "root" {
				t.Errorf("%s: user %q, want root", d.Name, d.User)
			}
		}
	}
	// A system crontab read as root's: the user column is part of the
	// command, as cron would read such a line in a user crontab.
	r := runBinary(t, "", "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n", "import-crontab", "--user", "root", "-")
	if !strings.Contains(r.stdout, `shell = "root cd / && run-parts --report /etc/cron.hourly"`) {
		t.Errorf("--user on a system crontab:\n%s", r.stdout)
	}
}

// TestImportCrontabStandardInputOfCommands runs what the jobs of lines with %
// run, and checks that the command reads on its standard input what cron
// would write there: the text after the first %, each further % a newline,
// \% a %, no newline added.
func TestImportCrontabStandardInputOfCommands(t *testing.T) {
	for _, tc := range []struct{ line, stdout string }{
		{`cat%line one%line \% two%`, "line one\nline % two\n"},
		{`cat%no newline at the end`, "no newline at the end"},
		{`cat%`, ""},
		{`cat%it's 'quoted' "twice"%`, "it's 'quoted' \"twice\"\n"},
		{`echo \%before; cat%after`, "%before\nafter"},
		{`tr a-z A-Z # a comment%abc`, "ABC"},
		{`cat%\n stays%`, "\\n stays\n"},
	} {
		r := runBinary(t, "", "0 0 * * * "+tc.line+"\n", "import-crontab", "-")
		cfg := checkConfig(t, r.stdout)
		if len(cfg.Jobs) != 1 {
			t.Fatalf("%q: %d jobs:\n%s", tc.line, len(cfg.Jobs), r.stdout)
		}
		out, err := exec.Command("/bin/sh", "-c", cfg.Jobs[0].Shell).Output()
		if err != nil || string(out) != tc.stdout {
			t.Errorf("%q: the job prints %q (%v), want %q\n%s", tc.line, out, err, tc.stdout, cfg.Jobs[0].Shell)
		}
	}
}

func TestImportCrontabRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import-crontab"}, exitUsage, "give one crontab FILE, or - for standard input"},
		{[]string{"import-crontab", "a", "b"}, exitUsage, "give one crontab FILE"},
		{[]string{"import-crontab", "--user"}, exitUsage, "flag needs an argument"},
		{[]string{"import-crontab", "--user", "a\nb", "-"}, exitUsage, "is not a user name"},
		{[]string{"import-crontab", "testdata/crontab/no-such-file"}, exitFailure, "no such file"},
	} {
		r := runBinary(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, r.code, r.stderr, r.stdout, tc.code, tc.want)
		}
	}
	// Lines that cannot be translated are comments, and a warning counts them.
	r := runBinary(t, "", "@reboot /bin/true\nMAILTO=ops\n0 0 * * * /bin/true\n", "import-crontab", "-")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: import-crontab: 2 lines not translated") ||
		!strings.Contains(r.stdout, "# line 1: @reboot /bin/true\n#   not translated: @reboot") ||
		!strings.Contains(r.stdout, "# line 2: MAILTO=ops\n#   not translated: cron mails a job's output; schedulerd has no notifications yet") {
		t.Errorf("exit %d\nstderr %s\nstdout %s", r.code, r.stderr, r.stdout)
	}
}

// TestImportCrontabFormatDetection: a file is a system crontab when every
// job line has a user of this machine and a command after its schedule.
func TestImportCrontabFormatDetection(t *testing.T) {
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
		r := runBinary(t, "", tc.crontab, "import-crontab", "-")
		if got := strings.Contains(r.stdout, "# read as a system crontab"); got != tc.system || r.code != 0 {
			t.Errorf("%q: system %v, want %v\n%s", tc.crontab, got, tc.system, r.stdout)
		}
	}
}

func TestImportParseEnvLine(t *testing.T) {
	for _, tc := range []struct {
		line, name, value string
		ok                bool
	}{
		{"MAILTO=paul", "MAILTO", "paul", true},
		{"SHELL = /bin/sh", "SHELL", "/bin/sh", true},
		{"A=b=c", "A", "b=c", true},
		{"A=  spaced value  ", "A", "spaced value", true},
		{`A=" kept "`, "A", " kept ", true},
		{`A=' kept '  `, "A", " kept ", true},
		{`"A B"=x`, "A B", "x", true},
		{"EMPTY=", "EMPTY", "", true},
		{`MAILTO=""`, "MAILTO", "", true},
		{`A="x" y`, "", "", false},
		{`A="x`, "A", `"x`, false},
		{"0 * * * * cmd A=b", "", "", false},
		{"@daily A=b cmd", "", "", false},
		{"=x", "", "", false},
		{"NOEQUALS", "", "", false},
	} {
		name, value, ok := parseEnvLine(tc.line)
		if ok != tc.ok || ok && (name != tc.name || value != tc.value) {
			t.Errorf("parseEnvLine(%q) = %q, %q, %v; want %q, %q, %v", tc.line, name, value, ok, tc.name, tc.value, tc.ok)
		}
	}
}

func TestImportJobName(t *testing.T) {
	for _, tc := range []struct{ cmd, name string }{
		{"/usr/local/bin/backup --full", "backup"},
		{"$HOME/bin/daily.job >> $HOME/tmp/out 2>&1", "daily.job"},
		{"cd / && run-parts --report /etc/cron.hourly", "run-parts-cron.hourly"},
		{"test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }", "run-parts-cron.daily"},
		{"[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi", "sessionclean"},
		{"command -v debian-sa1 > /dev/null && debian-sa1 1 1", "debian-sa1"},
		{"test $(date +%u) -eq 6 && echo \"2nd Saturday\"", "echo"},
		{"test `date +%u` -eq 6 && echo x", "echo"},
		{"SERVICE_MODE=1 /sbin/e2scrub_all -A -r", "e2scrub_all"},
		{"exec nice -n 10 ionice -c3 /usr/bin/python3 /srv/app/manage.py cleanup", "python3-manage.py"},
		{"php /var/www/artisan schedule:run", "php-artisan"},
		{"perl -e 'sleep int(rand(43200))' && certbot -q renew", "perl"},
		{"timeout 10m flock -n /run/x.lock /opt/sync.sh", "sync.sh"},
		{"'/opt/my tool/run it' now", "run-it"},
		{"sleep 30; /usr/bin/true", "true"},
		{"cd /tmp", "cd"},
		{"echo ü€", "echo"},
		{"/opt/ünïcode", "n-code"},
		{"/opt/" + strings.Repeat("x", 100), strings.Repeat("x", 60)},
		{"/opt/...", "job"},
		{"   ", "job"},
	} {
		if got := jobName(tc.cmd); got != tc.name || !config.ValidJobName(got) {
			t.Errorf("jobName(%q) = %q, want %q", tc.cmd, got, tc.name)
		}
	}
}

// TestImportTOMLString: every string the import writes reads back the same.
func TestImportTOMLString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `with "double" quotes`, "with 'single' quotes", `both ' and "`, `back\slash`,
		"new\nline", "tab\there", "bell\a", "del\x7f", "ünïcødé €", `\u0041`, "'''", `"""`,
	} {
		var v struct{ S string }
		if _, err := toml.Decode("S = "+tomlString(s), &v); err != nil || v.S != s {
			t.Errorf("tomlString(%q) = %s, reads back as %q (%v)", s, tomlString(s), v.S, err)
		}
	}
}

// FuzzImportCrontab: whatever the crontab, the translation is TOML whose
// jobs have valid, distinct names.
func FuzzImportCrontab(f *testing.F) {
	for _, file := range []string{"cronie-crontab.5", "debian-crontab.5", "debian-etc-crontab", "edge-cases", "cron.d/php"} {
		data, err := os.ReadFile(filepath.Join("testdata/crontab", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("0 0 * * * cat%a%b\\%c%\n\"A\"='x'\n@daily root x\n0 0 L * * '\\\n\x00\xff")
	f.Fuzz(func(t *testing.T, crontab string) {
		im := &crontabImport{file: "-"}
		out := im.translate([]byte(crontab))
		var v struct {
			Job []struct{ Name string }
		}
		if _, err := toml.Decode(out, &v); err != nil {
			t.Fatalf("the translation is not TOML: %v\n%s", err, out)
		}
		names := map[string]bool{}
		for _, j := range v.Job {
			if !config.ValidJobName(j.Name) || names[j.Name] {
				t.Fatalf("job name %q invalid or repeated\n%s", j.Name, out)
			}
			names[j.Name] = true
		}
		if len(v.Job) != im.jobs {
			t.Fatalf("%d [[job]] tables, %d jobs counted\n%s", len(v.Job), im.jobs, out)
		}
	})
}

// TestImportCrontabTooLarge: a crontab whose translation no config could
// hold (each job repeats the environment) is refused, not printed.
func TestImportCrontabTooLarge(t *testing.T) {
	crontab := "BIG=" + strings.Repeat("x", 64<<10) + "\n" + strings.Repeat("0 0 * * * /bin/true\n", 300)
	r := runBinary(t, "", crontab, "import-crontab", "-")
	if r.code != exitUsage || !strings.Contains(r.stderr, "more than a config may hold") || r.stdout != "" {
		t.Errorf("exit %d, stderr %q, %d bytes on stdout", r.code, r.stderr, len(r.stdout))
	}
}

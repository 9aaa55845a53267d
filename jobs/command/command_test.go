package command

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
)

func envOf(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestEnvironmentStartsEmpty proves nothing of the daemon's environment
// reaches a job: the child sees exactly BaseEnv plus Spec.Env.
func TestEnvironmentStartsEmpty(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("LISTEN_FDS", "3")
	t.Setenv("SCHEDULERD_STORE_URL", "postgres://user:secret@db/sched")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter2")

	tests := []struct {
		name string
		env  map[string]string
	}{
		{"base only", nil},
		{"job vars", map[string]string{"FOO": "bar", "EMPTY": "", "WITH_EQ": "a=b"}},
		{"override base", map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/srv", "SHELL": "/bin/bash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runBounded(t, context.Background(), Spec{Argv: []string{"env"}, Env: tt.env})
			if res.StartErr != nil || res.ExitCode != 0 {
				t.Fatalf("env: exit %d, start error %v, output %q", res.ExitCode, res.StartErr, res.Output)
			}
			want := BaseEnv(nil)
			maps.Copy(want, tt.env)
			got := envOf(res.Output.String())
			if !maps.Equal(got, want) {
				t.Errorf("job environment\n got %v\nwant %v", got, want)
			}
			for _, k := range []string{"NOTIFY_SOCKET", "LISTEN_FDS", "SCHEDULERD_STORE_URL", "AWS_SECRET_ACCESS_KEY"} {
				if _, ok := got[k]; ok {
					t.Errorf("daemon variable %s leaked into the job", k)
				}
			}
		})
	}
}

// TestBaseEnv proves the base environment comes from the passwd entry, with
// defaults for an empty shell or home, and from the daemon's own user for nil.
func TestBaseEnv(t *testing.T) {
	self := currentIdentity()
	selfShell := self.Shell
	if selfShell == "" {
		selfShell = "/bin/sh"
	}
	tests := []struct {
		name string
		id   *Identity
		want map[string]string
	}{
		{"daemon user", nil, map[string]string{"HOME": self.Home, "USER": self.Name, "LOGNAME": self.Name, "SHELL": selfShell}},
		{"full entry", &Identity{Name: "alice", Home: "/home/alice", Shell: "/bin/zsh"},
			map[string]string{"HOME": "/home/alice", "USER": "alice", "LOGNAME": "alice", "SHELL": "/bin/zsh"}},
		{"empty shell and home", &Identity{Name: "svc"},
			map[string]string{"HOME": "/", "USER": "svc", "LOGNAME": "svc", "SHELL": "/bin/sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
			if got := BaseEnv(tt.id); !maps.Equal(got, tt.want) {
				t.Errorf("BaseEnv = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLookupUser proves names and numeric uids resolve to passwd data and
// unknown users are rejected with a message naming them.
func TestLookupUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		wantUID uint32
		want    string // expected Name
		wantErr string
	}{
		{name: "root", wantUID: 0, want: "root"},
		{name: "0", wantUID: 0, want: "root"},
		{name: "nobody", wantUID: 65534, want: "nobody"},
		{name: "65534", wantUID: 65534, want: "nobody"},
		{name: "no-such-user-sched", wantErr: `unknown user "no-such-user-sched"`},
		{name: "3999999999", wantErr: `unknown user "3999999999"`},
		{name: "", wantErr: "empty user name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := LookupUser(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LookupUser(%q) error = %v, want it to contain %q", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				if tt.want == "nobody" {
					t.Skipf("no nobody user on this system: %v", err)
				}
				t.Fatalf("LookupUser(%q): %v", tt.name, err)
			}
			if id.UID != tt.wantUID || id.Name != tt.want {
				t.Errorf("LookupUser(%q) = uid %d name %q, want uid %d name %q", tt.name, id.UID, id.Name, tt.wantUID, tt.want)
			}
			if !slices.Contains(id.Groups, id.GID) {
				t.Errorf("Groups %v lack the primary group %d", id.Groups, id.GID)
			}
			if want := passwdShell(passwdFile, id.Name, strconv.Itoa(int(id.UID))); id.Shell != want {
				t.Errorf("Shell = %q, want %q from the passwd file", id.Shell, want)
			}
		})
	}
}

// TestPasswdShell proves the shell field is parsed from a passwd file by name,
// falls back to the uid, and is empty when missing.
func TestPasswdShell(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "passwd")
	data := "# comment\n\nroot:x:0:0:root:/root:/bin/bash\nbroken:line\nsvc:x:900:900::/srv:\n" +
		"alice:x:1000:1000:Alice,,,:/home/alice:/usr/bin/zsh\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, uid, want string }{
		{"root", "0", "/bin/bash"},
		{"alice", "1000", "/usr/bin/zsh"},
		{"svc", "900", ""},
		{"renamed", "1000", "/usr/bin/zsh"},
		{"ghost", "4242", ""},
	}
	for _, tt := range tests {
		if got := passwdShell(path, tt.name, tt.uid); got != tt.want {
			t.Errorf("passwdShell(%q, %q) = %q, want %q", tt.name, tt.uid, got, tt.want)
		}
	}
	if got := passwdShell(filepath.Join(t.TempDir(), "missing"), "root", "0"); got != "" {
		t.Errorf("missing passwd file: got %q, want empty", got)
	}
}

// TestExitStatus proves exit codes are recorded and signal deaths give -1
// and the signal's name.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		spec     Spec
		wantCode int
		wantSig  string
	}{
		{"exit 0", Spec{Shell: "exit 0"}, 0, ""},
		{"exit 3", Spec{Shell: "exit 3"}, 3, ""},
		{"exit 255", Spec{Shell: "exit 255"}, 255, ""},
		{"argv true", Spec{Argv: []string{"true"}}, 0, ""},
		{"argv false", Spec{Argv: []string{"false"}}, 1, ""},
		{"argv with args", Spec{Argv: []string{"sh", "-c", "exit $1", "sh", "42"}}, 42, ""},
		{"SIGTERM", Spec{Shell: "kill -TERM $$"}, -1, "terminated"},
		{"SIGKILL", Spec{Shell: "kill -KILL $$"}, -1, "killed"},
		{"SIGSEGV", Spec{Shell: "kill -SEGV $$"}, -1, syscall.SIGSEGV.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBounded(t, context.Background(), tt.spec)
			if res.StartErr != nil {
				t.Fatalf("StartErr = %v", res.StartErr)
			}
			if res.ExitCode != tt.wantCode || res.Signal != tt.wantSig {
				t.Errorf("exit %d signal %q, want exit %d signal %q", res.ExitCode, res.Signal, tt.wantCode, tt.wantSig)
			}
			if res.Stopped || res.Killed {
				t.Errorf("Stopped=%v Killed=%v for a run nobody stopped", res.Stopped, res.Killed)
			}
			if res.Duration <= 0 {
				t.Errorf("Duration = %v, want > 0", res.Duration)
			}
		})
	}
}

// TestStartErrors proves every start failure gives ExitCode -1 and a StartErr
// naming the program, directory, user or setting at fault.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	garbage := filepath.Join(tmp, "garbage")
	if err := os.WriteFile(garbage, []byte("\x7fELFnot really\x00\x01"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(tmp, "plain")
	if err := os.WriteFile(plain, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		spec    Spec
		wantErr []string
	}{
		{"program not in PATH", Spec{Argv: []string{"no-such-program-sched"}}, []string{`"no-such-program-sched"`, "PATH"}},
		{"missing absolute program", Spec{Argv: []string{"/no/such/program"}}, []string{`"/no/such/program"`, "no such file"}},
		{"missing relative program", Spec{Argv: []string{"./nothing-here"}, Dir: "/"}, []string{`"./nothing-here"`, "no such file"}},
		{"not executable", Spec{Argv: []string{plain}}, []string{plain, "not executable"}},
		{"directory as program", Spec{Argv: []string{"/tmp"}}, []string{`"/tmp"`, "is a directory"}},
		{"exec format error", Spec{Argv: []string{garbage}}, []string{garbage, "exec format error"}},
		{"missing dir", Spec{Shell: "true", Dir: "/no/such/dir"}, []string{`working directory "/no/such/dir"`, "no such file"}},
		{"relative dir", Spec{Shell: "true", Dir: "tmp"}, []string{`working directory "tmp"`, "absolute"}},
		{"file as dir", Spec{Shell: "true", Dir: plain}, []string{`working directory "` + plain + `"`, "not a directory"}},
		{"unknown user", Spec{Shell: "true", User: "no-such-user-sched"}, []string{`unknown user "no-such-user-sched"`}},
		{"unknown uid", Spec{Shell: "true", User: "3999999999"}, []string{`unknown user "3999999999"`}},
		{"argv and shell", Spec{Shell: "true", Argv: []string{"true"}}, []string{"mutually exclusive"}},
		{"no command", Spec{}, []string{"neither Argv nor Shell"}},
		{"empty program", Spec{Argv: []string{""}}, []string{"empty program"}},
		{"bad env name", Spec{Shell: "true", Env: map[string]string{"A=B": "x"}}, []string{`"A=B"`}},
		{"NUL in env value", Spec{Shell: "true", Env: map[string]string{"NUL": "a\x00b"}}, []string{"NUL"}},
		{"PATH without the program", Spec{Argv: []string{"env"}, Env: map[string]string{"PATH": "/nonexistent"}}, []string{`"env"`, "/nonexistent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBounded(t, context.Background(), tt.spec)
			if res.StartErr == nil {
				t.Fatalf("StartErr = nil (exit %d, output %q), want an error", res.ExitCode, res.Output)
			}
			if res.ExitCode != -1 {
				t.Errorf("ExitCode = %d, want -1", res.ExitCode)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(res.StartErr.Error(), w) {
					t.Errorf("StartErr %q does not mention %q", res.StartErr, w)
				}
			}
			if res.Output.Total != 0 || res.Stopped || res.Killed {
				t.Errorf("unexpected result for a run that never started: %+v", res)
			}
		})
	}
}

// TestContextDoneBeforeStart proves a run whose context is already done never
// starts and reports Stopped.
func TestContextDoneBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := newPidFile(t)
	res := runBounded(t, ctx, Spec{Shell: "echo started > " + string(f)})
	if res.StartErr == nil || !res.Stopped || res.ExitCode != -1 {
		t.Errorf("got %+v, want StartErr, Stopped and exit -1", res)
	}
	if _, err := os.Stat(string(f)); err == nil {
		t.Error("the job ran although the context was already done")
	}
}

func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestProgramLookupUsesJobPath proves Argv[0] is searched in the job's PATH,
// never in the daemon's, and relative program paths resolve against Dir.
func TestProgramLookupUsesJobPath(t *testing.T) {
	jobDir, daemonDir := t.TempDir(), t.TempDir()
	writeScript(t, jobDir, "sched-probe", "echo job-path")
	writeScript(t, daemonDir, "sched-probe", "echo daemon-path")
	writeScript(t, daemonDir, "sched-daemon-only", "echo daemon-only")
	t.Setenv("PATH", daemonDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	tests := []struct {
		name    string
		spec    Spec
		want    string
		wantErr string
	}{
		{"job PATH wins", Spec{Argv: []string{"sched-probe"}, Env: map[string]string{"PATH": "relative/dir::" + jobDir + ":/usr/bin:/bin"}}, "job-path\n", ""},
		{"daemon PATH ignored", Spec{Argv: []string{"sched-daemon-only"}}, "", `"sched-daemon-only"`},
		{"default PATH", Spec{Argv: []string{"echo", "default"}}, "default\n", ""},
		{"relative to Dir", Spec{Argv: []string{"./sched-probe"}, Dir: jobDir}, "job-path\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runBounded(t, context.Background(), tt.spec)
			if tt.wantErr != "" {
				if res.StartErr == nil || !strings.Contains(res.StartErr.Error(), tt.wantErr) {
					t.Fatalf("StartErr = %v, want it to mention %s", res.StartErr, tt.wantErr)
				}
				return
			}
			if res.StartErr != nil || res.ExitCode != 0 {
				t.Fatalf("exit %d, StartErr %v", res.ExitCode, res.StartErr)
			}
			if got := res.Output.String(); got != tt.want {
				t.Errorf("output %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWorkingDirectory proves the Dir default: "/" without a user, the user's
// home when it exists, "/" when it does not, and an explicit Dir otherwise.
func TestWorkingDirectory(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	tmp, _ = filepath.EvalSymlinks(tmp)
	tests := []struct {
		name     string
		spec     Spec
		want     string
		needRoot bool
	}{
		{"default without user", Spec{Shell: "pwd -P"}, "/", false},
		{"explicit dir", Spec{Shell: "pwd -P", Dir: tmp}, tmp, false},
		{"user home", Spec{Shell: "pwd -P", User: "root"}, "/root", true},
		{"user without home dir", Spec{Shell: "pwd -P", User: "nobody"}, "/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.needRoot && os.Geteuid() != 0 {
				t.Skip("switching users needs root")
			}
			if tt.spec.User != "" {
				id, err := LookupUser(tt.spec.User)
				if err != nil {
					t.Skipf("user %s: %v", tt.spec.User, err)
				}
				if tt.want != "/" && !isDir(id.Home) {
					t.Skipf("home of %s does not exist", tt.spec.User)
				}
				if tt.want == "/" && isDir(id.Home) {
					t.Skipf("home of %s exists", tt.spec.User)
				}
			}
			res := runBounded(t, context.Background(), tt.spec)
			if res.StartErr != nil || res.ExitCode != 0 {
				t.Fatalf("exit %d, StartErr %v, output %q", res.ExitCode, res.StartErr, res.Output)
			}
			if got := strings.TrimSpace(res.Output.String()); got != tt.want {
				t.Errorf("working directory %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRunAsUser proves a job runs with the uid, gid, groups and passwd-derived
// HOME/USER/LOGNAME/SHELL of Spec.User, given by name or by numeric uid.
func TestRunAsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("running jobs as another user needs root; CI runs these tests as root")
	}
	id, err := LookupUser("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	var groups []string
	for _, g := range slices.Sorted(slices.Values(id.Groups)) {
		groups = append(groups, strconv.Itoa(int(g)))
	}
	shell := id.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	want := fmt.Sprintf("%d\n%d\n%s\n%s %s %s %s\n", id.UID, id.GID, strings.Join(groups, " "), id.Home, id.Name, id.Name, shell)
	for _, user := range []string{"nobody", strconv.Itoa(int(id.UID))} {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			res := runBounded(t, context.Background(), Spec{
				User:  user,
				Shell: `id -u; id -g; echo $(id -G | tr ' ' '\n' | sort -n); echo "$HOME $USER $LOGNAME $SHELL"`,
			})
			if res.StartErr != nil || res.ExitCode != 0 {
				t.Fatalf("exit %d, StartErr %v, output %q", res.ExitCode, res.StartErr, res.Output)
			}
			if got := res.Output.String(); got != want {
				t.Errorf("output\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestStop proves a done context sends SIGTERM to the whole group, escalates
// to SIGKILL after KillGrace for anything ignoring it (leader or grandchild),
// reports Stopped/Killed/Signal, and leaves no process of the group behind.
func TestStop(t *testing.T) {
	t.Parallel()
	// A job that handles TERM must be done within the grace: on a slow host
	// under a whole make test, 300 ms was once too short for a shell to run
	// its trap and exit (Killed=true). The cases that ignore TERM take the
	// whole grace, side by side.
	const grace = 3 * time.Second
	tests := []struct {
		name       string
		shell      string // $PIDS is a file to append "tag pid" lines to
		tags       []string
		wantCode   int
		wantSignal string
		wantKilled bool
	}{
		{
			name: "leader and grandchild ignore TERM",
			shell: `trap "" TERM; echo L $$ >> "$PIDS"
				sh -c 'echo G $$ >> "$PIDS"; exec sleep 600' &
				sleep 600`,
			tags: []string{"L", "G"}, wantCode: -1, wantSignal: "killed", wantKilled: true,
		},
		{
			name: "leader dies, grandchild ignores TERM",
			shell: `echo L $$ >> "$PIDS"
				sh -c 'trap "" TERM; echo G $$ >> "$PIDS"; exec sleep 600' &
				wait`,
			tags: []string{"L", "G"}, wantCode: -1, wantSignal: "terminated", wantKilled: true,
		},
		{
			name:  "cooperative job",
			shell: `echo L $$ >> "$PIDS"; exec sleep 600`,
			tags:  []string{"L"}, wantCode: -1, wantSignal: "terminated",
		},
		{
			// The child writes its tag itself, from a shell of its own, so
			// that TERM comes after it has started. With "sleep 600 &" the
			// group was signalled while the forked subshell, which
			// inherited the trap, had not yet run sleep, and that child
			// now and then outlived TERM until SIGKILL (seen with a 3 s and
			// a 60 s grace alike).
			name:  "job handles TERM",
			shell: `trap 'exit 7' TERM; sh -c 'echo C $$ >> "$PIDS"; exec sleep 600' & echo L $$ >> "$PIDS"; wait`,
			tags:  []string{"L", "C"}, wantCode: 7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newPidFile(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan Result, 1)
			go func() {
				done <- Run(ctx, Spec{Shell: tt.shell, KillGrace: grace, Env: map[string]string{"PIDS": string(f)}})
			}()
			pids := f.waitPids(t, tt.tags...)
			cancel()
			var res Result
			select {
			case res = <-done:
			case <-time.After(hangLimit):
				t.Fatalf("Run did not return within %v of cancel", hangLimit)
			}
			if !res.Stopped || res.Killed != tt.wantKilled || res.ExitCode != tt.wantCode || res.Signal != tt.wantSignal {
				t.Errorf("Stopped=%v Killed=%v exit=%d signal=%q; want Stopped=true Killed=%v exit=%d signal=%q",
					res.Stopped, res.Killed, res.ExitCode, res.Signal, tt.wantKilled, tt.wantCode, tt.wantSignal)
			}
			if tt.wantKilled && res.Duration < grace {
				t.Errorf("Duration %v shorter than KillGrace %v although SIGKILL was needed", res.Duration, grace)
			}
			pgid := pids["L"]
			if !eventually(2*time.Second, func() bool { return !proctest.GroupAlive(pgid) }) {
				t.Errorf("process group %d still has live members after Run returned", pgid)
			}
			for tag, pid := range pids {
				if proctest.Alive(pid) {
					t.Errorf("process %s (pid %d) still alive after Run returned", tag, pid)
				}
			}
		})
	}
}

// TestTimeout proves a context deadline stops a run like a cancel does.
func TestTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := runBounded(t, ctx, Spec{Argv: []string{"sleep", "600"}, KillGrace: time.Second})
	if !res.Stopped || res.Killed || res.ExitCode != -1 || res.Signal != "terminated" {
		t.Errorf("got Stopped=%v Killed=%v exit=%d signal=%q, want a run stopped by SIGTERM",
			res.Stopped, res.Killed, res.ExitCode, res.Signal)
	}
}

// TestBackgroundProcesses proves a run returns promptly after the main
// process exits even when background processes hold the output pipe, kills
// what is left of the group, and stops reading when a process outside the
// group keeps the pipe open.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		shell      string
		tag        string
		escapes    bool // the process leaves the group, so Run cannot kill it
		wantOutput string
	}{
		{"holds the pipe", `sleep 600 & echo B $! >> "$PIDS"; echo done`, "B", false, "done\n"},
		{"pipe closed", `sleep 600 >/dev/null 2>&1 & echo B $! >> "$PIDS"; echo done`, "B", false, "done\n"},
		{"grandchild holds the pipe", `sh -c 'sleep 600 & echo B $! >> "$PIDS"; exit 0'; echo done`, "B", false, "done\n"},
		{"escaped the group", `setsid sh -c 'echo B $$ >> "$PIDS"; exec sleep 600' & echo done`, "B", true, "done\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newPidFile(t)
			if tt.escapes {
				t.Cleanup(func() {
					// This test's own escaped process: end it by its pid.
					if pid := f.waitPids(t, tt.tag)[tt.tag]; pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				})
			}
			res := runBounded(t, context.Background(), Spec{Shell: tt.shell, Env: map[string]string{"PIDS": string(f)}})
			if res.StartErr != nil || res.ExitCode != 0 || res.Stopped || res.Killed {
				t.Fatalf("got %+v, want a clean exit 0", res)
			}
			if got := res.Output.String(); got != tt.wantOutput {
				t.Errorf("output %q, want %q", got, tt.wantOutput)
			}
			pid := f.waitPids(t, tt.tag)[tt.tag]
			if tt.escapes {
				if !proctest.Alive(pid) {
					t.Logf("escaped process %d already gone", pid)
				}
				return
			}
			if !eventually(2*time.Second, func() bool { return !proctest.Alive(pid) }) {
				t.Errorf("background process %d outlived the run", pid)
			}
		})
	}
}

// TestOutput proves stdout and stderr are captured interleaved in one stream
// and bounded to OutputLimit bytes of head and of tail with a marker between.
func TestOutput(t *testing.T) {
	t.Parallel()
	alphabet := "0123456789abcdefghijklmnopqrstuvwxyz" // 36 bytes
	tests := []struct {
		name      string
		spec      Spec
		want      string
		wantTotal int64
		wantTrunc bool
	}{
		{"interleaved", Spec{Shell: "echo out1; echo err1 >&2; echo out2; echo err2 >&2"}, "out1\nerr1\nout2\nerr2\n", 20, false},
		{"no output", Spec{Shell: "true"}, "", 0, false},
		{"fits head", Spec{Shell: "printf " + alphabet[:8], OutputLimit: 10}, alphabet[:8], 8, false},
		{"fits head and tail", Spec{Shell: "printf " + alphabet[:20], OutputLimit: 10}, alphabet[:20], 20, false},
		{"truncated", Spec{Shell: "printf " + alphabet, OutputLimit: 10},
			alphabet[:10] + "\n[... 16 bytes truncated ...]\n" + alphabet[26:], 36, true},
		{"truncated stderr", Spec{Shell: "printf " + alphabet + " >&2", OutputLimit: 4},
			alphabet[:4] + "\n[... 28 bytes truncated ...]\n" + alphabet[32:], 36, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBounded(t, context.Background(), tt.spec)
			if res.StartErr != nil || res.ExitCode != 0 {
				t.Fatalf("exit %d, StartErr %v", res.ExitCode, res.StartErr)
			}
			o := res.Output
			if got := o.String(); got != tt.want {
				t.Errorf("output %q, want %q", got, tt.want)
			}
			if o.Total != tt.wantTotal || o.Truncated != tt.wantTrunc {
				t.Errorf("Total=%d Truncated=%v, want %d %v", o.Total, o.Truncated, tt.wantTotal, tt.wantTrunc)
			}
		})
	}
}

// TestOneGiBOutput proves a job writing 1 GiB is fully drained with exact
// Total while memory stays bounded by the head, the tail and one read buffer.
func TestOneGiBOutput(t *testing.T) {
	// Not parallel: memory statistics are process-wide.
	const size = 1 << 30
	runtimeGC()
	before := memStats()
	start := time.Now()
	res := runBounded(t, context.Background(), Spec{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})
	elapsed := time.Since(start)
	after := memStats()
	if res.StartErr != nil || res.ExitCode != 0 {
		t.Fatalf("exit %d, StartErr %v", res.ExitCode, res.StartErr)
	}
	o := res.Output
	if o.Total != size {
		t.Errorf("Total = %d, want %d", o.Total, size)
	}
	if len(o.Head) != defaultOutputLimit || len(o.Tail) != defaultOutputLimit || !o.Truncated {
		t.Errorf("len(Head)=%d len(Tail)=%d Truncated=%v, want %d, %d, true",
			len(o.Head), len(o.Tail), o.Truncated, defaultOutputLimit, defaultOutputLimit)
	}
	for _, b := range [][]byte{o.Head, o.Tail} {
		if strings.Trim(string(b), "\x00") != "" {
			t.Error("captured bytes differ from what the job wrote")
		}
	}
	const maxGrowth = 32 << 20
	allocated := after.TotalAlloc - before.TotalAlloc
	inuse := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("1 GiB drained in %v; allocated %d bytes, heap in use grew %d bytes", elapsed, allocated, inuse)
	if allocated > maxGrowth || inuse > maxGrowth {
		t.Errorf("memory grew too much for 1 GiB of output: allocated %d, heap in use +%d (limit %d)", allocated, inuse, maxGrowth)
	}
}

// TestConcurrentRuns proves Run is safe to call from many goroutines at once:
// each run gets its own environment, output and exit status.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	const n = 40
	var wg sync.WaitGroup
	results := make([]Result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = Run(context.Background(), Spec{
				Shell:       `echo "job $N"; echo "err $N" >&2; exit $((N % 7))`,
				Env:         map[string]string{"N": strconv.Itoa(i)},
				OutputLimit: 1 << 10,
			})
		})
	}
	wg.Wait()
	for i, res := range results {
		want := fmt.Sprintf("job %d\nerr %d\n", i, i)
		if res.StartErr != nil || res.ExitCode != i%7 || res.Output.String() != want {
			t.Errorf("run %d: exit %d, StartErr %v, output %q; want exit %d, output %q",
				i, res.ExitCode, res.StartErr, res.Output, i%7, want)
		}
	}
}

// TestCheckSwitch: root may run jobs as any user; an unknown user is an
// error. (An unprivileged daemon refusing other users is tested by
// cmd/schedulerd TestUnprivilegedDaemon, which runs one as nobody.)
func TestCheckSwitch(t *testing.T) {
	if err := CheckSwitch("no-such-user-here"); err == nil {
		t.Error("CheckSwitch of an unknown user: no error")
	}
	self, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSwitch(self.Username); err != nil {
		t.Errorf("CheckSwitch(%s), the process's own user: %v", self.Username, err)
	}
	if os.Geteuid() == 0 {
		if err := CheckSwitch("nobody"); err != nil {
			t.Errorf("CheckSwitch(nobody) as root: %v", err)
		}
	}
}

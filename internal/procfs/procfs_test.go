package procfs

import (
	"os"
	"os/exec"
	"testing"
)

func TestGone(t *testing.T) {
	if Gone(os.Getpid()) {
		t.Error("this process is reported gone")
	}
	if !Gone(0) || !Gone(-1) {
		t.Error("pid 0 or -1 is reported live")
	}
	// A child that exited and is not reaped yet is a zombie: gone.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waitFor(t, func() bool { return Gone(pid) })
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !Gone(pid) {
		t.Errorf("reaped pid %d is reported live", pid)
	}
	// A sleeping child is live.
	sleep := exec.Command("/bin/sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	if Gone(sleep.Process.Pid) {
		t.Error("a sleeping child is reported gone")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if WaitWhile(func() bool { return !cond() }) {
		t.Fatal("condition not met within Linger")
	}
}

func TestWaitWhile(t *testing.T) {
	n := 0
	if WaitWhile(func() bool { n++; return n < 3 }) {
		t.Error("WaitWhile reports held after the condition cleared")
	}
	if n != 3 {
		t.Errorf("held called %d times, want 3", n)
	}
}

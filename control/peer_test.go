package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// The test binary doubles as a client that another user runs: with
// CONTROL_TEST_HELPER=trigger it triggers the job backup over the socket in
// CONTROL_TEST_SOCKET and prints a helperResult.
func TestMain(m *testing.M) {
	switch os.Getenv("CONTROL_TEST_HELPER") {
	case "trigger":
		os.Exit(triggerHelper(os.Getenv("CONTROL_TEST_SOCKET")))
	case "orphan":
		os.Exit(orphanHelper(os.Getenv("CONTROL_TEST_SOCKET")))
	}
	os.Exit(m.Run())
}

type helperResult struct {
	PID        int    `json:"pid"`
	UID        int    `json:"uid"`
	OK         bool   `json:"ok"`
	Error      string `json:"error"`
	Status     int    `json:"status"`
	Code       string `json:"code"`
	Permission bool   `json:"permission"`
}

func triggerHelper(sock string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := helperResult{PID: os.Getpid(), UID: os.Getuid()}
	_, err := NewClient(sock).Trigger(ctx, "backup", TriggerRequest{})
	res.OK = err == nil
	if err != nil {
		res.Error = err.Error()
		res.Permission = errors.Is(err, ErrPermissionDenied)
		var ae *APIError
		if errors.As(err, &ae) {
			res.Status, res.Code = ae.Status, ae.Code
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// asNobody runs the test binary as uid 65534 (group 65534) against sock.
func asNobody(t *testing.T, bin, sock string) helperResult {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{"CONTROL_TEST_HELPER=trigger", "CONTROL_TEST_SOCKET=" + sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	var res helperResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if res.UID != 65534 {
		t.Fatalf("helper ran as uid %d", res.UID)
	}
	return res
}

// copyTestBinary copies the test binary where another user can run it.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(socketDir(t), "control.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestPeerNotAllowed: a user who is neither root, the daemon's user nor in
// socket_group is kept out by the file modes; when the modes let them
// connect anyway, SO_PEERCRED refuses them before the engine sees anything,
// and the refusal is logged with their pid and uid. A member of
// socket_group gets in.
func TestPeerNotAllowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a client as another user needs root")
	}
	bin := copyTestBinary(t)
	noRuns := func(t *testing.T, ts *testServer) {
		t.Helper()
		if calls := ts.eng.Calls(); len(calls) != 0 {
			t.Errorf("the engine was called for a refused peer: %v", calls)
		}
		if runs, err := ts.st.RunsList(context.Background(), store.RunFilter{}); err != nil || len(runs) != 0 {
			t.Errorf("runs after a refused trigger: %v %v", runs, err)
		}
	}

	t.Run("modes", func(t *testing.T) {
		ts := startServer(t, nil)
		res := asNobody(t, bin, ts.Path())
		if res.OK || !res.Permission || res.Status != 0 {
			t.Fatalf("nobody through 0750/0660: %+v, want a permission error from connect", res)
		}
		noRuns(t, ts)
	})

	t.Run("peercred", func(t *testing.T) {
		ts := startServer(t, nil)
		// Open the modes up: only the credential check is left.
		if err := os.Chmod(filepath.Dir(ts.Path()), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ts.Path(), 0o666); err != nil {
			t.Fatal(err)
		}
		res := asNobody(t, bin, ts.Path())
		if res.OK || !res.Permission || res.Status != 403 || res.Code != CodePermissionDenied {
			t.Fatalf("nobody through open modes: %+v, want 403 permission_denied", res)
		}
		noRuns(t, ts)
		recs := ts.logs.records("refused a connection")
		if len(recs) != 1 {
			t.Fatalf("refusal logs: %v", recs)
		}
		if fmt.Sprint(recs[0]["pid"]) != fmt.Sprint(res.PID) || fmt.Sprint(recs[0]["uid"]) != "65534" {
			t.Errorf("refusal logged as %v, want pid %d and uid 65534", recs[0], res.PID)
		}
		// The server still serves others.
		if _, err := ts.c.Jobs(context.Background()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("group member", func(t *testing.T) {
		ts := startServer(t, func(c *ServerConfig) { c.Group = "nogroup" })
		res := asNobody(t, bin, ts.Path())
		if !res.OK {
			t.Fatalf("a member of socket_group was refused: %+v", res)
		}
		if calls := ts.eng.Calls(); len(calls) != 1 || calls[0] != "trigger backup" {
			t.Fatalf("engine calls %v", calls)
		}
	})
}

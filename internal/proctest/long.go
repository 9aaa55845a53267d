package proctest

import "testing"

// Long skips t under `go test -short`, the inner loop, with one reason for
// every long process test: what makes it long (kills and restarts, a
// cluster, a flood, large output), then "long process test; run without
// -short". Without -short it does nothing: make test runs every test.
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: long process test; run without -short", what)
	}
}

package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// BenchmarkClaimComplete: claim 1,000 runs of one job, then complete them
// in one RunTransitionMany, per iteration; runs/s is the engine's bound.
func BenchmarkClaimComplete(b *testing.B) {
	s, err := Open(b.Context(), Options{Path: filepath.Join(b.TempDir(), "schedulerd.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchClaimComplete(b, s, 1000, true)
}

package main

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// testRNG returns the random source of a randomized process test, seeded
// from $SCHEDULERD_TEST_SEED when set, else from the clock; the seed is
// logged so that a failure can be replayed with the same kills and
// pauses (their timing still depends on the machine).
func testRNG(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SCHEDULERD_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SCHEDULERD_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("random seed %d (replay: SCHEDULERD_TEST_SEED=%d go test -run '^%s$')", seed, seed, t.Name())
	return rand.New(rand.NewPCG(seed, stream))
}

package main

import "testing"

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{4 << 20, 100},  // a small daemon keeps the default
		{16 << 20, 100}, // headroom equal to the live heap
		{32 << 20, 50},
		{62 << 20, 25}, // 100,000 jobs: 16 MiB would be 25.8%
		{1 << 30, 25},  // never below 25%
	} {
		if got := gcPercent(tc.live); got != tc.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

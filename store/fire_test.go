package store

import (
	"errors"
	"slices"
	"testing"
)

// TestFireRounds: a batch is cut into rounds of distinct jobs, in order;
// a job fired again starts a new round, and an error stops the rounds.
func TestFireRounds(t *testing.T) {
	tests := []struct {
		name string
		jobs []string
		want [][2]int
	}{
		{"none", nil, nil},
		{"distinct", []string{"a", "b", "c"}, [][2]int{{0, 3}}},
		{"again", []string{"a", "b", "a", "c"}, [][2]int{{0, 2}, {2, 4}}},
		{"three times", []string{"a", "a", "a"}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := make([]FireParams, len(tc.jobs))
			for i, job := range tc.jobs {
				ps[i].Job = job
			}
			var got [][2]int
			err := FireRounds(ps, func(from, to int) error {
				got = append(got, [2]int{from, to})
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("rounds %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	stop := errors.New("stop")
	calls := 0
	err := FireRounds([]FireParams{{Job: "a"}, {Job: "a"}}, func(int, int) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("an error of the first round: %v after %d calls, want it after 1", err, calls)
	}
}

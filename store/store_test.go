package store

import (
	"slices"
	"testing"
)

// TestNameIndex: Has answers membership exactly whatever the order of the
// names, and never changes the caller's list.
func TestNameIndex(t *testing.T) {
	tests := []struct {
		name  string
		names []string
	}{
		{"none", nil},
		{"one", []string{"b"}},
		{"sorted", []string{"a", "b", "d", "f"}},
		{"sorted with repeats", []string{"a", "b", "b", "d"}},
		{"unsorted", []string{"f", "a", "d", "b"}},
		{"reversed", []string{"f", "d", "b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			given := slices.Clone(tc.names)
			x := NewNameIndex(given)
			// Twice each, so that a question after the sort is asked too.
			for range 2 {
				for _, job := range []string{"a", "b", "c", "d", "e", "f", "g", ""} {
					if got, want := x.Has(job), slices.Contains(tc.names, job); got != want {
						t.Errorf("Has(%q) = %v, want %v", job, got, want)
					}
				}
			}
			if !slices.Equal(given, tc.names) {
				t.Errorf("the list became %q, was %q", given, tc.names)
			}
		})
	}
}

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

// TestJobLimits: the limits of a map are found by name, with the names
// sorted; Only keeps the jobs named that are among them; Limited says
// whether some job has a limit.
func TestJobLimits(t *testing.T) {
	l := NewJobLimits(map[string]int{"report": 0, "backup": 2, "etl": 1, "neg": -1})
	if l.Len() != 4 || !slices.Equal(l.Names(), []string{"backup", "etl", "neg", "report"}) || !l.Limited() {
		t.Fatalf("names %q, len %d, limited %v", l.Names(), l.Len(), l.Limited())
	}
	for _, c := range []struct {
		job   string
		limit int
		ok    bool
	}{{"backup", 2, true}, {"etl", 1, true}, {"report", 0, true}, {"neg", 0, true}, {"other", 0, false}, {"", 0, false}} {
		if limit, ok := l.Limit(c.job); limit != c.limit || ok != c.ok {
			t.Errorf("Limit(%q) = %d, %v; want %d, %v", c.job, limit, ok, c.limit, c.ok)
		}
	}
	only := l.Only([]string{"report", "other", "etl", "report"})
	if !slices.Equal(only.Names(), []string{"etl", "report"}) || !only.Limited() {
		t.Fatalf("Only: names %q, limited %v", only.Names(), only.Limited())
	}
	if limit, ok := only.Limit("etl"); limit != 1 || !ok {
		t.Errorf("Only: Limit(etl) = %d, %v", limit, ok)
	}
	if free := l.Only([]string{"report"}); free.Limited() || free.Len() != 1 {
		t.Errorf("Only(report): limited %v, len %d", free.Limited(), free.Len())
	}
	if none := l.Only(nil); none.Len() != 0 {
		t.Errorf("Only(nil): %q", none.Names())
	}
	if empty := NewJobLimits(nil); empty.Len() != 0 || empty.Limited() {
		t.Errorf("no jobs: %q, limited %v", empty.Names(), empty.Limited())
	}
}

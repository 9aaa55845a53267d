package scheduler

import "testing"

// TestAttemptToken: a token opens its own run and attempt only, and a
// token of one process is worthless to the next.
func TestAttemptToken(t *testing.T) {
	var a, b Scheduler
	if err := newTokenKey(&a.tokenKey); err != nil {
		t.Fatal(err)
	}
	if err := newTokenKey(&b.tokenKey); err != nil {
		t.Fatal(err)
	}
	tok := a.AttemptToken("run-1", 2)
	if !a.CheckAttemptToken("run-1", 2, tok) {
		t.Fatal("a token does not open its own attempt")
	}
	for _, tt := range []struct {
		s       *Scheduler
		run     string
		attempt int
		token   string
	}{
		{&a, "run-2", 2, tok},
		{&a, "run-1", 1, tok},
		{&a, "run-1", 3, tok},
		{&b, "run-1", 2, tok},
		{&a, "run-1", 2, ""},
		{&a, "run-1", 2, tok[:len(tok)-2]},
		{&a, "run-1", 2, "zz" + tok[2:]},
		// "run-1" + "2" must not be "run-12" + "".
		{&a, "run-12", 0, a.AttemptToken("run-1", 20)},
	} {
		if tt.s.CheckAttemptToken(tt.run, tt.attempt, tt.token) {
			t.Errorf("token %q opens run %s attempt %d", tt.token, tt.run, tt.attempt)
		}
	}
}

package jobs

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestValidateTransition(t *testing.T) {
	allowed := map[[2]Status]bool{
		{StatusPending, StatusRunning}: true, {StatusPending, StatusCancelled}: true,
		{StatusRetrying, StatusRunning}: true, {StatusRetrying, StatusCancelled}: true,
		{StatusRunning, StatusCompleted}: true, {StatusRunning, StatusRetrying}: true,
		{StatusRunning, StatusDeadLetter}: true, {StatusRunning, StatusCancelled}: true,
	}
	for _, from := range Statuses {
		for _, to := range Statuses {
			err := ValidateTransition(from, to)
			if want := allowed[[2]Status{from, to}]; want != (err == nil) {
				t.Errorf("%s -> %s: err %v, want allowed=%v", from, to, err, want)
			}
			if err != nil && !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("%s -> %s: %v is not ErrInvalidTransition", from, to, err)
			}
		}
		if from.Terminal() != (from == StatusCompleted || from == StatusCancelled || from == StatusDeadLetter) {
			t.Errorf("%s: Terminal() = %v", from, from.Terminal())
		}
	}
}

// TestRetryDelayWithinPolicy: with jitter drawn at random, every delay lies
// in [d/2, d] of the policy's delay d, which doubles per attempt up to
// max_delay; fixed backoff stays at initial_delay.
func TestRetryDelayWithinPolicy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []RetryPolicy{
		{MaxAttempts: 10, Backoff: BackoffExponential, InitialDelay: 2 * time.Second, MaxDelay: time.Minute, Jitter: true},
		{MaxAttempts: 10, Backoff: BackoffExponential, InitialDelay: 2 * time.Second, MaxDelay: time.Minute},
		{MaxAttempts: 10, Backoff: BackoffFixed, InitialDelay: 5 * time.Second, Jitter: true},
		{MaxAttempts: 100, Backoff: BackoffExponential, InitialDelay: time.Hour}, // overflow guard, no max
	} {
		for attempt := 1; attempt <= p.MaxAttempts; attempt++ {
			d := p.InitialDelay
			if p.Backoff == BackoffExponential {
				f := float64(p.InitialDelay) * math.Pow(2, float64(attempt-1))
				d = time.Duration(math.MaxInt64) // saturates instead of overflowing
				if f < math.MaxInt64 {
					d = time.Duration(f)
				}
			}
			if p.MaxDelay > 0 && d > p.MaxDelay {
				d = p.MaxDelay
			}
			for i := 0; i < 50; i++ {
				got := p.Delay(attempt, rng.Float64)
				lo := d
				if p.Jitter {
					lo = d / 2
				}
				if got < lo || got > d || got < 0 {
					t.Fatalf("%+v attempt %d: delay %s outside [%s, %s]", p, attempt, got, lo, d)
				}
			}
		}
	}
}

func TestFailAttemptDecisions(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	code := func(c int) *int { return &c }
	base := Run{ID: "r", MaxAttempts: 3, NoRetryExitCodes: []int{2},
		Retry: RetryPolicy{MaxAttempts: 3, Backoff: BackoffFixed, InitialDelay: time.Minute}}
	for _, tc := range []struct {
		name     string
		attempt  int
		exit     *int
		notAfter time.Time
		to       Status
		reason   Reason
	}{
		{"first failure retries", 1, code(1), time.Time{}, StatusRetrying, ReasonFailed},
		{"last attempt dead-letters", 3, code(1), time.Time{}, StatusDeadLetter, ReasonFailed},
		{"no-retry code dead-letters at once", 1, code(2), time.Time{}, StatusDeadLetter, ReasonNoRetryCode},
		{"retry past not_after expires", 1, code(1), now.Add(30 * time.Second), StatusCancelled, ReasonExpired},
		{"retry before not_after retries", 1, code(1), now.Add(2 * time.Minute), StatusRetrying, ReasonFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.NotAfter = tc.notAfter
			f := Fence{RunID: "r", Attempt: tc.attempt, Incarnation: "i"}
			tr := FailAttempt(&r, f, "n", Result{ExitCode: tc.exit, Err: errors.New("x")}, ReasonFailed, now, nil)
			if tr.To != tc.to || tr.Reason != tc.reason {
				t.Fatalf("-> %s (%s), want %s (%s)", tr.To, tr.Reason, tc.to, tc.reason)
			}
			if tr.To == StatusRetrying && !tr.NotBefore.Equal(now.Add(time.Minute)) {
				t.Fatalf("next attempt at %s", tr.NotBefore)
			}
			if tr.Fence == nil || *tr.Fence != f {
				t.Fatal("an attempt's transition must carry its fence")
			}
		})
	}
}

// TestFailAttemptBeforeNotBefore: an attempt that ends before its run's
// not_before (claimed ahead of its tick, then interrupted before it) is
// retried no earlier than that not_before, whatever the backoff.
func TestFailAttemptBeforeNotBefore(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tick := now.Add(40 * time.Millisecond)
	r := Run{ID: "r", MaxAttempts: 3, NotBefore: tick, Retry: RetryPolicy{MaxAttempts: 3, Backoff: BackoffFixed}}
	f := Fence{RunID: "r", Attempt: 1, Incarnation: "i"}
	tr := FailAttempt(&r, f, "n", Result{Err: errors.New("x")}, ReasonInterrupted, now, nil)
	if tr.To != StatusRetrying || !tr.NotBefore.Equal(tick) {
		t.Fatalf("-> %s, next attempt at %s; want retrying at the run's not_before %s", tr.To, tr.NotBefore, tick)
	}
	r.Retry.InitialDelay = time.Second // a backoff past not_before is kept
	if tr := FailAttempt(&r, f, "n", Result{Err: errors.New("x")}, ReasonInterrupted, now, nil); !tr.NotBefore.Equal(now.Add(time.Second)) {
		t.Fatalf("next attempt at %s, want %s", tr.NotBefore, now.Add(time.Second))
	}
}

func TestFinish(t *testing.T) {
	now := time.Now()
	r := &Run{ID: "r", MaxAttempts: 3, Retry: DefaultRetry}
	f := Fence{RunID: "r", Attempt: 1, Incarnation: "i"}
	zero, one := 0, 1
	for _, tc := range []struct {
		res Result
		to  Status
		why Reason
	}{
		{Result{ExitCode: &zero}, StatusCompleted, ReasonSucceeded},
		{Result{}, StatusCompleted, ReasonSucceeded},
		{Result{ExitCode: &one, Err: errors.New("exit 1")}, StatusRetrying, ReasonFailed},
		{Result{StartFailed: true, Err: errors.New("no such file")}, StatusRetrying, ReasonStartFailed},
		{Result{Reason: ReasonTimeout, Err: errors.New("timed out")}, StatusRetrying, ReasonTimeout},
		{Result{Reason: ReasonCancelled}, StatusCancelled, ReasonCancelled},
		{Result{Reason: ReasonReplaced}, StatusCancelled, ReasonReplaced},
		{Result{Reason: ReasonShutdown, ExitCode: &zero}, StatusRetrying, ReasonShutdown},
	} {
		tr := Finish(r, f, "n", tc.res, now, func() float64 { return 0.5 })
		if tr.To != tc.to || tr.Reason != tc.why {
			t.Errorf("%+v -> %s (%s), want %s (%s)", tc.res, tr.To, tr.Reason, tc.to, tc.why)
		}
	}
}

func TestWindows(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := ValidateWindow(t0, t0); !errors.Is(err, ErrWindow) {
		t.Errorf("not_after == not_before: %v", err)
	}
	if err := ValidateWindow(t0, t0.Add(-time.Second)); !errors.Is(err, ErrWindow) {
		t.Errorf("not_after < not_before: %v", err)
	}
	if err := ValidateWindow(time.Time{}, t0); err != nil {
		t.Errorf("open start: %v", err)
	}
	d := &Definition{Name: "j", Command: []string{"x"}, StartDeadline: 30 * time.Minute,
		NotBefore: t0.Add(time.Hour), NotAfter: t0.Add(10 * time.Hour)}
	nb, na := d.Window(TriggerSchedule, t0.Add(2*time.Hour))
	if !nb.Equal(t0.Add(2*time.Hour)) || !na.Equal(t0.Add(2*time.Hour+30*time.Minute)) {
		t.Errorf("cron window %s..%s", nb, na)
	}
	nb, na = d.Window(TriggerManual, t0)
	if !nb.Equal(t0.Add(time.Hour)) || !na.Equal(t0.Add(10*time.Hour)) {
		t.Errorf("manual window %s..%s: not_before must not precede the job's", nb, na)
	}
}

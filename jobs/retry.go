package jobs

import (
	"fmt"
	"math"
	"time"
)

// Backoff is the growth of the delay between attempts.
type Backoff string

const (
	// BackoffFixed waits InitialDelay between every two attempts.
	BackoffFixed Backoff = "fixed"
	// BackoffExponential doubles the delay after each failed attempt,
	// starting at InitialDelay and capped at MaxDelay.
	BackoffExponential Backoff = "exponential"
)

// RetryPolicy says how often a run is attempted and how long it waits between attempts.
type RetryPolicy struct {
	MaxAttempts  int // total attempts, the first included; 1 means no retry
	Backoff      Backoff
	InitialDelay time.Duration
	MaxDelay     time.Duration
	// Jitter spreads retries of many runs: the delay is drawn uniformly from
	// [d/2, d] where d is the delay without jitter ("equal jitter").
	Jitter bool
}

// DefaultRetry is the policy of a job that sets none.
var DefaultRetry = RetryPolicy{
	MaxAttempts:  3,
	Backoff:      BackoffExponential,
	InitialDelay: 5 * time.Second,
	MaxDelay:     5 * time.Minute,
	Jitter:       true,
}

// Validate checks the policy; messages start with the key name.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("max_attempts: must be at least 1, got %d", p.MaxAttempts)
	case p.MaxAttempts > 1000:
		return fmt.Errorf("max_attempts: must be at most 1000, got %d", p.MaxAttempts)
	case p.Backoff != BackoffFixed && p.Backoff != BackoffExponential:
		return fmt.Errorf("backoff: must be \"fixed\" or \"exponential\", got %q", p.Backoff)
	case p.InitialDelay < 0:
		return fmt.Errorf("initial_delay: must not be negative, got %s", p.InitialDelay)
	case p.MaxDelay < 0:
		return fmt.Errorf("max_delay: must not be negative, got %s", p.MaxDelay)
	case p.MaxDelay > 0 && p.MaxDelay < p.InitialDelay:
		return fmt.Errorf("max_delay: %s is less than initial_delay %s", p.MaxDelay, p.InitialDelay)
	}
	return nil
}

// Delay returns the wait after the failed attempt number attempt (1-based).
// rnd returns a float in [0, 1); it is only called when Jitter is set.
func (p RetryPolicy) Delay(attempt int, rnd func() float64) time.Duration {
	d := p.InitialDelay
	if p.Backoff == BackoffExponential && attempt > 1 {
		f := float64(p.InitialDelay) * math.Pow(2, float64(attempt-1))
		if f >= float64(math.MaxInt64) {
			d = time.Duration(math.MaxInt64)
		} else {
			d = time.Duration(f)
		}
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter && d > 0 && rnd != nil {
		half := d / 2
		d = half + time.Duration(rnd()*float64(d-half))
	}
	return d
}

package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// retryJSON is the stored form of a run's retry policy (the retry column
// of both stores).
type retryJSON struct {
	MaxAttempts      int    `json:"max_attempts"`
	Backoff          string `json:"backoff,omitempty"`
	InitialDelayNS   int64  `json:"initial_delay_ns,omitempty"`
	MaxDelayNS       int64  `json:"max_delay_ns,omitempty"`
	Jitter           bool   `json:"jitter,omitempty"`
	NoRetryExitCodes []int  `json:"no_retry_exit_codes,omitempty"`
}

// EncodeRetry is the stored form of a run's retry policy and the exit
// codes that end it at once.
func EncodeRetry(p jobs.RetryPolicy, noRetry []int) (string, error) {
	b, err := json.Marshal(retryJSON{
		MaxAttempts: p.MaxAttempts, Backoff: string(p.Backoff),
		InitialDelayNS: int64(p.InitialDelay), MaxDelayNS: int64(p.MaxDelay),
		Jitter: p.Jitter, NoRetryExitCodes: noRetry,
	})
	return string(b), err
}

// decodedRetry is a decoded stored retry policy.
type decodedRetry struct {
	policy  jobs.RetryPolicy
	noRetry []int
}

// retryCache holds decoded policies by their stored text (at most
// retryCacheMax). The runs of a job share one text, and decoding it for
// every run read was a notable share of the engine's CPU in a burn-down on
// PostgreSQL.
var retryCache = struct {
	sync.RWMutex
	m map[string]decodedRetry
}{m: map[string]decodedRetry{}}

// retryCacheMax bounds retryCache: past it, texts are decoded each time.
const retryCacheMax = 4096

// DecodeRetry is the inverse of EncodeRetry. The exit codes are the
// caller's own copy.
func DecodeRetry(text string) (jobs.RetryPolicy, []int, error) {
	retryCache.RLock()
	d, ok := retryCache.m[text]
	retryCache.RUnlock()
	if ok {
		return d.policy, slices.Clone(d.noRetry), nil
	}
	var rj retryJSON
	if err := json.Unmarshal([]byte(text), &rj); err != nil {
		return jobs.RetryPolicy{}, nil, fmt.Errorf("retry policy: %w", err)
	}
	d = decodedRetry{
		policy: jobs.RetryPolicy{
			MaxAttempts: rj.MaxAttempts, Backoff: jobs.Backoff(rj.Backoff),
			InitialDelay: time.Duration(rj.InitialDelayNS), MaxDelay: time.Duration(rj.MaxDelayNS), Jitter: rj.Jitter,
		},
		noRetry: rj.NoRetryExitCodes,
	}
	retryCache.Lock()
	if len(retryCache.m) < retryCacheMax {
		retryCache.m[text] = d
	}
	retryCache.Unlock()
	return d.policy, slices.Clone(d.noRetry), nil
}

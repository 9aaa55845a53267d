package store

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

func TestRetryRoundTrip(t *testing.T) {
	p := jobs.RetryPolicy{MaxAttempts: 5, Backoff: jobs.BackoffExponential, InitialDelay: 2 * time.Second,
		MaxDelay: time.Minute, Jitter: true}
	text, err := EncodeRetry(p, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // decoded, then from the cache
		got, noRetry, err := DecodeRetry(text)
		if err != nil {
			t.Fatal(err)
		}
		if got != p || !reflect.DeepEqual(noRetry, []int{2, 3}) {
			t.Fatalf("read %d: got %+v %v, want %+v [2 3]", i, got, noRetry, p)
		}
		noRetry[0] = 99 // each caller has its own copy
	}
	if _, _, err := DecodeRetry(`{"max_attempts": "x"}`); err == nil {
		t.Fatal("a bad policy decoded without error")
	}
}

// TestRetryCacheBounded: past retryCacheMax texts, policies are still
// decoded right, and the cache does not grow.
func TestRetryCacheBounded(t *testing.T) {
	for i := range retryCacheMax + 100 {
		text := fmt.Sprintf(`{"max_attempts": %d}`, i+1)
		p, _, err := DecodeRetry(text)
		if err != nil || p.MaxAttempts != i+1 {
			t.Fatalf("%s: got %+v, %v", text, p, err)
		}
	}
	retryCache.RLock()
	n := len(retryCache.m)
	retryCache.RUnlock()
	if n > retryCacheMax {
		t.Fatalf("cache holds %d policies, more than %d", n, retryCacheMax)
	}
}

package control

import (
	"context"
	"net/http"
	"strconv"
)

// slots bounds the requests of one kind served at once: a request that
// finds every slot taken is refused at once (429 busy), never queued, so
// that waiting requests cannot hold the connections that short requests
// need.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

// take takes a slot if one is free; the caller gives it back with give.
func (s slots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// wait takes a slot, waiting for one until ctx is done; false when it
// is done first.
func (s slots) wait(ctx context.Context) bool {
	select {
	case s <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s slots) give() { <-s }

// busyRetryAfter is the Retry-After of a 429 busy reply, in seconds.
const busyRetryAfter = 1

// writeBusy refuses a request for want of a slot: 429 with the code busy
// and a Retry-After, which the Client honours by asking again.
func writeBusy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(busyRetryAfter))
	writeError(w, http.StatusTooManyRequests, CodeBusy, msg)
}

package scheduler

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// An attempt token lets the process of one attempt act on its own run
// and no other: a command job gets it as SCHEDULERD_ATTEMPT_TOKEN, and the
// control socket takes `progress` only with it (and `cancel` of the run
// itself from a job whose user may not otherwise use the socket). It is
// an HMAC of the run id and attempt number under a key made at every
// process start, so it needs no storage and dies with the process whose
// attempts it names.

// newTokenKey fills key with random bytes.
func newTokenKey(key *[32]byte) error {
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("attempt token key: %w", err)
	}
	return nil
}

// AttemptToken returns the token of attempt number attempt of run runID.
func (s *Scheduler) AttemptToken(runID string, attempt int) string {
	return hex.EncodeToString(s.attemptMAC(runID, attempt))
}

// CheckAttemptToken reports whether token is that of attempt number
// attempt of run runID, in constant time.
func (s *Scheduler) CheckAttemptToken(runID string, attempt int, token string) bool {
	got, err := hex.DecodeString(token)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	return hmac.Equal(got, s.attemptMAC(runID, attempt))
}

func (s *Scheduler) attemptMAC(runID string, attempt int) []byte {
	m := hmac.New(sha256.New, s.tokenKey[:])
	m.Write([]byte(runID))
	m.Write([]byte{0})
	m.Write([]byte(strconv.Itoa(attempt)))
	return m.Sum(nil)
}

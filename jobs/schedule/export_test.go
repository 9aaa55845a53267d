package schedule

import "time"

// MatchesWall reports whether the wall clock of t, in the schedule's
// location, matches its calendar fields.
func MatchesWall(s *Schedule, t time.Time) bool {
	_, off := t.In(s.loc).Zone()
	w := t.Unix() + int64(off)
	found, ok := s.nextWall(w, w)
	return ok && found == w
}

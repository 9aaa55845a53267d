package sqlite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// The statements of a claim; the writer keeps sqlClaimCandidates and
// sqlClaimRuns prepared (preparedQueries).
const (
	sqlDue = `status IN ` + sqlWaiting + ` AND not_before <= ? AND (not_after IS NULL OR not_after > ?)`
	// sqlClaimCandidates reads a job's first due runs in start order, a
	// range of the runs_claim index.
	sqlClaimCandidates = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_claim
		WHERE job = ? AND ` + sqlDue + ` ORDER BY not_before, created_at, id LIMIT ?`
	// sqlClaimRuns claims the runs whose ids are in a JSON array, in one
	// statement whatever their number. It writes only the runs: the
	// attempt's row, which also stands for the claim's event (claimed_from:
	// the status the claim took the run from), is written when the attempt
	// ends.
	sqlClaimRuns = `UPDATE runs SET status = 'running', attempt = attempt + 1, node = ?,
		incarnation = ?, started_at = ?, updated_at = ?, reason = 'claimed', error = '', exit_code = NULL,
		cancel_requested = 0, progress = 0, progress_message = '', claimed_from = status
		WHERE id IN (SELECT value FROM json_each(?))`
)

// RunsClaim atomically starts up to Limit due runs; see store.Store.
//
// The first due runs of all jobs are read in start order (not_before,
// created_at, id) from the runs_due index, and those of declared jobs with
// room are taken: the work is what the claim takes, however many jobs are
// declared. When the first store.DueScan(Limit) due runs do not give Limit
// runs (runs of other jobs, or of jobs at their limit, come first), the
// claim reads each declared job's own due runs from the runs_claim index
// instead, at most as many as the job can still take, and merges them: a
// backlog of one job never hides another job's due runs.
func (s *Store) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if p.Limit <= 0 || p.Jobs.Len() == 0 {
		return nil, nil
	}
	if p.Node == "" || p.Incarnation == "" {
		return nil, errors.New("claim runs: node and incarnation must be set")
	}
	at := now(p.Now).UnixMicro()
	scan := store.DueScan(p.Limit)

	// Most polls find nothing due: answer those with one read, without
	// taking the write lock.
	if !p.Due {
		due, err := dueAmongHeads(ctx, s.read(), at, scan, p.Jobs)
		if err != nil {
			return nil, fail("claim runs", err)
		}
		if !due {
			return nil, nil
		}
	}

	limited := p.Jobs.Limited()
	var claimed []*jobs.Run
	err := s.write(ctx, "claim runs", func(c conn) error {
		claimed = nil
		// The running runs of a SQLite store are this node's: a few.
		running := map[string]int{}
		if limited {
			var err error
			if running, err = runningCounts(ctx, c); err != nil {
				return err
			}
		}
		room := func(job string) int {
			limit, ok := p.Jobs.Limit(job)
			switch {
			case !ok:
				return 0
			case limit > 0:
				return limit - running[job]
			}
			return p.Limit
		}
		cands, full, err := claimHeads(ctx, c, at, scan, p.Limit, room)
		if err != nil {
			return err
		}
		if len(cands) < p.Limit && full {
			if cands, err = claimPerJob(ctx, c, at, p.Limit, p.Jobs, room); err != nil {
				return err
			}
		}
		claimed, err = claimRuns(ctx, c, cands, p, time.UnixMicro(at).UTC())
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// sqlDueHeads reads the jobs of the first $3 due runs in start order.
const sqlDueHeads = `SELECT job FROM runs INDEXED BY runs_due WHERE ` + sqlDue + `
	ORDER BY not_before, created_at, id LIMIT ?`

// dueAmongHeads reports whether a run of jobs is among the first scan due
// runs in start order, or scan due runs are there (then a run of jobs may
// come after them). It stops reading at the first run of jobs: under a
// backlog that is the first row, where reading all scan rows showed in a
// burn-down's CPU profile.
func dueAmongHeads(ctx context.Context, c conn, at int64, scan int, jobs store.JobLimits) (bool, error) {
	rows, err := c.query(ctx, sqlDueHeads, at, at, scan)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var job string
		if err := rows.Scan(&job); err != nil {
			return false, err
		}
		if _, ok := jobs.Limit(job); ok {
			return true, nil
		}
		read++
	}
	return read >= scan, rows.Err()
}

// claimHeads reads the first scan due runs in start order and returns the
// first limit of them that room allows (room(job) says how many runs of
// job may start), and whether scan runs were read.
func claimHeads(ctx context.Context, c conn, at int64, scan, limit int, room func(string) int) ([]*jobs.Run, bool, error) {
	rows, err := c.query(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_due WHERE `+sqlDue+`
		ORDER BY not_before, created_at, id LIMIT ?`, at, at, scan)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var cands []*jobs.Run
	taken := map[string]int{}
	read := 0
	for len(cands) < limit && rows.Next() {
		read++
		r, err := scanRun(rows)
		if err != nil {
			return nil, false, err
		}
		if taken[r.Job] < room(r.Job) {
			taken[r.Job]++
			cands = append(cands, r)
		}
	}
	return cands, read == scan, rows.Err()
}

// claimPerJob reads each declared job's first due runs, as many as room
// allows, from the runs_claim index, and returns the first limit of all of
// them in start order.
func claimPerJob(ctx context.Context, c conn, at int64, limit int, declared store.JobLimits,
	room func(string) int) ([]*jobs.Run, error) {
	dueJobs, err := queryStrings(ctx, c, `SELECT j.value FROM json_each(?) j WHERE EXISTS (
		SELECT 1 FROM runs INDEXED BY runs_claim WHERE job = j.value AND `+sqlDue+`)`, jsonStrings(declared.Names()), at, at)
	if err != nil {
		return nil, err
	}
	var cands []*jobs.Run
	for _, job := range dueJobs {
		n := min(limit, room(job))
		if n <= 0 {
			continue
		}
		runs, err := scanRuns(c.query(ctx, sqlClaimCandidates, job, at, at, n))
		if err != nil {
			return nil, err
		}
		cands = append(cands, runs...)
	}
	slices.SortFunc(cands, func(a, b *jobs.Run) int {
		return cmp.Or(a.NotBefore.Compare(b.NotBefore), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return cands[:min(len(cands), limit)], nil
}

// sqlRunningCounts counts the running runs of each job, from the index of
// the running runs.
const sqlRunningCounts = `SELECT job, COUNT(*) FROM runs INDEXED BY runs_node_running
		WHERE status = 'running' GROUP BY job`

// runningCounts counts the running runs of each job.
func runningCounts(ctx context.Context, c conn) (map[string]int, error) {
	counts := map[string]int{}
	rows, err := c.query(ctx, sqlRunningCounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var job string
		var n int
		if err := rows.Scan(&job, &n); err != nil {
			return nil, err
		}
		counts[job] = n
	}
	return counts, rows.Err()
}

// claimRuns starts the next attempt of each of runs, waiting runs that the
// write transaction read, and returns them as they are then stored, in one
// statement for any number of runs.
func claimRuns(ctx context.Context, c conn, runs []*jobs.Run, p store.ClaimParams, at time.Time) ([]*jobs.Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(runs))
	claimed := make([]*jobs.Run, len(runs))
	for i, cur := range runs {
		if err := jobs.ValidateTransition(cur.Status, jobs.StatusRunning); err != nil {
			return nil, fmt.Errorf("run %s: %w", cur.ID, err)
		}
		ids[i] = cur.ID
		r := *cur
		r.Status, r.Attempt, r.Node, r.Incarnation = jobs.StatusRunning, cur.Attempt+1, p.Node, p.Incarnation
		r.StartedAt, r.Reason, r.Error, r.ExitCode = at, jobs.ReasonClaimed, "", nil
		r.CancelRequested, r.Progress, r.ProgressMessage, r.ClaimedFrom = false, 0, "", cur.Status
		claimed[i] = &r
	}
	if _, err := c.exec(ctx, sqlClaimRuns, p.Node, p.Incarnation, at.UnixMicro(), at.UnixMicro(), jsonStrings(ids)); err != nil {
		return nil, err
	}
	return claimed, nil
}

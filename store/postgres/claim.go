package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// claimLockTimeout bounds the wait for the locks of limited jobs.
const claimLockTimeout = "5s"

// jobLockKey is the advisory lock key of a job's claims (with lockJobs).
func jobLockKey(job string) int32 {
	h := fnv.New32a()
	h.Write([]byte(job))
	return int32(h.Sum32())
}

// sqlClaimAt is the clock of a claim ($2), and sqlClaimDue says that a run
// is due at it. The statements read a job's due runs as a range of the
// runs_claim index, (job, not_before <= now) in start order, so that a
// claim reads only the runs it takes: neither the runs waiting for a later
// time nor the history.
const (
	sqlClaimAt = `COALESCE($2::timestamptz, now())`
	// sqlDueWindow: a waiting run's window holds the claim's time.
	sqlDueWindow = `not_before <= ` + sqlClaimAt + ` AND (not_after IS NULL OR not_after > ` + sqlClaimAt + `)`
	sqlClaimDue  = `status IN ` + sqlWaiting + ` AND ` + sqlDueWindow
	// sqlNamedJobs is the clause of runs_active's condition, true of every
	// run, that the lock of jobs' active runs states and a read of one
	// job's due runs does not imply: such a read cannot use runs_active,
	// whatever the statistics say.
	sqlNamedJobs = `job <> ''`
	// sqlWaitingOfAll is runs_due's condition, which the reads of all
	// jobs' first waiting runs state: they can use no other index on
	// waiting runs, and no other read can use runs_due.
	sqlWaitingOfAll = `(status || '') IN ` + sqlWaiting
	// sqlDueOfAll is sqlClaimDue for those reads.
	sqlDueOfAll = sqlWaitingOfAll + ` AND ` + sqlDueWindow
	// sqlPickedDue is sqlClaimDue that no index serves (see sqlClaim): the
	// status as COALESCE(status, ''), which is the status (it is NOT NULL)
	// but neither the status of the other indexes' conditions nor runs_due's
	// status || ''. (As status || '', the candidates of a round were looked
	// up through runs_due.)
	sqlPickedDue = `COALESCE(status, '') IN ` + sqlWaiting + ` AND ` + sqlDueWindow
)

// sqlDueJobs returns those of the jobs $1 that have a due run: per job, the
// first due run in the order of the runs_claim index (ORDER BY and LIMIT 1
// keep the planner on that index, whatever its estimates).
const sqlDueJobs = `SELECT j FROM unnest($1::text[]) AS j CROSS JOIN LATERAL (
		SELECT 1 FROM runs WHERE job = j AND ` + sqlClaimDue + `
		ORDER BY not_before, created_at, id LIMIT 1) d`

// sqlClaim and sqlClaimOne claim up to $3 due runs of the jobs $1 whose
// concurrency limits are $4 (0: none), at most $7 of each, for node $5 and
// incarnation $6, and return them, each with the status it was claimed
// from in claimed_from.
// room: how many runs each job may still start; picked: the runs to claim;
// then the claim, set-based, which writes only the runs (claimed_from, the
// status the run is claimed from, as SET reads the row before the update:
// the attempt's row and the claim's event are written when the attempt
// ends). The claim finds the picked runs by the row versions it locked
// (ctid), as an array: joined to picked, whose size the planner cannot
// know, they could be hashed and the whole table scanned; looked up by id,
// each cost a probe of the primary key. A picked row is locked until the
// claim ends, so its version is the one the update finds; one that a
// transaction committed after the claim's snapshot, which FOR UPDATE locks
// in its newest version, is one this snapshot does not see: it is not
// claimed this time. A limited job's running runs are counted in the
// statement: the caller holds the job's advisory lock.
//
// sqlClaim, for several jobs: cand reads room.n of each job's due runs from
// the index without locks; picked looks them up by id, locks the first $3
// in start order that no one else holds (FOR UPDATE SKIP LOCKED, which
// checks each run again once it is locked), and locks no more than it
// claims. picked checks the status in a form that no index condition has
// (sqlPickedDue): with the status as such, a planner whose statistics
// predate a round of 10,000 runs fired ahead of one tick read every waiting
// run through the status indexes (runs_active and runs_status_created) and
// matched each against the candidates' ids, instead of a probe of the
// primary key per candidate. (runs_active's condition, with sqlNamedJobs,
// keeps it out of that choice; runs_status_created, whose first column is
// the status, is still in it.) Claimers of the same jobs at the same moment
// read the same runs, though, and all but one get few of them or none.
//
// sqlClaimOne, for one job: picked locks the job's due runs as it reads
// them, skipping those another claim holds, so that claimers of one
// backlog at the same moment (nodes of a cluster) each take a full batch.
// Over several jobs this would lock up to room.n runs of each job to claim
// $3 of them all.
const (
	sqlClaimRoom = `room AS (
		SELECT w.job, LEAST(CASE WHEN w.lim > 0
			THEN w.lim - (SELECT count(*) FROM runs WHERE job = w.job AND status = 'running')
			ELSE $3 END, w.cap, $3) AS n
		FROM unnest($1::text[], $4::int4[], $7::int4[]) AS w(job, lim, cap)
	)`
	sqlClaimUpdate = `r AS (
		UPDATE runs SET status = 'running', attempt = attempt + 1, node = $5, incarnation = $6,
			started_at = ` + sqlClaimAt + `, updated_at = ` + sqlClaimAt + `, reason = 'claimed', error = '',
			exit_code = NULL, cancel_requested = false, progress = 0, progress_message = '',
			claimed_from = status
		WHERE ctid = ANY(ARRAY(SELECT ctid FROM picked))
		RETURNING ` + runColumns + `
	)
	SELECT * FROM r ORDER BY not_before, created_at, id`
	sqlClaim = `WITH ` + sqlClaimRoom + `, cand AS (
		SELECT c.id FROM room CROSS JOIN LATERAL (
			SELECT id FROM runs WHERE job = room.job AND ` + sqlClaimDue + `
			ORDER BY not_before, created_at, id LIMIT GREATEST(room.n, 0)
		) c
	), picked AS (
		SELECT ctid FROM runs
		WHERE id = ANY(ARRAY(SELECT id FROM cand)) AND ` + sqlPickedDue + `
		ORDER BY not_before, created_at, id LIMIT $3
		FOR UPDATE SKIP LOCKED
	), ` + sqlClaimUpdate
	sqlClaimOne = `WITH ` + sqlClaimRoom + `, picked AS (
		SELECT c.ctid FROM room CROSS JOIN LATERAL (
			SELECT ctid FROM runs WHERE job = room.job AND ` + sqlClaimDue + `
			ORDER BY not_before, created_at, id LIMIT GREATEST(room.n, 0)
			FOR UPDATE SKIP LOCKED
		) c
	), ` + sqlClaimUpdate
)

// sqlDueHeads reads the first $1 due runs in start order (a range of the
// runs_due index) as stretches of consecutive runs of one job, in order:
// a job, and how many of its runs come before another job's.
const sqlDueHeads = `SELECT job, count(*) FROM (
		SELECT job, k, k - row_number() OVER (PARTITION BY job ORDER BY k) AS stretch FROM (
			SELECT job, row_number() OVER (ORDER BY not_before, created_at, id) AS k FROM (
				SELECT job, not_before, created_at, id FROM runs WHERE ` + sqlDueOfAll + `
				ORDER BY not_before, created_at, id LIMIT $1) d) h) s
	GROUP BY job, stretch ORDER BY min(k)`

// dueHead is a stretch of the first due runs that are one job's.
type dueHead struct {
	job string
	n   int
}

// RunsClaim atomically starts up to Limit due runs; see store.Store.
//
// A claim first reads which jobs the first store.DueScan(Limit) due runs
// of all jobs belong to, in start order (sqlDueHeads, outside any
// transaction: an idle poll ends there). It then claims those of the
// declared jobs among them, at most as many of each as it saw
// (sqlClaim): the work is what the claim takes, however many jobs are
// declared. When the scan was full and the claim took fewer than Limit
// runs (runs of other jobs, or of jobs at their limit, came first), a
// second claim looks at each declared job's own due runs (sqlDueJobs, then
// sqlClaim over the due ones): a backlog of one job never hides another
// job's due runs.
//
// A claim with Due set and at most DueScan(Limit) jobs, or of one job
// without a concurrency limit, skips the first read and claims from those
// jobs' due runs at once.
//
// FOR UPDATE SKIP LOCKED lets nodes claim the same jobs at once without
// waiting for each other or taking a run twice. When none of the jobs
// claimed has a concurrency limit, a claim is that one statement, outside
// any transaction.
//
// SKIP LOCKED cannot keep a concurrency limit, though: two claimers would
// each count the job's running runs before the other's claim commits. So
// when a limited job is claimed, one transaction takes an advisory lock per
// limited job (in the order of the lock keys, so that claimers never
// deadlock) and claims after that, with a snapshot that sees every claim
// committed before it got the locks: claims of one limited job are
// serialized across the cluster, while claims of unlimited jobs never
// wait. A run leaving running needs no lock; it only makes the count
// smaller.
//
// Each job's due runs are read in start order (not_before, created_at, id)
// from the runs_claim index, at most as many as the job can still take, and
// the first Limit of them in that order are claimed.
func (s *Store) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if p.Limit <= 0 || p.Jobs.Len() == 0 {
		return nil, nil
	}
	if p.Node == "" || p.Incarnation == "" {
		return nil, errors.New("claim runs: node and incarnation must be set")
	}
	scan := store.DueScan(p.Limit)
	if (p.Due && p.Jobs.Len() <= scan) || oneUnlimited(p.Jobs) {
		// The caller knows these jobs to have due runs (ticks it fired
		// ahead): one index probe per job costs less than reading which
		// jobs the first due runs belong to. A claim of one job without a
		// concurrency limit is one statement that reads only that job's
		// due runs, whether it has any or not: the first read would add a
		// statement to learn which of the first due runs are its (a cost
		// seen in the server's busy time in a burn-down of one job's
		// runs).
		return s.claim(ctx, p.Jobs.Names(), nil, p)
	}
	heads, seen, err := dueHeads(ctx, s.read(), scan, p.Now)
	if err != nil {
		return nil, fail("claim runs", err)
	}
	// The first due runs of the declared jobs, in start order, until they
	// can give Limit runs: a claim counts and locks only the jobs it takes,
	// and takes no run of a job past one of another job that comes first.
	var names []string
	caps, used := map[string]int{}, map[string]int{}
	more, room := false, 0
	for _, h := range heads {
		limit, ok := p.Jobs.Limit(h.job)
		switch {
		case !ok:
			continue
		case room >= p.Limit:
			more = true
			continue
		}
		if caps[h.job] == 0 {
			names = append(names, h.job)
		}
		n := min(h.n, p.Limit-room)
		caps[h.job] += n
		if limit > 0 {
			n = min(n, max(0, limit-used[h.job]))
			used[h.job] += n
		}
		room += n
	}
	var claimed []*jobs.Run
	if len(names) > 0 {
		slices.Sort(names)
		if claimed, err = s.claim(ctx, names, caps, p); err != nil {
			return nil, err
		}
	}
	if len(claimed) >= p.Limit || (seen < scan && !more) {
		return claimed, nil
	}

	// The first due runs were not this claim's to take: look at each
	// declared job.
	rows, err := s.read().query(ctx, sqlDueJobs, p.Jobs.Names(), ts(p.Now))
	dueJobs, err := collectStrings(rows, err)
	if err != nil {
		return claimed, fail("claim runs", err)
	}
	if len(dueJobs) == 0 {
		return claimed, nil
	}
	rest := p
	rest.Limit -= len(claimed)
	others, err := s.claim(ctx, dueJobs, nil, rest)
	if err != nil {
		return claimed, err
	}
	return append(claimed, others...), nil
}

// oneUnlimited reports whether jobs is one job without a concurrency
// limit.
func oneUnlimited(jobs store.JobLimits) bool {
	return jobs.Len() == 1 && !jobs.Limited()
}

// dueHeads returns the jobs of the first scan due runs in start order,
// with how many of them are each job's, and how many due runs it read.
func dueHeads(ctx context.Context, c *conn, scan int, now time.Time) ([]dueHead, int, error) {
	rows, err := c.query(ctx, sqlDueHeads, scan, ts(now))
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var heads []dueHead
	seen := 0
	for rows.Next() {
		var h dueHead
		if err := rows.Scan(&h.job, &h.n); err != nil {
			return nil, 0, err
		}
		heads = append(heads, h)
		seen += h.n
	}
	return heads, seen, rows.Err()
}

// claim runs sqlClaim for the named jobs (sorted), at most caps[job] runs
// of a job when caps has it: in a transaction that first takes the
// advisory locks of the limited ones, or on its own when none is limited.
func (s *Store) claim(ctx context.Context, names []string, caps map[string]int, p store.ClaimParams) ([]*jobs.Run, error) {
	limits := make([]int32, len(names))
	capOf := make([]int32, len(names))
	var keys []int32
	for i, job := range names {
		if limit, _ := p.Jobs.Limit(job); limit > 0 {
			limits[i] = int32(limit)
			keys = append(keys, jobLockKey(job))
		}
		capOf[i] = int32(p.Limit)
		if n, ok := caps[job]; ok {
			capOf[i] = int32(n)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)

	// The statement takes only waiting runs and, outside a transaction,
	// has committed by the time its rows are read: the state machine has
	// its say first.
	for _, from := range []jobs.Status{jobs.StatusPending, jobs.StatusRetrying} {
		if err := jobs.ValidateTransition(from, jobs.StatusRunning); err != nil {
			return nil, fmt.Errorf("claim runs: %w", err)
		}
	}
	var claimed []*jobs.Run
	run := func(c *conn) error {
		claimed = nil
		if len(keys) > 0 {
			// A claimer that stalls while it holds a job's lock must not
			// stall every node's claims: give up this poll instead.
			if _, err := c.exec(ctx, `SET LOCAL lock_timeout = '`+claimLockTimeout+`'`); err != nil {
				return err
			}
			if _, err := c.exec(ctx, `SELECT count(pg_advisory_xact_lock($1, k)) FROM unnest($2::int4[]) AS k`,
				lockJobs, keys); err != nil {
				return err
			}
		}
		q := sqlClaim
		if len(names) == 1 {
			q = sqlClaimOne
		}
		rows, err := c.query(ctx, q, names, ts(p.Now), p.Limit, limits, p.Node, p.Incarnation, capOf)
		if err != nil {
			return err
		}
		defer rows.Close()
		sc := newRunScanner()
		for rows.Next() {
			run, err := sc.scan(rows)
			if err != nil {
				return err
			}
			// The statement only takes waiting runs; the state machine
			// still has the last word.
			if err := jobs.ValidateTransition(run.ClaimedFrom, jobs.StatusRunning); err != nil {
				return fmt.Errorf("run %s: %w", run.ID, err)
			}
			claimed = append(claimed, run)
		}
		return rows.Err()
	}
	var err error
	if len(keys) > 0 {
		err = s.write(ctx, "claim runs", run)
	} else {
		err = s.writeOne(ctx, "claim runs", run)
	}
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func openTest(t *testing.T, path string, lock bool) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{Path: path, Lock: lock})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, filepath.Join(t.TempDir(), "state", "schedulerd.db"), false)
	})
}

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	first := openTest(t, path, true)
	defer first.Close()

	_, err := Open(t.Context(), Options{Path: path, Lock: true})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("database %s is in use by another schedulerd (pid %d)", path, os.Getpid())
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	// An offline command does not take the lock.
	offline := openTest(t, path, false)
	if err := offline.Close(); err != nil {
		t.Fatal(err)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openTest(t, path, true)
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	s := openTest(t, path, false)
	applied, err := s.Migrate(t.Context())
	if err != nil || len(applied) != 0 {
		t.Fatalf("Migrate on a migrated database = %v, %v", applied, err)
	}
	s.Close()
	s = openTest(t, path, false)
	defer s.Close()
	var versions int
	if err := s.reader.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	want, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(want) {
		t.Fatalf("%d schema_migrations rows, want %d", versions, len(want))
	}
}

func TestMigrationsFresh(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	var mode string
	if err := s.writer.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := s.reader.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1", fk, err)
	}
}

func TestMigrationSetErrors(t *testing.T) {
	good := "CREATE TABLE t1 (x INTEGER);"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"gap", map[string]string{"migrations/001_a.up.sql": good, "migrations/003_c.up.sql": good}, "without gaps"},
		{"duplicate", map[string]string{"migrations/001_a.up.sql": good, "migrations/001_b.up.sql": good}, "same number"},
		{"not from one", map[string]string{"migrations/002_b.up.sql": good}, "without gaps"},
		{"bad name", map[string]string{"migrations/001_a.up.sql": good, "migrations/two.sql": good}, "name must look like"},
		{"empty", map[string]string{"migrations/README": ""}, "name must look like"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			withMigrations(t, fsys)
			_, err := Open(t.Context(), Options{Path: filepath.Join(t.TempDir(), "schedulerd.db")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// withMigrations replaces the migration source for one test.
func withMigrations(t *testing.T, fsys fstest.MapFS) {
	old := migrationSource
	migrationSource = fsys
	t.Cleanup(func() { migrationSource = old })
}

func TestMigrationFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	withMigrations(t, fstest.MapFS{
		"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x INTEGER);")},
		"migrations/002_b.up.sql": {Data: []byte("CREATE TABLE t2 (x INTEGER); SELECT no_such_function();")},
	})
	_, err := Open(t.Context(), Options{Path: path})
	if err == nil || !strings.Contains(err.Error(), "002_b.up.sql") {
		t.Fatalf("Open with a broken migration: %v", err)
	}
	withMigrations(t, fstest.MapFS{
		"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x INTEGER);")},
		"migrations/002_b.up.sql": {Data: []byte("CREATE TABLE t2 (x INTEGER);")},
	})
	s := openTest(t, path, false)
	defer s.Close()
	applied, err := s.Migrate(t.Context())
	if err != nil || len(applied) != 0 {
		t.Fatalf("Migrate = %v, %v", applied, err)
	}
	// A newer database than the program is refused.
	withMigrations(t, fstest.MapFS{"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x INTEGER);")}})
	if _, err := s.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Migrate with fewer migrations than applied: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openTest(t, path, true)
	res, err := s.ScheduleFire(ctx, store.FireParams{Job: "backup", Cursor: at, Overlap: jobs.OverlapAllow, Now: at,
		Runs: []store.RunInsertParams{{Job: "backup", Trigger: jobs.TriggerSchedule, ScheduledAt: at, Retry: jobs.DefaultRetry}}})
	if err != nil || len(res.Created) != 1 {
		t.Fatalf("ScheduleFire = %+v, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path, true)
	defer s.Close()
	run, err := s.RunGet(ctx, res.Created[0].ID)
	if err != nil || run.Retry != jobs.DefaultRetry || !run.ScheduledAt.Equal(at) {
		t.Fatalf("run after reopen: %+v, %v", run, err)
	}
	cursors, err := s.ScheduleCursors(ctx, []string{"backup"})
	if err != nil || !cursors["backup"].Last.Equal(at) {
		t.Fatalf("cursor after reopen: %+v, %v", cursors, err)
	}
	again, err := s.ScheduleFire(ctx, store.FireParams{Job: "backup", Expect: at, Cursor: at, Now: at,
		Runs: []store.RunInsertParams{{Trigger: jobs.TriggerSchedule, ScheduledAt: at}}})
	if err != nil || again.Duplicates != 1 {
		t.Fatalf("refire after reopen: %+v, %v", again, err)
	}
}

func TestOpenCreatesDirectory(t *testing.T) {
	// Characters that mean something in a SQLite URI stay part of the name.
	dir := filepath.Join(t.TempDir(), "state dir", "a%20b?c#d")
	path := filepath.Join(dir, "schedulerd.db")
	s := openTest(t, path, false)
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&^0o750 != 0 {
		t.Fatalf("state directory: %v, %v", fi.Mode(), err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
}

func TestStatementsIdle(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	before := s.Statements()
	runs, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"a": 1}), Limit: 4})
	if err != nil || len(runs) != 0 {
		t.Fatalf("RunsClaim = %v, %v", runs, err)
	}
	if _, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: "n"}); err != nil {
		t.Fatal(err)
	}
	// An idle poll is one read each, without the write lock.
	if got := s.Statements() - before; got != 2 {
		t.Fatalf("an idle claim and expiry ran %d statements, want 2", got)
	}
}

func TestInterpretError(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	err := s.write(context.Background(), "test", func(c conn) error {
		for range 2 {
			if _, err := c.exec(context.Background(), `INSERT INTO cursors (job, last, updated_at) VALUES ('a', 1, 1)`); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("unique violation: %v", err)
	}
	_, err = s.RunGet(context.Background(), "none")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
}

// BenchmarkRunTransitionMany: claim and complete 1,000 runs per
// iteration, the completions one by one or in one batch.
func BenchmarkRunTransitionMany(b *testing.B) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), Options{Path: filepath.Join(b.TempDir(), "schedulerd.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchClaimComplete(b, s, 1000, batch)
		})
	}
}

// BenchmarkScheduleFireMany: one tick of 10,000 cron jobs per iteration,
// fired one by one or in batches of 16 (what one transaction costs beyond
// its ticks shows against 84), 84 (the half of a second of the spread lag
// benchmark that the engine fires first), 167 (the whole second) or 500
// (the engine's largest batch).
func BenchmarkScheduleFireMany(b *testing.B) {
	for _, batch := range []int{0, 16, 84, 167, 500} {
		name := "single"
		if batch > 0 {
			name = fmt.Sprintf("batch=%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), Options{Path: filepath.Join(b.TempDir(), "schedulerd.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchFires(b, s, 10000, batch)
		})
	}
}

// openCheckpointing opens a store whose checkpoint loop runs every
// millisecond and reports each checkpoint on the returned channel.
func openCheckpointing(t *testing.T, path string, walLimit int64) (*Store, <-chan checkpointResult) {
	t.Helper()
	results := make(chan checkpointResult)
	s, err := Open(t.Context(), Options{Path: path, CheckpointInterval: time.Millisecond, checkpointed: results, walLimit: walLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, results
}

// checkpointOf waits, at most 30 s, for the first checkpoint that covers
// every commit so far.
func checkpointOf(t *testing.T, s *Store, results <-chan checkpointResult) checkpointResult {
	t.Helper()
	committed := s.commits.Load()
	timeout := time.After(30 * time.Second)
	for {
		var res checkpointResult
		select {
		case res = <-results:
		case <-timeout:
			t.Fatalf("no checkpoint covered the %d commits so far in 30 s", committed)
		}
		if res.err != nil {
			t.Fatalf("checkpoint %s: %v", res.mode, res.err)
		}
		if res.commits == committed {
			return res
		}
	}
}

// insertPayloadRuns inserts batches of 400 runs of job j, each with a
// payload of 1,000 bytes, one transaction a batch.
func insertPayloadRuns(t *testing.T, s *Store, batches int) {
	t.Helper()
	for range batches {
		ps := make([]store.RunInsertParams, 400)
		for i := range ps {
			ps[i] = store.RunInsertParams{Job: "j", Trigger: jobs.TriggerManual, Payload: strings.Repeat("x", 1000),
				Retry: jobs.RetryPolicy{MaxAttempts: 1}}
		}
		if _, err := s.RunInsertMany(t.Context(), ps); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointsOutsideCommits: the writer never checkpoints; the
// background loop folds every committed frame of the WAL into the database
// file after commits, and neither works nor wakes while nothing is
// committed. After Close the WAL is gone and the data is in the database
// file.
func TestCheckpointsOutsideCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	s, results := openCheckpointing(t, path, 0)
	var auto int
	if err := s.writer.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, %v; want 0", auto, err)
	}

	// More than the 1,000 pages at which a writer would checkpoint.
	insertPayloadRuns(t, s, 10)
	if res := checkpointOf(t, s, results); res.mode != "PASSIVE" || res.copied != res.log {
		t.Fatalf("checkpoint %+v; want a passive one that copied every frame", res)
	}
	// Nothing committed since: the loop has nothing to do, and sleeps
	// (50 intervals).
	turns := s.ckptTurns.Load()
	select {
	case res := <-results:
		t.Fatalf("checkpoint with no commit since the last one: %+v", res)
	case <-time.After(50 * time.Millisecond):
	}
	if n := s.ckptTurns.Load() - turns; n > 1 {
		t.Fatalf("the checkpoint loop woke %d times in 50 intervals with nothing committed; want at most once", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("WAL after Close: %v", err)
	}
	s = openTest(t, path, false)
	defer s.Close()
	runs, err := s.RunsList(t.Context(), store.RunFilter{Job: "j", Limit: 10000})
	if err != nil || len(runs) != 4000 {
		t.Fatalf("after reopening: %d runs, %v; want 4000", len(runs), err)
	}
}

// TestCheckpointTruncatesALargeWAL: past the WAL limit, the checkpoint waits
// for the writer and truncates the WAL to nothing.
func TestCheckpointTruncatesALargeWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	s, results := openCheckpointing(t, path, 1)
	if _, err := s.RunInsert(t.Context(), store.RunInsertParams{Job: "j", Trigger: jobs.TriggerManual,
		Retry: jobs.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	if res := checkpointOf(t, s, results); res.mode != "TRUNCATE" {
		t.Fatalf("checkpoint mode %s with the WAL past the limit, want TRUNCATE", res.mode)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("WAL of %d bytes after a truncating checkpoint, want empty", fi.Size())
	}
}

// TestWALStartsAfreshAfterCheckpoint: once a checkpoint has copied every
// frame, the next transaction starts the WAL again from an empty file, so
// its frames are appended rather than written over the old ones (which
// cost several times more here: a burst after a quiet spell was slower
// than the first). The WAL holds that transaction's frames only.
func TestWALStartsAfreshAfterCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	s, results := openCheckpointing(t, path, 0)
	insertPayloadRuns(t, s, 5)
	if res := checkpointOf(t, s, results); res.copied != res.log {
		t.Fatalf("checkpoint %+v; want every frame copied", res)
	}
	before, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunInsert(t.Context(), store.RunInsertParams{Job: "j", Trigger: jobs.TriggerManual,
		Retry: jobs.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// One small run: a few pages of 4 KiB and their frame headers.
	if after.Size() >= before.Size() || after.Size() > 256<<10 {
		t.Fatalf("WAL of %d bytes after one small transaction (%d before it): the old file was written over, not started again",
			after.Size(), before.Size())
	}
}

// TestPlansOfListings: on a history of 30,000 runs, a listing by status
// reads an index, not the whole table: the rare statuses from the partial
// runs_status_created index (which leaves running and completed runs out),
// running runs from runs_node_running, completed runs from
// runs_created newest first, and a job's runs from runs_job_created; the
// running runs of each job (claim limits) are counted from
// runs_node_running.
func TestPlansOfListings(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	// 30,000 runs of 29 jobs: most completed, then every status, of every
	// job.
	if _, err := s.writer.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 30000)
		INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, finished_at, node, retry_json)
		SELECT printf('%012d', n), 'job-' || (n % 29),
			CASE n % 1000 WHEN 1 THEN 'pending' WHEN 2 THEN 'running' WHEN 3 THEN 'retrying'
				WHEN 4 THEN 'dead_letter' WHEN 5 THEN 'cancelled' ELSE 'completed' END,
			1, 3, 'manual', 0, 0, 1000000 - n, 0,
			CASE WHEN n % 1000 IN (1, 2, 3) THEN NULL ELSE 0 END,
			CASE WHEN n % 1000 = 2 THEN 'node-' || (n % 3) ELSE '' END, '{}'
		FROM g`); err != nil {
		t.Fatal(err)
	}

	type plan struct {
		sql   string
		args  []any
		index string // the plan reads it
	}
	plans := map[string]plan{
		"running counts": {sqlRunningCounts, nil, "runs_node_running"},
	}
	for _, st := range []jobs.Status{jobs.StatusPending, jobs.StatusRetrying, jobs.StatusDeadLetter,
		jobs.StatusCancelled, jobs.StatusRunning, jobs.StatusCompleted} {
		for _, job := range []string{"", "job-7"} {
			q, args := runsListQuery(store.RunFilter{Job: job, Status: st}, nil)
			index := "runs_status_created"
			switch {
			case job != "":
				index = "runs_job_created"
			case st == jobs.StatusCompleted:
				index = "runs_created"
			case st == jobs.StatusRunning:
				index = "runs_node_running"
			}
			plans["list "+string(st)+" of "+job] = plan{q, args, index}
			// A later page of a range: the same index.
			q, args = runsListQuery(store.RunFilter{Job: job, Status: st, Since: time.UnixMicro(971000), Until: time.UnixMicro(999000)},
				&listCursor{createdAt: 985000, id: "000000015000"})
			plans["list a page of "+string(st)+" of "+job] = plan{q, args, index}
		}
	}
	for _, job := range []string{"", "job-7"} {
		index := "runs_created"
		if job != "" {
			index = "runs_job_created"
		}
		q, args := runsListQuery(store.RunFilter{Job: job, Since: time.UnixMicro(971000)}, &listCursor{createdAt: 985000, id: "000000015000"})
		plans["list a page of "+job] = plan{q, args, index}
		q, args = runsStatsQuery(store.RunStatsFilter{Job: job, Since: time.UnixMicro(990000)})
		plans["stats of "+job] = plan{q, args, index}
	}
	for name, p := range plans {
		rows, err := s.reader.Query("EXPLAIN QUERY PLAN "+p.sql, p.args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		rows.Close()
		text := strings.Join(lines, "\n")
		if !strings.Contains(text, "INDEX "+p.index) || strings.Contains(text, "SCAN runs\n") || strings.HasSuffix(text, "SCAN runs") {
			t.Errorf("%s: want a plan that reads %s and no scan of the whole table, got\n%s", name, p.index, text)
		}
		// A later page seeks to its cursor in the index.
		if strings.HasPrefix(name, "list a page of ") && p.index != "runs_node_running" && !strings.Contains(text, "(created_at,id)<(?,?))") {
			t.Errorf("%s: want a plan that seeks to the cursor in %s, got\n%s", name, p.index, text)
		}
		if strings.HasPrefix(name, "stats of ") && !strings.Contains(text, "SEARCH runs USING INDEX "+p.index+" (") {
			t.Errorf("%s: want a plan that reads a range of %s, got\n%s", name, p.index, text)
		}
		if !strings.HasPrefix(name, "list ") {
			continue
		}
		// The statement runs, and finds what it lists.
		got, err := scanRuns(s.read().query(t.Context(), p.sql, p.args...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) == 0 {
			t.Errorf("%s: no runs", name)
		}
	}
}

// TestDueAmongHeads: the read that lets an idle claim skip the write lock
// says a claim may find work when a run of its jobs is among the first
// scan due runs, or scan due runs are there (its jobs' runs may follow).
func TestDueAmongHeads(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	storetest.InsertBacklog(t, s, at, append(slices.Repeat([]string{"other"}, 10), slices.Repeat([]string{"a"}, 2)...)...)
	for _, c := range []struct {
		job  string
		scan int
		want bool
	}{
		{"a", 20, true},  // the 11th due run is a's
		{"a", 11, true},  // the last of the scan
		{"a", 5, true},   // 5 due runs of others: a's may follow
		{"b", 20, false}, // 12 due runs, none b's
		{"b", 12, true},  // as many due runs as the scan: b's may follow
	} {
		got, err := dueAmongHeads(ctx, s.read(), at.Add(time.Minute).UnixMicro(), c.scan, store.NewJobLimits(map[string]int{c.job: 0}))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("job %s, scan %d: %v, want %v", c.job, c.scan, got, c.want)
		}
	}
	// Not yet due: nothing.
	if got, err := dueAmongHeads(ctx, s.read(), at.Add(-time.Minute).UnixMicro(), 20, store.NewJobLimits(map[string]int{"a": 0})); err != nil || got {
		t.Errorf("before the runs are due: %v, %v", got, err)
	}
}

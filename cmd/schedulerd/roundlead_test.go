package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/store"
)

// TestKilledInsideRoundLeadEveryTickOnce is guarantees 1 and 2 when the
// daemon dies while it fires a large round ahead of its tick (docs/firing-ahead.md,
// "Bursts"): the 1,100 jobs due at one second are fired in three
// transactions, 350, 300 and 250 ms before the tick (100, 500 and 500
// runs). The daemon is SIGKILLed before the tick, once the store holds
// some but not all of the round's runs, and restarted at once. Every tick
// of every job, the cut rounds' included, must have exactly one run,
// completed, and every attempt must be of the store's run of its tick.
// On SQLite and on PostgreSQL.
func TestKilledInsideRoundLeadEveryTickOnce(t *testing.T) {
	proctest.Long(t, "SIGKILLs a daemon inside the lead of 1,100-job rounds")
	t.Run("sqlite", func(t *testing.T) {
		e := newEnv(t)
		// A second reader of the daemon's file, for the count of one
		// tick's runs (the store has no such read).
		db, err := sql.Open("sqlite", "file:"+filepath.Join(e.dir, "state", "schedulerd.db")+
			"?mode=ro&_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		runsOf := func(tick time.Time) int {
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM runs WHERE scheduled_at = ?`, tick.UnixMicro()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		testKilledInsideRoundLead(t, e, "", e.openStore, runsOf)
	})
	t.Run("postgres", func(t *testing.T) {
		pg.Require(t)
		dsn := pg.NewDatabase(t)
		open := func() store.Store { return openPostgres(t, dsn) }
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		runsOf := func(tick time.Time) int {
			var n int
			if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE scheduled_at = $1`, tick).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		testKilledInsideRoundLead(t, newEnv(t), fmt.Sprintf("store = %q", dsn), open, runsOf)
	})
}

// testKilledInsideRoundLead runs the test on one store; runsOf counts the
// runs of every job at one tick.
func testKilledInsideRoundLead(t *testing.T, e *env, daemon string, openStore func() store.Store, runsOf func(time.Time) int) {
	const (
		nJobs  = 1100 // three fire transactions of at most fireBatch (500)
		period = 10 * time.Second
		kills  = 2 // kills that fall inside a round's lead
		tries  = 6 // rounds watched for them
		watch  = time.Millisecond
		before = 500 * time.Millisecond // more than the round's lead
	)
	witness := filepath.Join(e.dir, "witness")
	e.writeConfigWith(64, daemon, witnessJobsEvery(nJobs, period, witness))
	d := e.start(true)
	start := time.Now() // every cursor exists
	var (
		inside []string
		end    time.Time // the last round watched
	)
	for try := 0; len(inside) < kills; try++ {
		if try == tries {
			t.Fatalf("%d of %d rounds were cut inside their lead (%v); the others were written whole, or not before the tick, when the test looked",
				len(inside), tries, inside)
		}
		tick := time.Now().Truncate(period).Add(period)
		if time.Until(tick) < before {
			tick = tick.Add(period)
		}
		end = tick
		// Watch the round's first transaction come, then kill at once:
		// the next one comes 50 ms later.
		n := 0
		for n == 0 && time.Now().Before(tick) {
			time.Sleep(watch)
			n = runsOf(tick)
		}
		if n == 0 {
			t.Logf("round %s: no run written before the tick", tick.Format(time.TimeOnly))
			continue
		}
		d.kill()
		killed := time.Now()
		n = runsOf(tick)
		if n < nJobs && killed.Before(tick) {
			inside = append(inside, fmt.Sprintf("%d of %d runs, %s before the tick",
				n, nJobs, tick.Sub(killed).Round(time.Millisecond)))
		} else {
			t.Logf("round %s: killed with %d runs written, %s before the tick", tick.Format(time.TimeOnly), n, tick.Sub(killed))
		}
		d = e.start(true)
	}

	st := openStore()
	waitBurstTicks(t, st, nJobs, period, start, end)
	d.stop()
	runs, retried := checkBurstRuns(t, st, witness, end)
	t.Logf("kills inside a round's lead: %v; %d runs over %s, %d retried",
		inside, len(runs), end.Sub(start).Round(time.Second), retried)
}

package postgres

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestBackfillMigrationUpgrades: a database made by the migrations before
// 003_backfill, with runs, takes it: its runs stay, a backfill run is then
// admitted by the check of trigger_kind, and a kind it does not know is
// still not.
func TestBackfillMigrationUpgrades(t *testing.T) {
	before := fstest.MapFS{}
	for _, name := range []string{"001_init.up.sql", "002_chains.up.sql"} {
		data, err := fs.ReadFile(embeddedMigrations, "migrations/"+name)
		if err != nil {
			t.Fatal(err)
		}
		before["migrations/"+name] = &fstest.MapFile{Data: data}
	}
	withMigrations(t, before)
	dsn := srv.NewDatabase(t)
	old := openDSN(t, dsn, Options{})
	if _, err := old.RunInsert(t.Context(), manual("report")); err != nil {
		t.Fatal(err)
	}
	bf := store.RunInsertParams{Job: "report", Trigger: jobs.TriggerBackfill, ScheduledAt: t0, Retry: jobs.DefaultRetry, Now: t0}
	if _, err := old.RunInsert(t.Context(), bf); err == nil {
		t.Fatal("schema 2 took a backfill run")
	}
	old.Close()

	migrationSource = embeddedMigrations
	s := openDSN(t, dsn, Options{})
	if runs, err := s.RunsList(t.Context(), store.RunFilter{Job: "report"}); err != nil || len(runs) != 1 {
		t.Fatalf("runs after the upgrade: %d, %v", len(runs), err)
	}
	run, err := s.RunInsert(t.Context(), bf)
	if err != nil || run.Trigger != jobs.TriggerBackfill {
		t.Fatalf("a backfill run after the upgrade: %v, %v", run, err)
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE runs SET trigger_kind = 'bogus' WHERE id = $1`, run.ID); err == nil {
		t.Error("the check of trigger_kind took an unknown kind")
	}
	var kind string
	if err := s.pool.QueryRow(t.Context(), `SELECT kind FROM occurrences WHERE run_id = $1`, run.ID).Scan(&kind); err != nil || kind != "schedule" {
		t.Errorf("the occurrence of a backfill run has kind %q, %v; want schedule (pruned as a tick)", kind, err)
	}
}

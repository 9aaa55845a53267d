package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestArrayArgs sends each kind of array argument to the server and has the
// server compare what it received with literals: values, NULL elements,
// empty strings and bytea that are not NULL, and an empty array.
func TestArrayArgs(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	for _, c := range []struct {
		name string
		arg  any
		want string // a SQL array literal of the argument's type
	}{
		{"text", textArray{"a", "", "ünï"}, `ARRAY['a', '', 'ünï']::text[]`},
		{"text from strings", textsOf([]string{"x", "y"}), `ARRAY['x', 'y']::text[]`},
		{"empty text", textArray{}, `'{}'::text[]`},
		{"nullable text", nullArray{textArg("a"), textArg("")}, `ARRAY['a', NULL]::text[]`},
		{"timestamptz", tsArray{tsArg(at), tsArg(time.Time{})},
			`ARRAY['2026-03-01 12:00:00.123456+00', NULL]::timestamptz[]`},
		{"int4", int4Array{int4Of(7), int4Arg(nil), int4Of(-1)}, `ARRAY[7, NULL, -1]::int4[]`},
		{"int8", int8Array{{Int64: 1 << 40, Valid: true}}, `ARRAY[1099511627776]::int8[]`},
		{"bool", boolArray{boolOf(true), boolOf(false)}, `ARRAY[true, false]::bool[]`},
		{"bytea", byteArray{nil, bytea("x\x00y")}, `ARRAY['', '\x780079']::bytea[]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var same bool
			var got string
			typ := c.want[strings.LastIndex(c.want, "::"):]
			q := fmt.Sprintf(`SELECT $1%s IS NOT DISTINCT FROM %s, ($1%s)::text`, typ, c.want, typ)
			if err := conn.QueryRow(ctx, q, c.arg).Scan(&same, &got); err != nil {
				t.Fatal(err)
			}
			if !same {
				t.Errorf("server received %s, want %s", got, c.want)
			}
		})
	}
}

// TestScanKeepsEveryValue reads back runs that differ in every column the
// scanner keeps as shared names, with more distinct names than it keeps,
// and in each nullable column.
func TestScanKeepsEveryValue(t *testing.T) {
	s, _ := openTest(t)
	ctx := t.Context()
	const n = maxNames + 50
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		p := manual(fmt.Sprintf("job-%03d", i))
		if i%2 == 0 {
			p.DedupID = fmt.Sprintf("dedup-%d", i)
			p.Payload = fmt.Sprintf("payload\x00%d", i)
			p.NotAfter = t0.Add(time.Duration(i+1) * time.Hour)
			p.Retry = jobs.RetryPolicy{MaxAttempts: i%5 + 1, Backoff: jobs.BackoffExponential,
				InitialDelay: time.Duration(i+1) * time.Second, MaxDelay: time.Hour}
		}
		ps[i] = p
	}
	made, err := s.RunInsertMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.RunsList(ctx, store.RunFilter{Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != n {
		t.Fatalf("listed %d runs, want %d", len(listed), n)
	}
	byID := map[string]*jobs.Run{}
	for _, r := range listed {
		byID[r.ID] = r
	}
	for i, m := range made {
		p, r := ps[i], byID[m.ID]
		if r == nil {
			t.Fatalf("run %d (%s) not listed", i, m.ID)
		}
		if r.Job != p.Job || r.DedupID != p.DedupID || r.Payload != p.Payload || !r.NotAfter.Equal(p.NotAfter) ||
			r.Retry != m.Retry || r.MaxAttempts != max(p.Retry.MaxAttempts, 1) || r.Status != jobs.StatusPending ||
			r.Trigger != jobs.TriggerManual || r.ExitCode != nil || !r.StartedAt.IsZero() || r.ClaimedFrom != "" {
			t.Errorf("run %d read back as %+v, inserted %+v", i, r, p)
		}
		if i%2 == 0 && r.Retry.InitialDelay != time.Duration(i+1)*time.Second {
			t.Errorf("run %d: retry %+v", i, r.Retry)
		}
	}

	// A completed attempt: exit code, times and claimed_from come back
	// through the locked read and the claim.
	claimed, err := s.RunsClaim(ctx, store.ClaimParams{Jobs: store.NewJobLimits(map[string]int{"job-001": 0}), Limit: 1, Node: "n", Incarnation: "i"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(claimed))
	}
	r := claimed[0]
	if r.Status != jobs.StatusRunning || r.ClaimedFrom != jobs.StatusPending || r.Node != "n" || r.Incarnation != "i" || r.StartedAt.IsZero() {
		t.Fatalf("claimed %+v", r)
	}
	code := 3
	done, err := s.RunTransition(ctx, jobs.Transition{RunID: r.ID, To: jobs.StatusDeadLetter, Reason: jobs.ReasonFailed,
		Error: "exit 3", ExitCode: &code, Node: "n", Fence: &jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RunGet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitCode == nil || *got.ExitCode != 3 || got.Error != "exit 3" || got.FinishedAt.IsZero() ||
		!got.FinishedAt.Equal(done.FinishedAt) || got.ClaimedFrom != "" || got.Status != jobs.StatusDeadLetter {
		t.Errorf("read back %+v after %+v", got, done)
	}
}

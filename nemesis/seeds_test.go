package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseSeeds: seeds with and without kinds, comments and blank lines;
// each bad line is refused with the file and line named.
func TestParseSeeds(t *testing.T) {
	in := "# a comment\n\n10 failover,pg-restart  # what it found\n  5\n"
	cs, err := parseSeeds("seeds.txt", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []seedCase{{seed: 10, kinds: "failover,pg-restart", line: 3}, {seed: 5, kinds: allKinds, line: 4}}
	if len(cs) != len(want) || cs[0] != want[0] || cs[1] != want[1] {
		t.Fatalf("parsed %+v, want %+v", cs, want)
	}
	for in, msg := range map[string]string{
		"1\nx\n":                    `seeds.txt:2: seed "x": want a positive integer`,
		"0\n":                       `seeds.txt:1: seed "0": want a positive integer`,
		"-3\n":                      `seeds.txt:1: seed "-3": want a positive integer`,
		"7 kill, stop\n":            `seeds.txt:1: "7 kill, stop": want SEED [KINDS]`,
		"7 kill,fire\n":             `seeds.txt:1: unknown kind "fire"`,
		"# only a comment\n\n":      "seeds.txt: no seed in it",
		"99999999999999999999999\n": `seeds.txt:1: seed "99999999999999999999999": want a positive integer`,
	} {
		_, err := parseSeeds("seeds.txt", strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one with %q", in, err, msg)
		}
	}
}

// TestSeedsFile: the seeds that make nemesis-ci replays parse.
func TestSeedsFile(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "seeds.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := parseSeeds("testdata/seeds.txt", f); err != nil {
		t.Fatal(err)
	}
}

// TestReplaySeedsRefuses: -seeds refuses a missing file, and a -duration
// that leaves each run less than minShare, before it starts anything.
func TestReplaySeedsRefuses(t *testing.T) {
	dir := t.TempDir()
	seeds := filepath.Join(dir, "seeds.txt")
	if err := os.WriteFile(seeds, []byte("10\n5 kill\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-seeds", filepath.Join(dir, "none.txt")}, "no such file"},
		{[]string{"-seeds", seeds, "-duration", "59s"}, "is 19s each, less than 20s"},
		{[]string{"-seeds", seeds, "-duration", "30s"}, "-duration 30s shared by 3 runs (the 2 seeds of " + seeds + " and a new one) is 10s each"},
		{[]string{"-seeds", seeds, "-kinds", "kill,fire"}, `-kinds: unknown kind "fire"`},
	} {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code := run(ctx, c.args, &out, &errOut)
		cancel()
		if code != 2 || !strings.Contains(errOut.String(), c.msg) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and an error with %q", c.args, code, out.String(), errOut.String(), c.msg)
		}
	}
}

// TestWithoutPostgres: without PostgreSQL, -seeds skips and says so,
// unless $CI is set: then it fails.
func TestWithoutPostgres(t *testing.T) {
	missing := errors.New("no PostgreSQL server binaries (pg_config --bindir: not found)")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		var out, errOut bytes.Buffer
		code := withoutPostgres(missing, &out, &errOut)
		switch {
		case ci == "" && (code != 0 || out.String() != "nemesis: skipped, "+missing.Error()+" (on CI this fails)\n" || errOut.Len() != 0):
			t.Errorf("off CI: exit %d, stdout %q, stderr %q; want 0 and a skip", code, out.String(), errOut.String())
		case ci != "" && (code != 2 || errOut.String() != "nemesis: "+missing.Error()+": it is required on CI\n" || out.Len() != 0):
			t.Errorf("on CI: exit %d, stdout %q, stderr %q; want 2 and an error", code, out.String(), errOut.String())
		}
	}
}

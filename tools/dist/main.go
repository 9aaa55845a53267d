// Command dist builds the Linux release of schedulerd into dist/: for each
// architecture a static binary, a .deb and an .rpm, and SHA256SUMS. The
// packages are made with nfpm as a library, so nothing but Go and the Go
// module proxy is needed. `make dist` runs it:
//
//	go -C tools/dist run . -root ../.. -out ../../dist \
//		-version "$(tools/dist/describe.sh)" \
//		-commit "$(git rev-parse HEAD)" -date "$(git log -1 --format=%cI)" \
//		-ldflags '-s -w -X main.version=...'
//
// It lives in a module of its own so that nfpm's dependencies never enter
// the daemon's module graph.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "dist: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	root := fs.String("root", "../..", "the repository's root")
	out := fs.String("out", "", "where to write the release (default: ROOT/dist)")
	describe := fs.String("version", "", "the version, in the form of git describe: what describe.sh prints")
	commit := fs.String("commit", "", "the commit built")
	date := fs.String("date", "", "the commit's time, RFC 3339: the packages' file times and changelog date")
	ldflags := fs.String("ldflags", "", "the -ldflags of the build, which stamp the version")
	archs := fs.String("arch", "amd64,arm64", "the GOARCH values to build, comma-separated")
	formats := fs.String("formats", "deb,rpm", "the package formats, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *describe == "" || *commit == "" || *date == "" {
		return fmt.Errorf("-version, -commit and -date are required")
	}
	t, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("-date: %w", err)
	}
	version, err := packageVersion(*describe, t)
	if err != nil {
		return err
	}
	r := &release{
		root: *root, out: *out, version: version, commit: *commit, date: t, ldflags: *ldflags,
		archs: strings.Split(*archs, ","), formats: strings.Split(*formats, ","),
	}
	if r.out == "" {
		r.out = r.root + "/dist"
	}
	written, err := r.make(ctx)
	if err != nil {
		return err
	}
	for _, w := range written {
		fmt.Println(w)
	}
	return nil
}

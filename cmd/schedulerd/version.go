package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// buildInfo is what `schedulerd version` prints.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
}

// commit and buildDate are stamped by the Makefile (-ldflags "-X
// main.commit=... -X main.buildDate=..."): the commit and its time, so
// that two builds of one commit are the same.
var commit, buildDate string

// currentBuild reads the version, commit and date stamped by the
// Makefile, else those the Go toolchain records from the repository (a
// "-dirty" suffix when the work tree had changes); "unknown" when neither
// says.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: "unknown", BuildDate: "unknown", GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.BuildDate = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Commit != "unknown" {
			b.Commit += "-dirty"
		}
	}
	if commit != "" {
		b.Commit = commit
	}
	if buildDate != "" {
		b.BuildDate = buildDate
	}
	return b
}

// cmdVersion prints the version, commit, build date (the commit's time, so
// that a build is reproducible) and Go version; --json prints them as one
// object.
func cmdVersion(args []string, stdout io.Writer) error {
	fs := newFlags("version")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	b := currentBuild()
	if *asJSON {
		return printJSON(stdout, b)
	}
	fmt.Fprintf(stdout, "schedulerd %s\ncommit %s\nbuilt %s\n%s\n", b.Version, b.Commit, b.BuildDate, strings.TrimPrefix(b.GoVersion, "go"))
	return nil
}

package config

import (
	"slices"
	"strings"
	"testing"
)

// jobAt is a valid job named name on three lines, then extra.
func jobAt(name, extra string) string {
	return "[[job]]\nname = \"" + name + "\"\nshell = \"true\"\n" + extra
}

func TestChains(t *testing.T) {
	cfg := mustParse(t, jobAt("etl", "on_success = [\"report\", \"archive\"]\non_failure = [\"page\"]\n")+
		jobAt("report", "on_success = [\"archive\"]\non_failure = [\"page\"]\n")+
		jobAt("archive", "")+jobAt("page", "on_success = []\n"))
	etl, report, archive, page := jobNamed(t, cfg, "etl"), jobNamed(t, cfg, "report"), jobNamed(t, cfg, "archive"), jobNamed(t, cfg, "page")
	if !slices.Equal(etl.OnSuccess, []string{"report", "archive"}) || !slices.Equal(etl.OnFailure, []string{"page"}) {
		t.Errorf("etl: on_success %q on_failure %q", etl.OnSuccess, etl.OnFailure)
	}
	if !slices.Equal(report.OnSuccess, []string{"archive"}) || !slices.Equal(report.OnFailure, []string{"page"}) {
		t.Errorf("report: on_success %q on_failure %q", report.OnSuccess, report.OnFailure)
	}
	if archive.OnSuccess != nil || archive.OnFailure != nil || page.OnSuccess != nil {
		t.Errorf("archive %q %q, page %q: want none", archive.OnSuccess, archive.OnFailure, page.OnSuccess)
	}
	// A job named in both lists of one job is no cycle.
	mustParse(t, jobAt("a", "on_success = [\"b\"]\non_failure = [\"b\"]\n")+jobAt("b", ""))
}

var chainErrorTests = []struct{ name, src, want string }{
	{"unknown job", jobAt("a", "on_success = [\"b\", \"nope\"]\n") + jobAt("b", ""),
		`t.toml:4: job "a": on_success: element 1: no [[job]] named "nope"`},
	{"unknown job on failure", jobAt("a", "on_failure = [\"nope\"]\n"),
		`t.toml:4: job "a": on_failure: element 0: no [[job]] named "nope"`},
	{"itself", jobAt("a", "on_failure = [\"a\"]\n"), `t.toml:4: job "a": on_failure: chain cycle: a -> a`},
	{"two jobs", jobAt("a", "on_success = [\"b\"]\n") + jobAt("b", "\non_failure = [\"a\"]\n"),
		`t.toml:4: job "a": on_success: chain cycle: a -> b -> a`},
	{"through both lists", jobAt("x", "") + jobAt("a", "on_success = [\"x\", \"b\"]\n") + jobAt("b", "on_failure = [\"c\"]\n") +
		jobAt("c", "on_success = [\"a\"]\n"),
		`t.toml:7: job "a": on_success: chain cycle: a -> b -> c -> a`},
	{"not a list", jobAt("a", "on_success = \"b\"\n") + jobAt("b", ""), `t.toml:4: job "a": on_success: must be a list of job names such as ["report"], not a string`},
	{"repeated", jobAt("a", "on_success = [\"b\", \"b\"]\n") + jobAt("b", ""), `t.toml:4: job "a": on_success: element 1 repeats "b"`},
	{"bad name", jobAt("a", "on_success = [\"b c\"]\n"), `t.toml:4: job "a": on_success: element 0: "b c" is not a valid job name`},
	{"in defaults", "[defaults]\non_failure = [\"a\"]\n" + jobAt("a", ""), `t.toml:2: defaults.on_failure: cannot be set in [defaults]; set it in each [[job]]`},
}

func TestChainErrors(t *testing.T) {
	for _, tt := range chainErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("t.toml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			checkErrors(t, err)
			lines := strings.Split(err.Error(), "\n")
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, tt.want) }) {
				t.Errorf("error:\n%v\nhas no line starting with\n%s", err, tt.want)
			}
			if n := strings.Count(err.Error(), "chain cycle"); n > 1 {
				t.Errorf("a cycle reported %d times:\n%v", n, err)
			}
		})
	}
}

package crontab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/schedulerd/schedulerd/config"
)

// FuzzImportCrontab: whatever the crontab, the translation is TOML whose
// jobs have valid, distinct names; the command line of a job that feeds
// its command standard input parses as its shell, whatever the command;
// and that of another job parses unless a WARNING says it does not.
func FuzzImportCrontab(f *testing.F) {
	for _, file := range []string{"cronie-crontab.5", "debian-crontab.5", "debian-etc-crontab", "edge-cases", "cron.d/php"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("0 0 * * * cat%a%b\\%c%\n\"A\"='x'\n@daily root x\n0 0 L * * '\\\n\x00\xff")
	f.Fuzz(func(t *testing.T, crontab string) {
		tr, err := Translate([]byte(crontab), Options{File: "-"})
		if err != nil {
			if len(crontab) > MaxSize || err == ErrTooLarge {
				return
			}
			t.Fatal(err)
		}
		var v struct {
			Job []struct {
				Name    string
				Shell   string
				Command []string
			}
		}
		if _, err := toml.Decode(tr.TOML, &v); err != nil {
			t.Fatalf("the translation is not TOML: %v\n%s", err, tr.TOML)
		}
		names := map[string]bool{}
		for _, j := range v.Job {
			if !config.ValidJobName(j.Name) || names[j.Name] {
				t.Fatalf("job name %q invalid or repeated\n%s", j.Name, tr.TOML)
			}
			names[j.Name] = true
		}
		if len(v.Job) != tr.Jobs {
			t.Fatalf("%d [[job]] tables, %d jobs counted\n%s", len(v.Job), tr.Jobs, tr.TOML)
		}
		broken := 0
		for _, j := range v.Job {
			shell, script := "/bin/sh", j.Shell
			if script == "" {
				shell, script = j.Command[0], j.Command[2]
			}
			if checkSyntax(shell, script) != "" {
				broken++
			}
		}
		// A job that feeds standard input has a warning of its own command
		// with a word about %, and its command line parses.
		warned := strings.Count(tr.TOML, "\n#   WARNING: the command does not parse as ") -
			strings.Count(tr.TOML, "\n#   Cron ends the command at the first unescaped %")
		if broken != warned {
			t.Fatalf("%d jobs do not parse, %d warnings of jobs without standard input say so\n%s", broken, warned, tr.TOML)
		}
	})
}

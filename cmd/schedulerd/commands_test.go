package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/internal/manpage"
	"github.com/schedulerd/schedulerd/internal/testtool"
)

// TestSynopsesNameEveryFlag: each command's synopses name exactly the
// flags it parses (the client flags aside, which are listed once), each
// flag that takes a value with the placeholder its usage gives, so that
// the usage text, --help, the man page and the completions agree.
func TestSynopsesNameEveryFlag(t *testing.T) {
	flagToken := regexp.MustCompile(`(?:^|[\s\[|])(--?[a-z][a-z-]*)`)
	for _, c := range commands {
		fs, err := commandFlags(c)
		if err != nil {
			t.Fatal(err)
		}
		var syn []string
		for _, f := range c.forms {
			syn = append(syn, f.synopsis)
		}
		all := " " + strings.Join(syn, " ") + " "
		own := map[string]bool{}
		for _, d := range flagDocs(fs, c.client) {
			own[d.spelled()] = true
			want := d.spelled()
			if d.metavar != "" {
				if strings.ToUpper(d.metavar) != d.metavar {
					t.Errorf("%s %s: usage %q names no placeholder in `backquotes`", c.name, d.spelled(), d.usage)
				}
				want += " " + d.metavar
			}
			if !regexp.MustCompile(regexp.QuoteMeta(want) + `[\s\]|]`).MatchString(all) {
				t.Errorf("%s: no synopsis names %q: %q", c.name, want, syn)
			}
		}
		for _, m := range flagToken.FindAllStringSubmatch(all, -1) {
			if !own[m[1]] {
				t.Errorf("%s: a synopsis names %s, which the command does not parse: %q", c.name, m[1], syn)
			}
		}
	}
}

// TestUsageAndHelpListEveryCommand: `schedulerd help` lists every form of
// every command, and `schedulerd COMMAND --help` every flag it parses.
func TestUsageAndHelpListEveryCommand(t *testing.T) {
	var usage bytes.Buffer
	writeUsage(&usage)
	for _, c := range commands {
		for _, f := range c.forms {
			if !strings.Contains(usage.String(), "schedulerd "+f.synopsis) {
				t.Errorf("usage lacks %q", f.synopsis)
			}
		}
		fs, err := commandFlags(c)
		if err != nil {
			t.Fatal(err)
		}
		var help bytes.Buffer
		writeCommandHelp(&help, c, fs)
		for _, d := range flagDocs(fs, false) {
			if !strings.Contains(help.String(), "  "+d.spelled()) {
				t.Errorf("%s --help lacks %s:\n%s", c.name, d.spelled(), help.String())
			}
		}
	}
}

// TestCommandHelpExitsZero: a command's --help prints its usage and flags
// on stdout and exits 0, for the binary as a user runs it.
func TestCommandHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"trigger", "--help"}, {"runs", "show", "-h"}, {"help", "next"}, {"--help"}} {
		out, err := exec.Command(binary, args...).Output()
		if err != nil {
			t.Fatalf("schedulerd %v: %v", args, err)
		}
		if !strings.HasPrefix(string(out), "Usage:") && !strings.HasPrefix(string(out), "schedulerd: ") {
			t.Errorf("schedulerd %v printed:\n%s", args, out)
		}
	}
	r, err := exec.Command(binary, "help", "nosuch").CombinedOutput()
	if err == nil || !strings.Contains(string(r), `unknown command "nosuch"`) {
		t.Errorf("help nosuch: %v, %s", err, r)
	}
}

// TestCommandPageListsEveryCommand: schedulerd(8) has every form of every
// command, every flag each parses, the client flags and every exit code.
func TestCommandPageListsEveryCommand(t *testing.T) {
	page, err := commandPage()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		for _, f := range c.forms {
			if !strings.Contains(page, synopsisRoff(f.synopsis)) {
				t.Errorf("schedulerd(8) lacks %q", f.synopsis)
			}
		}
		fs, err := commandFlags(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range flagDocs(fs, false) {
			if !strings.Contains(page, ".TP\n"+manpage.Bold(d.spelled())) {
				t.Errorf("schedulerd(8) lacks %s of %s", d.spelled(), c.name)
			}
		}
	}
	for _, e := range exitCodes {
		if !strings.Contains(page, ".TP\n"+manpage.Bold(itoa(e.code))+"\n") {
			t.Errorf("schedulerd(8) lacks exit code %d", e.code)
		}
	}
	for _, sec := range []string{"COMMANDS", "EXIT STATUS", "SIGNALS", "FILES"} {
		if !strings.Contains(page, ".SH \""+sec+"\"\n") {
			t.Errorf("schedulerd(8) lacks the section %s", sec)
		}
	}
}

// TestConfigPageListsEveryKey: schedulerd.toml(5), rendered from
// docs/configuration.md, documents exactly the keys that the config
// parser takes: those of [daemon] in its section, those of [[job]] in the
// subsections of its section, those of retry in its own, those of
// [[token]] and [[notifier]] in their own; and [defaults] names the job keys it refuses.
func TestConfigPageListsEveryKey(t *testing.T) {
	page := configPage()
	got := map[string][]string{}
	defaultsText := ""
	var sh, ss string
	lines := strings.Split(page, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, ".SH "):
			sh, ss = unquoteRoff(l[4:]), ""
		case strings.HasPrefix(l, ".SS "):
			ss = unquoteRoff(l[4:])
		case l == ".TP" && i+1 < len(lines):
			table := ""
			switch {
			case sh == "[daemon]":
				table = "daemon"
			case sh == "[[job]]" && ss == "retry":
				table = "retry"
			case sh == "[[job]]":
				table = "job"
			case sh == "[[token]]":
				table = "token"
			case sh == "[[notifier]]":
				table = "notifier"
			}
			for _, m := range regexp.MustCompile(`\\fB([a-z][a-z_0-9]*)\\fR`).FindAllStringSubmatch(lines[i+1], -1) {
				if table != "" {
					got[table] = append(got[table], m[1])
				}
			}
		case sh == "[defaults]":
			defaultsText += l + "\n"
		}
	}
	keys := config.Keys()
	for _, table := range []string{"daemon", "job", "retry", "token", "notifier"} {
		want := slices.Sorted(slices.Values(keys[table]))
		have := slices.Sorted(slices.Values(got[table]))
		for _, k := range want {
			if !slices.Contains(have, k) {
				t.Errorf("schedulerd.toml(5) (docs/configuration.md) does not document the %s key %q", table, k)
			}
		}
		for _, k := range have {
			if !slices.Contains(want, k) {
				t.Errorf("schedulerd.toml(5) (docs/configuration.md) documents %q as a %s key, which the parser does not take", k, table)
			}
		}
	}
	for _, k := range keys["job"] {
		if !slices.Contains(keys["defaults"], k) && !strings.Contains(defaultsText, manpage.Bold(k)) {
			t.Errorf("[defaults] of schedulerd.toml(5) does not say that it refuses %q", k)
		}
	}
}

func unquoteRoff(s string) string {
	s = strings.Trim(s, `"`)
	return strings.NewReplacer(`\-`, "-", `\(dq`, `"`, `\e`, `\`).Replace(s)
}

// TestManPagesRender: both pages render without a warning from groff, as
// lintian checks them (man --warnings). CI installs man-db.
func TestManPagesRender(t *testing.T) {
	testtool.Path(t, "man-db", "man")
	page8, err := commandPage()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, page := range map[string]string{"schedulerd.8": page8, "schedulerd.toml.5": configPage()} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Env = append(os.Environ(), "MANWIDTH=80")
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 || len(out) == 0 {
			t.Errorf("man -l %s: %v\n%s", name, err, stderr.String())
		}
	}
}

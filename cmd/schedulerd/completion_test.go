package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/internal/testtool"
)

// shell returns the path of a shell the completion tests need. CI
// installs them (.ci/run); elsewhere a missing one skips the test
// (testtool).
func shell(t *testing.T, name string) string {
	t.Helper()
	return testtool.Path(t, name, name)
}

// completionScript writes `schedulerd completion SHELL` to a file.
func completionScript(t *testing.T, sh string) string {
	t.Helper()
	out, err := exec.Command(binary, "completion", sh).Output()
	if err != nil {
		t.Fatalf("completion %s: %v", sh, err)
	}
	path := filepath.Join(t.TempDir(), "schedulerd."+sh)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompletionScriptsLoad: the bash script loads and registers its
// function, as `source <(schedulerd completion bash)` does; the zsh script
// parses and registers with compinit; the fish script parses.
func TestCompletionScriptsLoad(t *testing.T) {
	bash := shell(t, "bash")
	out, err := exec.Command(bash, "-c", "source <("+binary+" completion bash) && complete -p schedulerd").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "complete -F _schedulerd schedulerd" {
		t.Errorf("bash: %v\n%s", err, out)
	}

	t.Run("zsh", func(t *testing.T) {
		zsh := shell(t, "zsh")
		script := completionScript(t, "zsh")
		if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v\n%s", err, out)
		}
		cmd := exec.Command(zsh, "-f", "-c", "autoload -Uz compinit && compinit -u -D && source "+script+" && print -r -- $_comps[schedulerd]")
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "_schedulerd" {
			t.Errorf("zsh compdef: %v\n%s", err, out)
		}
		// Which command a line has, client flags before it or not: the
		// completion system's functions replaced by ones that say how
		// they were called.
		driver := `compdef() { }
source ` + script + `
_describe() { print -r -- commands }
compadd() { print -r -- "compadd $*" }
_arguments() { print -r -- "arguments of $words[1] at $CURRENT" }
_files() { print -r -- files }
t() { words=("$@"); CURRENT=$#words; PREFIX=$words[CURRENT]; _schedulerd }
t schedulerd tri
t schedulerd --config c.toml tri
t schedulerd --config c.toml --js
t schedulerd --config ''
t schedulerd trigger --wait ''
t schedulerd --config c.toml --json trigger ''
t schedulerd --api http://x --token-file f runs show ''
`
		want := `commands
commands
compadd -- --api --config --json --socket --token-file
files
arguments of trigger at 3
arguments of trigger at 2
arguments of runs at 3
`
		if out, err := exec.Command(zsh, "-f", "-c", driver).CombinedOutput(); err != nil || string(out) != want {
			t.Errorf("zsh completion: %v\n%s\nwant\n%s", err, out, want)
		}
	})
	t.Run("fish", func(t *testing.T) {
		fish := shell(t, "fish")
		script := completionScript(t, "fish")
		if out, err := exec.Command(fish, "--no-execute", script).CombinedOutput(); err != nil {
			t.Errorf("fish --no-execute: %v\n%s", err, out)
		}
	})
}

// TestCompletionCompletes asks the bash and fish scripts what they offer,
// with a daemon running: commands, flags, flag values, the daemon's jobs
// and its run ids.
func TestCompletionCompletes(t *testing.T) {
	bash := shell(t, "bash")
	e := newEnv(t)
	// The daemon has an HTTP API too, which the scripts ask with the
	// --api and --token-file of the line.
	addr := freeAddr(t)
	tok := newCLIToken(t, e.dir, "ci", "read")
	e.writeConfigWith(8, fmt.Sprintf("api_listen = %q", addr), fmt.Sprintf(cliJobs(), filepath.Join(e.dir, "slow.pid"))+tok.table)
	e.start(true)
	id := jsonField(t, e.ok("trigger", "ok", "--wait", "--json"), "id")
	api := []string{"--api", "http://" + addr, "--token-file", tok.file}

	bashScript := completionScript(t, "bash")
	// complete runs the completion function on words, the last being the
	// word being typed, and returns what it offers.
	complete := func(words ...string) []string {
		t.Helper()
		script := "source " + bashScript + "\nCOMP_WORDS=(" + binary
		for _, w := range words {
			script += " '" + w + "'"
		}
		script += ")\nCOMP_CWORD=" + itoa(len(words)) + "\n_schedulerd\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command(bash, "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	cfg := e.config
	for _, tt := range []struct {
		words []string
		want  []string
	}{
		{[]string{"tr"}, []string{"trigger"}},
		{[]string{"ch"}, []string{"check-config"}},
		{[]string{"trigger", "--de"}, []string{"--dedup-id"}},
		{[]string{"trigger", "--config", cfg, ""}, []string{"fail", "ok", "slow", "tick"}},
		{[]string{"trigger", "--config", cfg, "ok", ""}, nil},
		{[]string{"pause", "--config", cfg, "ti"}, []string{"tick"}},
		{[]string{"runs", "--config", cfg, "--job", "s"}, []string{"slow"}},
		{[]string{"runs", "--status", "dead"}, []string{"dead_letter"}},
		{[]string{"runs", "--config", cfg, ""}, []string{"show"}},
		{[]string{"runs", "--config", cfg, "show", ""}, []string{id}},
		{[]string{"cancel", "--config", cfg, id[:4]}, []string{id}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"man", ""}, []string{"5", "8"}},
		{[]string{"help", "rer"}, []string{"rerun"}},
		// No daemon behind this config: nothing to offer, and no error.
		{[]string{"trigger", "--socket", filepath.Join(e.dir, "none.sock"), ""}, nil},
		{append(append([]string{"trigger"}, api...), ""), []string{"fail", "ok", "slow", "tick"}},
		{append(append([]string{"runs"}, api...), "show", ""), []string{id}},
		{[]string{"trigger", "--api", "http://" + addr, ""}, nil},
		{[]string{"runs", "--token-f"}, []string{"--token-file"}},
		{[]string{"token", ""}, []string{"new"}},
		{[]string{"token", "new", "x", "--role", ""}, []string{"admin", "operate", "read"}},
		// The client flags before the command.
		{[]string{"--js"}, []string{"--json"}},
		{[]string{"--config", cfg, "tr"}, []string{"trigger"}},
		{[]string{"--config", cfg, "trigger", ""}, []string{"fail", "ok", "slow", "tick"}},
		{[]string{"--config", cfg, "--json", "trigger", "--de"}, []string{"--dedup-id"}},
		{[]string{"--config", cfg, "runs", "show", ""}, []string{id}},
		{append(append([]string{}, api...), "trigger", ""), []string{"fail", "ok", "slow", "tick"}},
		{[]string{"--api", "=", "http://" + addr, "--token-file", "=", tok.file, "runs", "show", ""}, []string{id}},
		{[]string{"--token-file", tok.file, "--api", ""}, nil},
		{[]string{"token", "new", "x", "--o"}, []string{"--out"}},
	} {
		got := complete(tt.words...)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("bash completion of %q: %q, want %q", tt.words, got, tt.want)
		}
	}

	t.Run("fish", func(t *testing.T) {
		fish := shell(t, "fish")
		fishScript := completionScript(t, "fish")
		// The script completes the command schedulerd: call the binary
		// under test by that name.
		dir := t.TempDir()
		if err := os.Symlink(binary, filepath.Join(dir, "schedulerd")); err != nil {
			t.Fatal(err)
		}
		complete := func(line string) []string {
			t.Helper()
			cmd := exec.Command(fish, "--no-config", "-c", "source "+fishScript+"; complete -C '"+line+"'")
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("fish completion of %q: %v\n%s", line, err, out)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if w, _, _ := strings.Cut(l, "\t"); w != "" {
					got = append(got, w)
				}
			}
			slices.Sort(got)
			return got
		}
		for _, tt := range []struct {
			line string
			want []string
		}{
			{"schedulerd tri", []string{"trigger"}},
			{"schedulerd trigger --config " + cfg + " ", []string{"fail", "ok", "slow", "tick"}},
			{"schedulerd runs --config " + cfg + " show ", []string{id}},
			{"schedulerd runs --status dead", []string{"dead_letter"}},
			{"schedulerd trigger --ded", []string{"--dedup-id"}},
			{"schedulerd trigger " + strings.Join(api, " ") + " ", []string{"fail", "ok", "slow", "tick"}},
			{"schedulerd token new x --role ", []string{"admin", "operate", "read"}},
			// The client flags before the command.
			{"schedulerd --js", []string{"--json"}},
			{"schedulerd --config " + cfg + " tri", []string{"trigger"}},
			{"schedulerd --config " + cfg + " trigger ", []string{"fail", "ok", "slow", "tick"}},
			{"schedulerd " + strings.Join(api, " ") + " runs show ", []string{id}},
			{"schedulerd --json --config " + cfg + " pause ti", []string{"tick"}},
		} {
			if got := complete(tt.line); !slices.Equal(got, tt.want) {
				t.Errorf("fish completion of %q: %q, want %q", tt.line, got, tt.want)
			}
		}
	})
}

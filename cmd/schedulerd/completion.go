package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
)

// cmdCompletion prints a completion script for bash, zsh or fish, made
// from the command table and the flags each command parses. The scripts
// ask the daemon for job names (`schedulerd jobs --json`) and run ids
// (`schedulerd runs --json`), passing on the --socket, --config, --api and
// --token-file of the line being completed; without a daemon they offer
// none.
func cmdCompletion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("completion")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("usage: schedulerd completion bash|zsh|fish")}
	}
	spec, err := completionSpec()
	if err != nil {
		return err
	}
	var script string
	switch pos[0] {
	case "bash":
		script = spec.bash()
	case "zsh":
		script = spec.zsh()
	case "fish":
		script = spec.fish()
	default:
		return usageError{fmt.Errorf("completion: no script for %q: the shells are bash, zsh and fish", pos[0])}
	}
	_, err = io.WriteString(stdout, script)
	return err
}

// compSpec is what the scripts complete, read from the command table.
type compSpec struct {
	cmds []compCommand
	// valueFlags are the names of the flags that take a value, in any
	// command (a name means the same kind of flag in every command).
	valueFlags []string
}

type compCommand struct {
	name, summary string
	flags         []flagDoc
	args          []string
}

// Kinds of flag value the scripts complete.
const (
	valueFile   = "file"
	valueJob    = "job"
	valueStatus = "status"
	valueRole   = "role"
	valueOther  = ""
)

// flagValueKind says what the value of a flag completes to.
func flagValueKind(name string) string {
	switch name {
	case "config", "socket", "payload-file", "token-file", "out":
		return valueFile
	case "job":
		return valueJob
	case "status":
		return valueStatus
	case "role":
		return valueRole
	}
	return valueOther
}

func completionSpec() (*compSpec, error) {
	spec := &compSpec{}
	takesValue := map[string]bool{}
	for _, c := range commands {
		fs, err := commandFlags(c)
		if err != nil {
			return nil, err
		}
		cc := compCommand{name: c.name, summary: strings.ReplaceAll(c.forms[0].summary, "\n", " "), flags: flagDocs(fs, false), args: c.args}
		for _, f := range cc.flags {
			v, seen := takesValue[f.name]
			if seen && v != (f.metavar != "") {
				return nil, fmt.Errorf("completion: flag %s takes a value in one command and not in another", f.spelled())
			}
			takesValue[f.name] = f.metavar != ""
		}
		spec.cmds = append(spec.cmds, cc)
	}
	for name, v := range takesValue {
		if v {
			spec.valueFlags = append(spec.valueFlags, name)
		}
	}
	slices.Sort(spec.valueFlags)
	return spec, nil
}

func (s *compSpec) names() []string {
	var ns []string
	for _, c := range s.cmds {
		ns = append(ns, c.name)
	}
	return ns
}

// spellings are the ways Go's flag package accepts a flag: -name and --name.
func spellings(name string) []string { return []string{"-" + name, "--" + name} }

func roleWords() string { return strings.Join(config.TokenRoles, " ") }

func statusWords() string {
	var ws []string
	for _, st := range jobs.Statuses {
		ws = append(ws, string(st))
	}
	return strings.Join(ws, " ")
}

// flagsOfKind returns a case pattern of the spellings of the value flags
// of a kind.
func (s *compSpec) flagsOfKind(kind string) string {
	var out []string
	for _, n := range s.valueFlags {
		if flagValueKind(n) == kind {
			out = append(out, spellings(n)...)
		}
	}
	return casePattern(out)
}

// casePattern joins words into a pattern of a bash case arm; none makes a
// pattern that no word matches.
func casePattern(words []string) string {
	if len(words) == 0 {
		return "--schedulerd-none--"
	}
	return strings.Join(words, " | ")
}

// clientValuePattern is a case pattern of the spellings of the client
// flags that take a value, which may come before the command.
func clientValuePattern() string {
	var out []string
	for _, d := range clientFlagDocs() {
		if d.metavar != "" {
			out = append(out, spellings(d.name)...)
		}
	}
	return casePattern(out)
}

// zshClientPattern is a zsh case pattern of the spellings of the client
// flags that take a value and that keep.
func zshClientPattern(keep func(flagDoc) bool) string {
	var out []string
	for _, d := range clientFlagDocs() {
		if d.metavar != "" && keep(d) {
			out = append(out, spellings(d.name)...)
		}
	}
	if len(out) == 0 {
		return "--schedulerd-none--"
	}
	return strings.Join(out, "|")
}

// clientFlagWords are the client flags as they are offered before the
// command.
func clientFlagWords() string {
	var out []string
	for _, d := range clientFlagDocs() {
		out = append(out, d.spelled())
	}
	return strings.Join(out, " ")
}

const compHeader = `%s completion for schedulerd %s, made by "schedulerd completion %s" from
# its commands and flags. Job names and run ids come from the running
# daemon (schedulerd jobs --json, schedulerd runs --json), asked with the
# --socket, --config, --api and --token-file of the line being completed.
`

func (s *compSpec) bash() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# "+compHeader, "bash", currentBuild().Version, "bash")
	fmt.Fprintf(&b, `
# _schedulerd_query jobs|runs prints the names of the daemon's jobs or the
# ids of its latest runs.
_schedulerd_query() {
	local i w conn=() limit=() field=name
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-socket | --socket | -config | --config | -api | --api | -token-file | --token-file)
			if [[ ${COMP_WORDS[i+1]} == = ]]; then
				conn+=("$w=${COMP_WORDS[i+2]}")
			else
				conn+=("$w" "${COMP_WORDS[i+1]}")
			fi
			;;
		esac
	done
	if [[ $1 == runs ]]; then
		field=id
		limit=(--limit 100)
	fi
	local timeout=()
	command -v timeout >/dev/null && timeout=(timeout 5)
	"${timeout[@]}" "${COMP_WORDS[0]}" "$1" --json "${limit[@]}" "${conn[@]}" 2>/dev/null |
		sed -n "s/^{\"$field\":\"\([^\"]*\)\".*/\1/p"
}

_schedulerd() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	# The command is the first word that is neither a client flag, which
	# may come before it, nor such a flag's value.
	local i ci=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		%s)
			((i++))
			[[ ${COMP_WORDS[i]} == = ]] && ((i++))
			;;
		-*) ;;
		*)
			ci=$i
			break
			;;
		esac
	done
	# --flag=value: COMP_WORDBREAKS splits it into --flag, = and value.
	if [[ $cur == = ]]; then
		cur=
	elif [[ $prev == = ]] && ((COMP_CWORD > 2)); then
		prev=${COMP_WORDS[COMP_CWORD-2]}
	fi
	case $prev in
	%s)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	%s)
		mapfile -t COMPREPLY < <(compgen -W "$(_schedulerd_query jobs)" -- "$cur")
		return
		;;
	%s)
		mapfile -t COMPREPLY < <(compgen -W %q -- "$cur")
		return
		;;
	%s)
		mapfile -t COMPREPLY < <(compgen -W %q -- "$cur")
		return
		;;
	%s)
		return
		;;
	esac
	if ((ci == 0)); then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W %q -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W %q -- "$cur")
		fi
		return
	fi
	local cmd=${COMP_WORDS[ci]}
	if [[ $cur == -* ]]; then
		local flags=
		case $cmd in
`, clientValuePattern(),
		s.flagsOfKind(valueFile), s.flagsOfKind(valueJob),
		s.flagsOfKind(valueStatus), statusWords(), s.flagsOfKind(valueRole), roleWords(), s.flagsOfKind(valueOther),
		clientFlagWords(), strings.Join(s.names(), " "))
	for _, c := range s.cmds {
		var fl []string
		for _, f := range c.flags {
			fl = append(fl, f.spelled())
		}
		if len(fl) > 0 {
			fmt.Fprintf(&b, "\t\t%s) flags=%q ;;\n", c.name, strings.Join(fl, " "))
		}
	}
	var valueSpellings []string
	for _, n := range s.valueFlags {
		valueSpellings = append(valueSpellings, spellings(n)...)
	}
	fmt.Fprintf(&b, `		esac
		mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
		return
	fi
	# Which positional argument is being typed: count those before it,
	# skipping flags and the values of the flags that take one.
	local n=0
	for ((i = ci + 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		%s)
			((i++))
			[[ ${COMP_WORDS[i]} == = ]] && ((i++))
			;;
		-*) ;;
		*) ((n++)) ;;
		esac
	done
	case "$cmd $n" in
`, casePattern(valueSpellings))
	arms := map[string][]string{}
	var order []string
	for _, c := range s.cmds {
		for i, a := range c.args {
			if a == "" {
				continue
			}
			if _, ok := arms[a]; !ok {
				order = append(order, a)
			}
			arms[a] = append(arms[a], fmt.Sprintf("%q", fmt.Sprintf("%s %d", c.name, i)))
		}
	}
	for _, a := range order {
		var words string
		switch a {
		case argJob:
			words = `"$(_schedulerd_query jobs)"`
		case argRun:
			words = `"$(_schedulerd_query runs)"`
		case argCommand:
			words = fmt.Sprintf("%q", strings.Join(s.names(), " "))
		default:
			words = fmt.Sprintf("%q", a)
		}
		fmt.Fprintf(&b, "\t%s)\n\t\tmapfile -t COMPREPLY < <(compgen -W %s -- \"$cur\")\n\t\t;;\n", strings.Join(arms[a], " | "), words)
	}
	b.WriteString("\tesac\n}\n\ncomplete -F _schedulerd schedulerd\n")
	return b.String()
}

// zshQuote quotes s for zsh in single quotes.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shortUsage is the first clause of a flag's usage, for menus.
func shortUsage(u string) string {
	for _, sep := range []string{"; ", " (", ": "} {
		if i := strings.Index(u, sep); i > 0 {
			u = u[:i]
		}
	}
	return u
}

func (s *compSpec) zsh() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef schedulerd\n\n# "+compHeader, "zsh", currentBuild().Version, "zsh")
	fmt.Fprintf(&b, `
# _schedulerd_query jobs|runs prints the names of the daemon's jobs or the
# ids of its latest runs; prog and conn are set by _schedulerd.
_schedulerd_query() {
	local field=name
	local -a limit
	if [[ $1 == runs ]]; then
		field=id
		limit=(--limit 100)
	fi
	${~prog} $1 --json $limit $conn 2>/dev/null | sed -n "s/^{\"$field\":\"\([^\"]*\)\".*/\1/p"
}

_schedulerd_jobs() {
	local -a names
	names=(${(f)"$(_schedulerd_query jobs)"})
	compadd -a names
}

_schedulerd_runs() {
	local -a ids
	ids=(${(f)"$(_schedulerd_query runs)"})
	compadd -a ids
}

_schedulerd() {
	local prog=$words[1] ret=1 i
	local -a conn
	for (( i = 2; i < CURRENT; i++ )); do
		case $words[i] in
		(-socket|--socket|-config|--config|-api|--api|-token-file|--token-file) conn+=($words[i] $words[i+1]) ;;
		(-socket=*|--socket=*|-config=*|--config=*|-api=*|--api=*|-token-file=*|--token-file=*) conn+=($words[i]) ;;
		esac
	done
	# The command is the first word that is neither a client flag, which
	# may come before it, nor such a flag's value.
	local ci=0
	for (( i = 2; i < CURRENT; i++ )); do
		case $words[i] in
		(%s) (( i++ )) ;;
		(-*) ;;
		(*) ci=$i; break ;;
		esac
	done
	if (( ci == 0 )); then
		case $words[CURRENT-1] in
		(%s) _files; return ;;
		(%s) return 1 ;;
		esac
		if [[ $PREFIX == -* ]]; then
			compadd -- %s && ret=0
			return ret
		fi
		local -a cmds
		cmds=(
`, zshClientPattern(func(flagDoc) bool { return true }),
		zshClientPattern(func(d flagDoc) bool { return flagValueKind(d.name) == valueFile }),
		zshClientPattern(func(d flagDoc) bool { return flagValueKind(d.name) != valueFile }), clientFlagWords())
	for _, c := range s.cmds {
		fmt.Fprintf(&b, "\t\t\t%s\n", zshQuote(c.name+":"+c.summary))
	}
	b.WriteString(`		)
		_describe -t commands 'schedulerd command' cmds && ret=0
		return ret
	fi
	local cmd=$words[ci]
	words=(${words[ci,-1]})
	(( CURRENT -= ci - 1 ))
	case $cmd in
`)
	for _, c := range s.cmds {
		var specs []string
		for _, f := range c.flags {
			desc := strings.NewReplacer(`[`, `\[`, `]`, `\]`).Replace(shortUsage(f.usage))
			if f.metavar == "" {
				specs = append(specs, zshQuote(f.spelled()+"["+desc+"]"))
				continue
			}
			action := " "
			switch flagValueKind(f.name) {
			case valueFile:
				action = "_files"
			case valueJob:
				action = "_schedulerd_jobs"
			case valueStatus:
				action = "(" + statusWords() + ")"
			case valueRole:
				action = "(" + roleWords() + ")"
			}
			specs = append(specs, zshQuote(f.spelled()+"=["+desc+"]:"+f.metavar+":"+action))
		}
		for i, a := range c.args {
			var spec string
			switch a {
			case "":
				continue
			case argJob:
				spec = ":job:_schedulerd_jobs"
			case argRun:
				spec = ":run id:_schedulerd_runs"
			case argCommand:
				spec = ":command:(" + strings.Join(s.names(), " ") + ")"
			default:
				spec = ":argument:(" + a + ")"
			}
			specs = append(specs, zshQuote(fmt.Sprint(i+1)+spec))
		}
		if len(specs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\t(%s)\n\t\t_arguments \\\n\t\t\t%s && ret=0\n\t\t;;\n", c.name, strings.Join(specs, " \\\n\t\t\t"))
	}
	b.WriteString(`	esac
	return ret
}

if [[ $funcstack[1] == _schedulerd ]]; then
	_schedulerd "$@"
else
	compdef _schedulerd schedulerd
fi
`)
	return b.String()
}

// clientValueFishPattern is the spellings of the client flags that take a
// value, as the cases of a fish switch.
func clientValueFishPattern() string {
	var out []string
	for _, d := range clientFlagDocs() {
		if d.metavar != "" {
			for _, sp := range spellings(d.name) {
				out = append(out, fishQuote(sp))
			}
		}
	}
	return strings.Join(out, " ")
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func (s *compSpec) fish() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# "+compHeader, "fish", currentBuild().Version, "fish")
	var valuePatterns []string
	for _, n := range s.valueFlags {
		for _, sp := range spellings(n) {
			valuePatterns = append(valuePatterns, fishQuote(sp))
		}
	}
	fmt.Fprintf(&b, `
# __schedulerd_query jobs|runs prints the names of the daemon's jobs or the
# ids of its latest runs.
function __schedulerd_query
    set -l tokens (commandline -opc)
    set -l conn
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case -socket --socket -config --config -api --api -token-file --token-file
                set -l j (math $i + 1)
                if test $j -le (count $tokens)
                    set conn $conn $tokens[$i] $tokens[$j]
                end
            case '-socket=*' '--socket=*' '-config=*' '--config=*' '-api=*' '--api=*' '-token-file=*' '--token-file=*'
                set conn $conn $tokens[$i]
        end
        set i (math $i + 1)
    end
    set -l field name
    set -l limit
    if test "$argv[1]" = runs
        set field id
        set limit --limit 100
    end
    command $tokens[1] $argv[1] --json $limit $conn 2>/dev/null | string replace -rf '^\{"'$field'":"([^"]*)".*' '$1'
end

# __schedulerd_command prints the index of the command among the tokens:
# the first that is neither a client flag, which may come before it, nor
# such a flag's value. It fails when there is none yet.
function __schedulerd_command
    set -l tokens (commandline -opc)
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case %s
                set i (math $i + 2)
            case '-*'
                set i (math $i + 1)
            case '*'
                echo $i
                return 0
        end
    end
    return 1
end

function __schedulerd_no_command
    not __schedulerd_command >/dev/null
end

# __schedulerd_arg CMD N: the command is CMD and its positional argument N
# (from 0) is being typed.
function __schedulerd_arg
    set -l tokens (commandline -opc)
    set -l ci (__schedulerd_command); or return 1
    test "$tokens[$ci]" = "$argv[1]"; or return 1
    set -e tokens[1..$ci]
    set -l n 0
    set -l skip 0
    for tok in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        switch $tok
            case %s
                set skip 1
            case '-*'
            case '*'
                set n (math $n + 1)
        end
    end
    test $n = $argv[2]
end

# __schedulerd_using CMD...: the command is one of CMD.
function __schedulerd_using
    set -l tokens (commandline -opc)
    set -l ci (__schedulerd_command); or return 1
    contains -- $tokens[$ci] $argv
end

complete -c schedulerd -f
`, clientValueFishPattern(), strings.Join(valuePatterns, " "))
	for _, c := range s.cmds {
		fmt.Fprintf(&b, "complete -c schedulerd -n __schedulerd_no_command -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, f := range clientFlagDocs() {
		opt := "-l " + f.name
		switch {
		case f.metavar == "":
		case flagValueKind(f.name) == valueFile:
			opt += " -r -F"
		default:
			opt += " -x"
		}
		fmt.Fprintf(&b, "complete -c schedulerd -n __schedulerd_no_command %s -d %s\n", opt, fishQuote(shortUsage(f.usage)))
	}
	for _, c := range s.cmds {
		for _, f := range c.flags {
			opt := "-l " + f.name
			if len(f.name) == 1 {
				opt = "-s " + f.name
			}
			switch {
			case f.metavar == "":
			case flagValueKind(f.name) == valueFile:
				opt += " -r -F"
			case flagValueKind(f.name) == valueJob:
				opt += " -x -a '(__schedulerd_query jobs)'"
			case flagValueKind(f.name) == valueStatus:
				opt += " -x -a " + fishQuote(statusWords())
			case flagValueKind(f.name) == valueRole:
				opt += " -x -a " + fishQuote(roleWords())
			default:
				opt += " -x"
			}
			fmt.Fprintf(&b, "complete -c schedulerd -n '__schedulerd_using %s' %s -d %s\n", c.name, opt, fishQuote(shortUsage(f.usage)))
		}
		for i, a := range c.args {
			var words string
			switch a {
			case "":
				continue
			case argJob:
				words = "'(__schedulerd_query jobs)'"
			case argRun:
				words = "'(__schedulerd_query runs)'"
			case argCommand:
				words = fishQuote(strings.Join(s.names(), " "))
			default:
				words = fishQuote(a)
			}
			fmt.Fprintf(&b, "complete -c schedulerd -n '__schedulerd_arg %s %d' -a %s\n", c.name, i, words)
		}
	}
	return b.String()
}

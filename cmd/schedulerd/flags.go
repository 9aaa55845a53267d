package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

const defaultConfig = "/etc/schedulerd/schedulerd.toml"

// localConfig is the config that the commands reading one fall back on
// when no --config is given and defaultConfig does not exist: the one in
// the working directory, such as the example that `make run` starts the
// daemon on. run and migrate never fall back: a daemon is told its config.
const localConfig = "schedulerd.toml"

// configPath returns the config a command reads: --config when given
// (given reports whether it was), else defaultConfig, else, when that does
// not exist, ./schedulerd.toml if it exists. A local config that another
// user owns, or that every user may write, is refused: a command must not
// send a payload to a socket that someone else's file names.
func configPath(flagValue string, given bool) (string, error) {
	if given {
		return flagValue, nil
	}
	if _, err := os.Lstat(defaultConfig); !errors.Is(err, fs.ErrNotExist) {
		return defaultConfig, nil
	}
	link, err := os.Lstat(localConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return defaultConfig, nil // the error names the usual place
	}
	if err != nil {
		return "", usageError{fmt.Errorf("config: %w", err)}
	}
	target, err := os.Stat(localConfig)
	if err != nil {
		return "", usageError{fmt.Errorf("config: %w", err)}
	}
	for _, fi := range []fs.FileInfo{link, target} {
		uid := fi.Sys().(*syscall.Stat_t).Uid
		switch {
		case uid != 0 && int(uid) != os.Geteuid():
			return "", usageError{fmt.Errorf("not using ./%s (there is no %s): it belongs to uid %d, not to you or root; give --config", localConfig, defaultConfig, uid)}
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o002 != 0:
			return "", usageError{fmt.Errorf("not using ./%s (there is no %s): every user may write it (mode %04o); give --config", localConfig, defaultConfig, fi.Mode().Perm())}
		}
	}
	return localConfig, nil
}

// daemonConfigPath is the config of run and migrate: --config, else
// defaultConfig, which must exist; they never fall back on localConfig.
func daemonConfigPath(flagValue string, given bool) (string, error) {
	if _, err := os.Lstat(defaultConfig); !given && errors.Is(err, fs.ErrNotExist) {
		return "", usageError{fmt.Errorf("config: there is no %s: give --config F (run and migrate do not fall back on ./%s as the other commands do)", defaultConfig, localConfig)}
	}
	return flagValue, nil
}

// flagGiven reports whether the flag name was on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// newFlags returns a flag set whose errors are returned, not printed and exited.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses flags that may come before or after the positional
// arguments ("schedulerd trigger backup --wait") and returns the positionals.
// For -h or --help it returns a helpRequest with fs.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{fs}
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// leadingFlags splits args into the client flags that come before the
// command ("schedulerd --api URL --token-file F runs"), with the names of
// those flags, the command's name and the rest. Only the client flags may
// come first, as --flag VALUE or --flag=VALUE (one dash works too); an
// empty name means that no command follows them.
func leadingFlags(args []string) (lead, names []string, name string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || a == "--" || !strings.HasPrefix(a, "-") {
			return lead, names, a, args[i+1:], nil
		}
		flagName, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !isClientFlag(flagName) {
			return nil, nil, "", nil, usageError{fmt.Errorf("%s before the command: only the client flags (--%s) may come before it; "+
				"give the others after it (schedulerd COMMAND --help lists them)", a, strings.Join(clientFlagNames, ", --"))}
		}
		lead, names = append(lead, a), append(names, flagName)
		if flagName == "json" || hasValue {
			continue
		}
		if i+1 == len(args) {
			return nil, nil, "", nil, usageError{fmt.Errorf("%s needs a value", a)}
		}
		i++
		lead = append(lead, args[i])
	}
	return lead, names, "", nil, nil
}

// checkLeadingFlags refuses client flags given before a command that does
// not take them, naming the command.
func checkLeadingFlags(c *subcommand, names []string) error {
	if len(names) == 0 {
		return nil
	}
	fs, err := commandFlags(c)
	if err != nil {
		return err
	}
	for _, n := range names {
		if fs.Lookup(n) == nil {
			return usageError{fmt.Errorf("--%s: the command %s does not take it", n, c.name)}
		}
	}
	return nil
}

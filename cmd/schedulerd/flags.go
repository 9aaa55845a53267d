package main

import (
	"errors"
	"flag"
	"io"
)

const defaultConfig = "/etc/schedulerd/schedulerd.toml"

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

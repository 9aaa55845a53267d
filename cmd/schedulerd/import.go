package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/schedulerd/schedulerd/crontab"
)

// cmdImportCrontab prints the translation of a crontab (package crontab)
// and its warnings.
func cmdImportCrontab(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import-crontab")
	user := fs.String("user", "", "read FILE as the crontab of the user `NAME` (no user column); its jobs run as NAME")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("import-crontab: give one crontab FILE, or - for standard input")}
	}
	if err := crontab.CheckUser(*user); err != nil {
		return usageError{fmt.Errorf("import-crontab: --user: %w", err)}
	}
	data, err := readCrontab(pos[0])
	if err != nil {
		return err
	}
	tr, err := crontab.Translate(data, crontab.Options{File: pos[0], User: *user})
	if err != nil {
		return usageError{fmt.Errorf("import-crontab: %w", err)}
	}
	if _, err := io.WriteString(stdout, tr.TOML); err != nil {
		return err
	}
	for _, w := range tr.Warnings {
		fmt.Fprintln(stderr, "schedulerd: warning: import-crontab: "+w)
	}
	return nil
}

// readCrontab reads file, or standard input for "-", up to crontab.MaxSize.
func readCrontab(file string) ([]byte, error) {
	r := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("import-crontab: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, crontab.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("import-crontab: read %s: %w", file, err)
	}
	if len(data) > crontab.MaxSize {
		return nil, usageError{fmt.Errorf("import-crontab: %s is larger than %d MiB", file, crontab.MaxSize>>20)}
	}
	return data, nil
}

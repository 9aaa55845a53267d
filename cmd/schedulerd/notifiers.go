package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/command"
	notifypkg "github.com/schedulerd/schedulerd/notify"
)

// maxSecretFile bounds a notifier's secret_file.
const maxSecretFile = 4096

// notifierTargets are the config's notifiers as the scheduler resolves
// the notifier names of expectations by them.
func notifierTargets(cfg *config.Config) []jobs.NotifyTarget {
	out := make([]jobs.NotifyTarget, len(cfg.Notifiers))
	for i := range cfg.Notifiers {
		out[i] = cfg.Notifiers[i].Target()
	}
	return out
}

// notifyTargets makes the delivery targets of the config's notifiers,
// reading their secret files and checking their users. Any problem is an
// error naming the file and the notifier: it stops the start, or rejects
// the reload.
func notifyTargets(cfg *config.Config) (map[string]*notifypkg.Target, []string, error) {
	targets := make(map[string]*notifypkg.Target, len(cfg.Notifiers))
	var (
		errs     []error
		warnings []string
	)
	for i := range cfg.Notifiers {
		n := &cfg.Notifiers[i]
		t := &notifypkg.Target{Name: n.Name, Webhook: n.Webhook, Argv: n.Command, Shell: n.Shell, User: n.User, Timeout: n.Timeout}
		if n.BodyTemplate != "" {
			tmpl, err := config.ParseBodyTemplate(n.BodyTemplate)
			if err != nil { // checked by config: a bug if it fails here
				errs = append(errs, fmt.Errorf("%s: notifier %q: body_template: %w", cfg.Path, n.Name, err))
				continue
			}
			t.Body = tmpl
		}
		if n.SecretFile != "" {
			secret, warn, err := readSecretFile(n.SecretFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: notifier %q: secret_file: %w", cfg.Path, n.Name, err))
				continue
			}
			if warn != "" {
				warnings = append(warnings, fmt.Sprintf("notifier %q: secret_file: %s", n.Name, warn))
			}
			t.Secret = secret
		}
		if n.User != "" {
			if err := command.CheckSwitch(n.User); err != nil {
				errs = append(errs, fmt.Errorf("%s: notifier %q: user: %w", cfg.Path, n.Name, err))
				continue
			}
		}
		targets[n.Name] = t
	}
	return targets, warnings, errors.Join(errs...)
}

// readSecretFile reads the key of a webhook's signatures: the file's
// content without its final line end. It must be a regular file (a
// symbolic link is not followed), owned by the daemon's user or root, and
// neither readable nor writable by every user: the key forges signatures.
// A file its group may read draws a warning.
func readSecretFile(path string) (secret []byte, warning string, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, "", fmt.Errorf("%s is a symbolic link; name the file itself", path)
		}
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	perm := fi.Mode().Perm()
	switch {
	case !fi.Mode().IsRegular():
		return nil, "", fmt.Errorf("%s is not a regular file", path)
	case perm&0o006 != 0:
		return nil, "", fmt.Errorf("%s may be read or written by every user (mode %04o): the secret signs notifications; chmod 600 it", path, perm)
	case perm&0o020 != 0:
		return nil, "", fmt.Errorf("%s may be written by its group (mode %04o); chmod 600 it", path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return nil, "", fmt.Errorf("%s is owned by uid %d, neither root nor the daemon's user: whoever owns it controls the secret", path, st.Uid)
	}
	if perm&0o040 != 0 {
		warning = fmt.Sprintf("%s is readable by its group (mode %04o): every member can sign notifications", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, "", err
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	switch {
	case len(b) > maxSecretFile:
		return nil, "", fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	case len(b) == 0:
		return nil, "", fmt.Errorf("%s is empty", path)
	}
	return b, warning, nil
}

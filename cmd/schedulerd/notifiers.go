package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
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
			secret, warns, err := notifierSecret(cfg, n, false)
			warnings = append(warnings, warns...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			t.Secret = secret
		}
		if n.MailTo != nil {
			m, warns, err := mailTarget(cfg, n, false)
			warnings = append(warnings, warns...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			t.Mail = m
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

// secretKind says what a secret file holds, for its messages.
type secretKind struct {
	key string // the config key that names it
	// harm is what anyone who reads the file can do.
	harm string
}

var (
	webhookSecret = secretKind{key: "secret_file", harm: "sign notifications"}
	smtpPassword  = secretKind{key: "smtp_password_file", harm: "send mail as the SMTP user"}
)

// notifierSecret reads notifier n's secret_file, by the daemon's rules, or
// by check-config's (offline): its errors and warnings name the config file
// and the notifier.
func notifierSecret(cfg *config.Config, n *config.Notifier, offline bool) ([]byte, []string, error) {
	return readNotifierSecret(cfg, n, webhookSecret, n.SecretFile, offline)
}

// readNotifierSecret reads a secret file of notifier n, its errors and
// warnings prefixed with the config file, the notifier and the key.
func readNotifierSecret(cfg *config.Config, n *config.Notifier, kind secretKind, path string, offline bool) ([]byte, []string, error) {
	secret, warns, err := readSecretFile(path, kind, offline)
	for i, w := range warns {
		warns[i] = fmt.Sprintf("notifier %q: %s: %s", n.Name, kind.key, w)
	}
	if err != nil {
		return nil, warns, fmt.Errorf("%s: notifier %q: %s: %w", cfg.Path, n.Name, kind.key, err)
	}
	return secret, warns, nil
}

// mailTarget makes the mail target of notifier n: its server, its
// sender (schedulerd@ and the host's name when mail_from is left out) and
// its password, read from smtp_password_file by the rules of a
// secret_file. Offline (check-config) it checks the same, by check-config's
// rules, and returns no target. A server in the .invalid domain, which
// import-crontab writes for the reader to fill in, draws a warning.
func mailTarget(cfg *config.Config, n *config.Notifier, offline bool) (*notifypkg.Mail, []string, error) {
	srv, err := config.ParseSMTP(n.SMTP)
	if err != nil { // checked by config: a bug if it fails here
		return nil, nil, fmt.Errorf("%s: notifier %q: smtp: %w", cfg.Path, n.Name, err)
	}
	var warnings []string
	if host := strings.ToLower(strings.TrimSuffix(srv.Host, ".")); host == "invalid" || strings.HasSuffix(host, ".invalid") {
		warnings = append(warnings, fmt.Sprintf("notifier %q: smtp: %s is a name that never resolves (.invalid): write the SMTP server that takes this host's mail; until then every mail fails",
			n.Name, srv.Host))
	}
	from := n.MailFrom
	if from == "" {
		host, err := os.Hostname()
		if err == nil {
			from = "schedulerd@" + host
		}
		if err != nil || !config.ValidMailAddress(from) {
			return nil, warnings, fmt.Errorf("%s: notifier %q: mail_from: left out, and the host's name %q makes no address of schedulerd@ and it: set mail_from",
				cfg.Path, n.Name, host)
		}
	}
	m := &notifypkg.Mail{To: n.MailTo, From: from, Host: srv.Host, Port: srv.Port, ImplicitTLS: srv.ImplicitTLS,
		User: n.SMTPUser, Insecure: n.SMTPInsecure}
	if n.SMTPPasswordFile != "" {
		password, warns, err := readNotifierSecret(cfg, n, smtpPassword, n.SMTPPasswordFile, offline)
		warnings = append(warnings, warns...)
		if err != nil {
			return nil, warnings, err
		}
		m.Password = password
	}
	if offline {
		return nil, warnings, nil
	}
	return m, warnings, nil
}

// checkSecretFiles checks the secret files and mail settings of the
// config's notifiers for check-config, as the daemon reads them at start
// (see readSecretFile and mailTarget).
func checkSecretFiles(cfg *config.Config) ([]string, error) {
	var (
		errs     []error
		warnings []string
	)
	for i := range cfg.Notifiers {
		n := &cfg.Notifiers[i]
		var (
			warns []string
			err   error
		)
		switch {
		case n.SecretFile != "":
			_, warns, err = notifierSecret(cfg, n, true)
		case n.MailTo != nil:
			_, warns, err = mailTarget(cfg, n, true)
		}
		warnings = append(warnings, warns...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return warnings, errors.Join(errs...)
}

// readSecretFile reads a secret of a notifier (the key of a webhook's
// signatures, an SMTP password): the file's content without its final
// line end. It must be a regular file (a
// symbolic link is not followed), owned by the daemon's user or root, and
// neither readable nor writable by every user: whoever reads it can do
// kind's harm.
// A file its group may read draws a warning.
//
// Offline (check-config) it checks the same, as the user that runs
// check-config, who may not be the daemon's: where the answer depends on
// that user, it warns instead of refusing. A file owned by another user is
// fine if the daemon runs as that one (the packaged unit runs as
// schedulerd, check-config is often run by root), and a file this user may
// not open is checked by its metadata only.
func readSecretFile(path string, kind secretKind, offline bool) (secret []byte, warnings []string, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("%s is a symbolic link; name the file itself", path)
	}
	if offline && errors.Is(err, fs.ErrPermission) {
		unread := fmt.Sprintf("%s cannot be read by uid %d, which runs check-config: its content is not checked; run check-config as the daemon's user to check it",
			path, os.Geteuid())
		fi, lerr := os.Lstat(path)
		if lerr != nil { // a directory on the way that this user may not search
			return nil, []string{unread}, nil
		}
		if warnings, err = checkSecretMode(path, fi, kind, offline); err != nil {
			return nil, nil, err
		}
		return nil, append(warnings, unread), nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if warnings, err = checkSecretMode(path, fi, kind, offline); err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, nil, err
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	switch {
	case len(b) > maxSecretFile:
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	case len(b) == 0:
		return nil, nil, fmt.Errorf("%s is empty", path)
	}
	return b, warnings, nil
}

// checkSecretMode checks a secret file's type, mode and owner (see
// readSecretFile).
func checkSecretMode(path string, fi fs.FileInfo, kind secretKind, offline bool) (warnings []string, err error) {
	perm := fi.Mode().Perm()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symbolic link; name the file itself", path)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case perm&0o006 != 0:
		return nil, fmt.Errorf("%s may be read or written by every user (mode %04o): whoever reads it can %s; chmod 600 it", path, perm, kind.harm)
	case perm&0o020 != 0:
		return nil, fmt.Errorf("%s may be written by its group (mode %04o); chmod 600 it", path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		if !offline {
			return nil, fmt.Errorf("%s is owned by uid %d, neither root nor the daemon's user: whoever owns it controls the secret", path, st.Uid)
		}
		warnings = append(warnings, fmt.Sprintf("%s is owned by uid %d, neither root nor uid %d, which runs check-config: the daemon accepts it only if it runs as uid %d",
			path, st.Uid, os.Geteuid(), st.Uid))
	}
	if perm&0o040 != 0 {
		warnings = append(warnings, fmt.Sprintf("%s is readable by its group (mode %04o): every member can %s", path, perm, kind.harm))
	}
	return warnings, nil
}

// checkUsers checks, for check-config, that the daemon may run the
// config's jobs and notifiers as their users (config.Load has refused an
// unknown one, with its line). That depends on the daemon's user, not on
// the one running check-config: when check-config does not run as root, a
// user other than its own draws a warning where run would refuse.
func checkUsers(cfg *config.Config) (warnings []string) {
	check := func(what, name string) {
		if name == "" || command.CheckSwitch(name) == nil {
			return
		}
		as := "root"
		if name != "root" {
			as = "root or as " + name
		}
		warnings = append(warnings, fmt.Sprintf("%s: user %q: the daemon can run it only if it runs as %s", what, name, as))
	}
	for _, d := range cfg.Jobs {
		check(fmt.Sprintf("job %q", d.Name), d.User)
	}
	for i := range cfg.Notifiers {
		check(fmt.Sprintf("notifier %q", cfg.Notifiers[i].Name), cfg.Notifiers[i].User)
	}
	return warnings
}

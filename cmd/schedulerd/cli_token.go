package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/schedulerd/schedulerd/config"
)

// tokenPrefix starts every token `token new` makes, so that a token is
// told from other secrets at a glance and by secret scanners.
const tokenPrefix = "sd_"

// cmdToken runs `token new NAME --role ROLE [--out FILE]`: it makes a
// token of 32 random bytes and prints the [[token]] table that declares it
// by its SHA-256. The token goes to FILE alone, a new file of mode 0600,
// or without --out on the line before the table: the operator keeps it.
func cmdToken(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("token")
	role := fs.String("role", "", "what the token may do, `ROLE`: read (listings, runs, output, metrics), operate (read, and trigger, cancel, rerun, backfill, pause, resume, forget) or admin (operate, and reload)")
	out := fs.String("out", "", "write the token alone to `FILE`, a new file of mode 0600 (an existing file or a symlink is refused), and print only the table")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	const usage = "usage: schedulerd token new NAME --role read|operate|admin [--out FILE]"
	if len(pos) != 2 || pos[0] != "new" {
		return usageError{errors.New(usage)}
	}
	name := pos[1]
	switch {
	case !config.ValidTokenName(name):
		return usageError{fmt.Errorf("token new: %q is not a valid token name: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", name)}
	case *role == "":
		return usageError{fmt.Errorf("token new: give --role: %s", strings.Join(config.TokenRoles, ", "))}
	case !slices.Contains(config.TokenRoles, *role):
		return usageError{fmt.Errorf("token new: --role must be one of %s, got %q", strings.Join(config.TokenRoles, ", "), *role)}
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	head := token + `

# The token above is shown this once: keep it in a file only its user can
# read, for schedulerd --api URL --token-file FILE.`
	if *out != "" {
		if err := writeTokenFile(*out, token); err != nil {
			return err
		}
		head = fmt.Sprintf(`# The token is in %s (mode 0600) and nowhere else: use it with
# schedulerd --api URL --token-file %s.`, *out, *out)
	}
	_, err = fmt.Fprintf(stdout, `%s Add this table to the
# config, then reload (schedulerd reload); the config holds its SHA-256 alone.
[[token]]
name = %q
role = %q
sha256 = "%x"
`, head, name, *role, sha256.Sum256([]byte(token)))
	return err
}

// writeTokenFile writes token and a line end to path, a file it creates
// of mode 0600 whatever the umask. An existing file is refused, and so is
// a symlink at path, even one to nothing (O_EXCL): the token must go
// nowhere but a new file of the caller's. A file half written is removed.
func writeTokenFile(path, token string) error {
	if strings.ContainsAny(path, "\r\n") {
		return usageError{fmt.Errorf("token new: --out %q: a file name with a line break", path)}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		what := "exists"
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			what = "is a symlink, which is not followed"
		}
		return usageError{fmt.Errorf("token new: --out %s %s: the token goes to a new file only; remove it or name another", path, what)}
	}
	if err != nil {
		return usageError{fmt.Errorf("token new: --out: %w", err)}
	}
	err = f.Chmod(0o600) // the umask may have narrowed it, never widened
	if err == nil {
		_, err = f.WriteString(token + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("token new: --out: %w", err)
	}
	return nil
}

// newToken returns a token of 32 random bytes, 256 bits that nobody
// guesses, in URL-safe base64 after tokenPrefix.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token new: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

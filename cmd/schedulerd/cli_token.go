package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/schedulerd/schedulerd/config"
)

// tokenPrefix starts every token `token new` makes, so that a token is
// told from other secrets at a glance and by secret scanners.
const tokenPrefix = "sd_"

// cmdToken runs `token new NAME --role ROLE`: it makes a token of 32
// random bytes and prints it once, then the [[token]] table that declares
// it by its SHA-256. The token is in no file: the operator keeps it.
func cmdToken(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("token")
	role := fs.String("role", "", "what the token may do, `ROLE`: read (listings, runs, output, metrics), operate (read, and trigger, cancel, rerun, pause, resume, forget) or admin (operate, and reload)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	const usage = "usage: schedulerd token new NAME --role read|operate|admin"
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
	_, err = fmt.Fprintf(stdout, `%s

# The token above is shown this once: keep it in a file only its user can
# read, for schedulerd --api URL --token-file FILE. Add this table to the
# config, then reload (schedulerd reload); the config holds its SHA-256 alone.
[[token]]
name = %q
role = %q
sha256 = "%x"
`, token, name, *role, sha256.Sum256([]byte(token)))
	return err
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

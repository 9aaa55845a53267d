package crontab

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// syntaxTimeout bounds one check of a command's syntax.
const syntaxTimeout = 10 * time.Second

// checkSyntax returns why cmd is no valid command line for shell, as
// "SHELL -n" reads it, or "" when it is valid or cannot be checked: the
// shell is not a POSIX shell, or none of its name is on this machine's
// PATH. The check runs the shell of that name found in PATH, never the
// crontab's path, with the command on its standard input (no argument
// length limit) and an empty environment (no ENV or BASH_ENV file is
// read); -n reads commands without running any.
func checkSyntax(shell, cmd string) string {
	name := path.Base(shell)
	if !posixShells[name] {
		return ""
	}
	prog, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), syntaxTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, prog, "-n")
	c.Env = []string{}
	c.Dir = "/"
	c.Stdin = strings.NewReader(cmd)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err = c.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ctx.Err() != nil {
		return ""
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
	if rest, ok := strings.CutPrefix(msg, prog+":"); ok {
		msg = name + ":" + rest
	}
	if len(msg) > 200 {
		msg = msg[:200]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "..."
	}
	if msg == "" {
		msg = name + " -n: " + ee.String()
	}
	return msg
}

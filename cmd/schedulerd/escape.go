package main

import "github.com/schedulerd/schedulerd/internal/termtext"

// escapeText is termtext.Escape: what a job or a caller chose is printed
// so that it cannot drive the operator's terminal (runs show --raw
// prints it as stored).
func escapeText(s string, multiline bool) string { return termtext.Escape(s, multiline) }

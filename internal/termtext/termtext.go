// Package termtext owns the escaping of text that a job or a caller chose
// (output, payload, dedup id, progress messages, errors) before the
// command line prints it to an operator's terminal.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every character that a terminal acts on
// written as a visible escape: C0 controls but tab (and newline when
// multiline), DEL, C1 controls, the Unicode controls that reorder or hide
// text (bidirectional overrides and isolates, zero-width marks), and bytes
// that are not UTF-8. A single-line field escapes newlines too, so that it
// cannot forge the lines after it. The result cannot drive a terminal: no
// window titles, cleared screens, cursor moves or lines forged with a
// carriage return.
func Escape(s string, multiline bool) string {
	if IsPlain(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t', r == '\n' && multiline:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isFormatControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// IsPlain reports whether s needs no escape: the common case, checked
// without allocating.
func IsPlain(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && !(c == '\n' && multiline)) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isFormatControl(r) {
			return false
		}
		i += size
	}
	return true
}

// isFormatControl reports the non-ASCII characters a terminal acts on or
// that change how the text around them reads: C1 controls (0x9b is CSI on
// terminals that take 8-bit controls), bidirectional embeddings,
// overrides and isolates, and zero-width characters.
func isFormatControl(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x061c, r == 0xfeff:
		return true
	}
	return false
}

// Writer escapes what is written to it as Escape does a multiline text,
// and writes the result to the writer under it, piece by piece: for
// output that comes as it is written. A character split between two
// writes is held back until its end comes, and escaped whole; Flush
// writes what is held back at the end of the text.
type Writer struct {
	w    io.Writer
	held []byte // the start of a character that the next write may end
}

// NewWriter returns a Writer that writes the escaped text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p, after what was held back, and writes it on, but for
// the start of a character that p ends with.
func (e *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if len(e.held) > 0 {
		p = append(e.held, p...)
		e.held = nil
	}
	cut := Complete(p)
	if cut < len(p) {
		e.held = append([]byte(nil), p[cut:]...)
	}
	if _, err := io.WriteString(e.w, Escape(string(p[:cut]), true)); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush writes what is held back, escaped as bytes that are not UTF-8:
// the text ended within a character.
func (e *Writer) Flush() error {
	if len(e.held) == 0 {
		return nil
	}
	held := e.held
	e.held = nil
	_, err := io.WriteString(e.w, Escape(string(held), true))
	return err
}

// Complete returns the length of the longest start of p that does not end
// within a character: p but for the start of a UTF-8 sequence at its end
// whose other bytes have not come yet (at most 3 bytes). For text that
// comes in pieces, to keep a character whole.
func Complete(p []byte) int {
	for i := 1; i <= min(utf8.UTFMax-1, len(p)); i++ {
		b := p[len(p)-i]
		if b < utf8.RuneSelf {
			return len(p)
		}
		if utf8.RuneStart(b) {
			if utf8.FullRune(p[len(p)-i:]) {
				return len(p)
			}
			return len(p) - i
		}
	}
	return len(p)
}

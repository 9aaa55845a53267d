package termtext

import (
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		in        string
		multiline bool
		want      string
	}{
		{"plain text\twith tab", false, "plain text\twith tab"},
		{"two\nlines", true, "two\nlines"},
		{"two\nlines", false, `two\nlines`},
		{"\x1b]0;pwned\x07title", true, `\x1b]0;pwned\x07title`},
		{"\x1b[2J\x1b[Hclear", true, `\x1b[2J\x1b[Hclear`},
		{"ok\rforged line", true, `ok\rforged line`},
		{"del\x7f", true, `del\x7f`},
		{"c1 \u009b31m", true, `c1 \u009b31m`},
		{"bidi \u202eevil", true, `bidi \u202eevil`},
		{"zero\u200bwidth", true, `zero\u200bwidth`},
		{"bad \xff utf8", true, `bad \xff utf8`},
		{"grüße, 日本", true, "grüße, 日本"},
		// Controls after a character that is not ASCII.
		{"é\x1b]0;pwned\x07", true, `é\x1b]0;pwned\x07`},
		{"日本\rforged", true, `日本\rforged`},
		{"ü two\nlines", false, `ü two\nlines`},
		{"", true, ""},
	}
	for _, tt := range tests {
		if got := Escape(tt.in, tt.multiline); got != tt.want {
			t.Errorf("Escape(%q, %v) = %q, want %q", tt.in, tt.multiline, got, tt.want)
		}
	}
}

// FuzzEscape: whatever a job prints, the escaped text holds no byte a
// terminal acts on but newline and tab, and is valid UTF-8.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a\x1b[31mb", "\r\n", "\xff\xfe", "\u202e", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s, true)
		if !IsPlain(out, true) {
			t.Fatalf("Escape(%q) = %q still holds control characters", s, out)
		}
	})
}

// TestWriter: text written in pieces, characters split between them, is
// escaped as the whole text is.
func TestWriter(t *testing.T) {
	text := "grüße \x1b[31mred\x1b[0m 日本\r\n\u202eevil \xff end é"
	for size := 1; size <= len(text); size++ {
		var b strings.Builder
		w := NewWriter(&b)
		for i := 0; i < len(text); i += size {
			if _, err := w.Write([]byte(text[i:min(i+size, len(text))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := Escape(text, true); b.String() != want {
			t.Fatalf("in pieces of %d bytes: %q, want %q", size, b.String(), want)
		}
	}
	// A text that ends within a character: what is held back is escaped.
	var b strings.Builder
	w := NewWriter(&b)
	w.Write([]byte("ab\xe6\x97"))
	if b.String() != "ab" {
		t.Fatalf("before the end of a character: %q", b.String())
	}
	w.Flush()
	if b.String() != `ab\xe6\x97` {
		t.Fatalf("a text cut within a character: %q", b.String())
	}
}

// FuzzWriter: whatever a job prints, in whatever pieces it comes, the
// escaped text is that of the whole.
func FuzzWriter(f *testing.F) {
	f.Add("a\x1b[31mb日本", uint8(1))
	f.Add("\xe6\x97\xa5\xff", uint8(2))
	f.Fuzz(func(t *testing.T, s string, size uint8) {
		n := int(size%16) + 1
		var b strings.Builder
		w := NewWriter(&b)
		for i := 0; i < len(s); i += n {
			w.Write([]byte(s[i:min(i+n, len(s))]))
		}
		w.Flush()
		if want := Escape(s, true); b.String() != want {
			t.Fatalf("in pieces of %d: %q, want %q", n, b.String(), want)
		}
	})
}

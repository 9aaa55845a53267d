package termtext

import "testing"

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

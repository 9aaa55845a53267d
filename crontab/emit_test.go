package crontab

import (
	"testing"

	"github.com/BurntSushi/toml"
)

// TestTOMLString: every string the translation writes reads back the same.
func TestTOMLString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `with "double" quotes`, "with 'single' quotes", `both ' and "`, `back\slash`,
		"new\nline", "tab\there", "bell\a", "del\x7f", "ünïcødé €", `\u0041`, "'''", `"""`,
	} {
		var v struct{ S string }
		if _, err := toml.Decode("S = "+tomlString(s), &v); err != nil || v.S != s {
			t.Errorf("tomlString(%q) = %s, reads back as %q (%v)", s, tomlString(s), v.S, err)
		}
	}
}

package crontab

import "testing"

func TestParseEnvLine(t *testing.T) {
	for _, tc := range []struct {
		line, name, value string
		ok                bool
	}{
		{"MAILTO=paul", "MAILTO", "paul", true},
		{"SHELL = /bin/sh", "SHELL", "/bin/sh", true},
		{"A=b=c", "A", "b=c", true},
		{"A=  spaced value  ", "A", "spaced value", true},
		{`A=" kept "`, "A", " kept ", true},
		{`A=' kept '  `, "A", " kept ", true},
		{`"A B"=x`, "A B", "x", true},
		{"EMPTY=", "EMPTY", "", true},
		{`MAILTO=""`, "MAILTO", "", true},
		{`A="x" y`, "", "", false},
		{`A="x`, "A", `"x`, false},
		{"0 * * * * cmd A=b", "", "", false},
		{"@daily A=b cmd", "", "", false},
		{"=x", "", "", false},
		{"NOEQUALS", "", "", false},
	} {
		name, value, ok := parseEnvLine(tc.line)
		if ok != tc.ok || ok && (name != tc.name || value != tc.value) {
			t.Errorf("parseEnvLine(%q) = %q, %q, %v; want %q, %q, %v", tc.line, name, value, ok, tc.name, tc.value, tc.ok)
		}
	}
}

package manpage

import (
	"strings"
	"testing"
)

func TestInline(t *testing.T) {
	for _, tt := range []struct{ md, want string }{
		{`plain - text \ here`, `plain \- text \e here`},
		{"the `--config` flag", `the \fB\-\-config\fR flag`},
		{"**Its members can run `any` job**", `\fBIts members can run any job\fR`},
		{"see [fencing](cluster.md#fencing).", "see fencing."},
		{"[`[daemon]`](#daemon) and [`[[job]]`](#job)", `\fB[daemon]\fR and \fB[[job]]\fR`},
		{"`a` then **b** then `c`", `\fBa\fR then \fBb\fR then \fBc\fR`},
	} {
		if got := Inline(tt.md); got != tt.want {
			t.Errorf("Inline(%q) = %q, want %q", tt.md, got, tt.want)
		}
	}
}

// TestMarkdown: headings, paragraphs, lists, tables and code become the
// man macros; a table of contents is left out; no line of text can be
// read as a request.
func TestMarkdown(t *testing.T) {
	md := "# Title\n\nIntro `x`,\nwrapped.\n\n- [a](#a)\n- [b](#b): [c](#c)\n\n## `[daemon]`\n\n" +
		"| key | default | meaning |\n|---|---|---|\n| `node_id` | the hostname | its name. |\n| `a`, `b` | `1` | pair |\n\n" +
		"### Sub\n\n- one\n  more\n- two\n\n```toml\n.not a request\n  kept = \"-\"\n```\n'quoted start\n"
	var w Writer
	w.Markdown(md)
	want := `.PP
Intro \fBx\fR, wrapped.
.SH "[daemon]"
.TP
\fBnode_id\fR
\fIdefault:\fR the hostname
.br
its name.
.TP
\fBa\fR, \fBb\fR
\fIdefault:\fR \fB1\fR
.br
pair
.SS "Sub"
.IP \(bu 2
one more
.IP \(bu 2
two
.PP
.RS 4
.nf
.ft CR
\&.not a request
  kept = "\-"
.ft
.fi
.RE
.PP
\&'quoted start
`
	if got := w.String(); got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestHeaderQuotes(t *testing.T) {
	var w Writer
	w.Header("X", "5", "2026-01-02", `x "1"`, "File Formats")
	w.Section(`a "b"`)
	got := w.String()
	for _, want := range []string{`.TH "X" 5 "2026\-01\-02" "x \(dq1\(dq" "File Formats"`, `.SH "a \(dqb\(dq"`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("page lacks %q:\n%s", want, got)
		}
	}
}

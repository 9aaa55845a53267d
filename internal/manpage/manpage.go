package manpage

import (
	"fmt"
	"regexp"
	"strings"
)

// Writer accumulates a page.
type Writer struct {
	b strings.Builder
}

// String returns the page.
func (w *Writer) String() string { return w.b.String() }

// Header starts the page: its title (upper case by custom), section, date,
// source (the program and version) and manual.
func (w *Writer) Header(title, section, date, source, manual string) {
	fmt.Fprintf(&w.b, ".TH %s %s %s %s %s\n", quote(title), section, quote(date), quote(source), quote(manual))
	// Flags and paths are not hyphenated, nor lines stretched to the margin.
	w.b.WriteString(".nh\n.ad l\n")
}

// Section starts a section (.SH).
func (w *Writer) Section(title string) { w.request("SH", title) }

// Subsection starts a subsection (.SS).
func (w *Writer) Subsection(title string) { w.request("SS", title) }

// Para starts a paragraph of roff text (see Text, Bold, Inline).
func (w *Writer) Para(roff string) {
	w.b.WriteString(".PP\n")
	w.lines(roff)
}

// Tagged writes a tagged paragraph (.TP): the tag on its line, then the
// body, both roff text. More body paragraphs may follow with More.
func (w *Writer) Tagged(tag, body string) {
	w.b.WriteString(".TP\n")
	w.lines(tag)
	if body != "" {
		w.lines(body)
	}
}

// More continues a tagged paragraph or a list item with another paragraph
// at the same indent.
func (w *Writer) More(roff string) {
	w.b.WriteString(".IP\n")
	w.lines(roff)
}

// Bullet writes a list item.
func (w *Writer) Bullet(roff string) {
	w.b.WriteString(".IP \\(bu 2\n")
	w.lines(roff)
}

// Line writes roff text as a line of its own: with Break, lines of a
// synopsis.
func (w *Writer) Line(roff string) { w.lines(roff) }

// Break ends the output line (.br).
func (w *Writer) Break() { w.b.WriteString(".br\n") }

// Indent and Outdent move the left margin in and back (.RS, .RE).
func (w *Writer) Indent()  { w.b.WriteString(".RS\n") }
func (w *Writer) Outdent() { w.b.WriteString(".RE\n") }

// Code writes lines verbatim in a fixed-width font, indented.
func (w *Writer) Code(lines []string) {
	w.b.WriteString(".PP\n.RS 4\n.nf\n.ft CR\n")
	for _, l := range lines {
		w.lines(Text(l))
	}
	w.b.WriteString(".ft\n.fi\n.RE\n")
}

// request writes a request whose argument is plain text.
func (w *Writer) request(name, text string) {
	fmt.Fprintf(&w.b, ".%s %s\n", name, quote(text))
}

// lines writes roff text, guarding each line that would otherwise start
// with a control character.
func (w *Writer) lines(roff string) {
	for _, l := range strings.Split(roff, "\n") {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			l = `\&` + l
		}
		w.b.WriteString(l)
		w.b.WriteByte('\n')
	}
}

// quote makes plain text one argument of a request.
func quote(s string) string {
	return `"` + strings.ReplaceAll(Text(s), `"`, `\(dq`) + `"`
}

// Text escapes plain text for roff: a backslash prints as one, and a
// hyphen as the minus sign that flags and paths are typed with.
func Text(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// Bold and Italic set plain text in bold (commands, flags, keys: what is
// typed as shown) and italic (what is replaced).
func Bold(s string) string   { return `\fB` + Text(s) + `\fR` }
func Italic(s string) string { return `\fI` + Text(s) + `\fR` }

var (
	inlineCode   = regexp.MustCompile("`([^`]+)`")
	inlineStrong = regexp.MustCompile(`\*\*(.+?)\*\*`)
	// A link's text may hold `code` with brackets: [`[daemon]`](#daemon).
	inlineLink = regexp.MustCompile("\\[((?:`[^`]*`|[^`\\]])+)\\]\\([^)]*\\)")
)

// Inline renders a line of Markdown as roff text: `code` and **strong**
// in bold, a link as its text.
func Inline(md string) string {
	md = inlineLink.ReplaceAllString(md, "$1")
	var b strings.Builder
	for md != "" {
		code := inlineCode.FindStringSubmatchIndex(md)
		strong := inlineStrong.FindStringSubmatchIndex(md)
		loc, inner := code, ""
		switch {
		case strong != nil && (code == nil || strong[0] < code[0]):
			// Bold is one font: code inside strong text stays bold.
			loc = strong
			inner = strings.ReplaceAll(md[loc[2]:loc[3]], "`", "")
		case code != nil:
			inner = md[loc[2]:loc[3]]
		default:
			b.WriteString(Text(md))
			return b.String()
		}
		b.WriteString(Text(md[:loc[0]]))
		b.WriteString(Bold(inner))
		md = md[loc[1]:]
	}
	return b.String()
}

// Markdown writes a Markdown document: its level-1 heading is left out
// (a page has its own NAME), level 2 starts a section and deeper ones a
// subsection. A table becomes tagged paragraphs, one per row: the first
// cell is the tag, the last the body, and the cells between come first in
// the body, each after its column's heading. A list whose items are only
// links (a table of contents) is left out.
func (w *Writer) Markdown(md string) {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			i++
		case strings.HasPrefix(l, "```"):
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
				j++
			}
			w.Code(lines[i+1 : j])
			i = j + 1
		case strings.HasPrefix(l, "#"):
			level := len(l) - len(strings.TrimLeft(l, "#"))
			title := stripInline(strings.TrimSpace(l[level:]))
			switch {
			case level == 1:
			case level == 2:
				w.Section(title)
			default:
				w.Subsection(title)
			}
			i++
		case strings.HasPrefix(l, "|"):
			j := i
			for j < len(lines) && strings.HasPrefix(lines[j], "|") {
				j++
			}
			w.table(lines[i:j])
			i = j
		case strings.HasPrefix(l, "- "):
			var items []string
			for i < len(lines) {
				if strings.HasPrefix(lines[i], "- ") {
					items = append(items, strings.TrimPrefix(lines[i], "- "))
				} else if strings.HasPrefix(lines[i], "  ") && strings.TrimSpace(lines[i]) != "" {
					items[len(items)-1] += " " + strings.TrimSpace(lines[i])
				} else {
					break
				}
				i++
			}
			if !onlyLinks(items) {
				for _, it := range items {
					w.Bullet(Inline(it))
				}
			}
		default:
			var para []string
			for i < len(lines) && strings.TrimSpace(lines[i]) != "" && !startsBlock(lines[i]) {
				para = append(para, strings.TrimSpace(lines[i]))
				i++
			}
			w.Para(Inline(strings.Join(para, " ")))
		}
	}
}

func startsBlock(l string) bool {
	for _, p := range []string{"```", "#", "|", "- "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// table writes the rows of a Markdown table (header, rule, rows).
func (w *Writer) table(rows []string) {
	if len(rows) < 2 {
		return
	}
	head := Cells(rows[0])
	for _, r := range rows[2:] {
		cells := Cells(r)
		if len(cells) == 0 {
			continue
		}
		var body []string
		for c := 1; c < len(cells)-1; c++ {
			label := ""
			if c < len(head) {
				label = `\fI` + Text(head[c]) + `:\fR `
			}
			body = append(body, label+Inline(cells[c]))
		}
		if len(cells) > 1 {
			body = append(body, Inline(cells[len(cells)-1]))
		}
		w.Tagged(Inline(cells[0]), "")
		for i, part := range body {
			if i > 0 {
				w.Break()
			}
			w.Line(part)
		}
	}
}

// Cells splits a Markdown table row into its trimmed cells. A | inside
// `code` does not split.
func Cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for _, r := range row {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// onlyLinks says whether every item is links and punctuation.
func onlyLinks(items []string) bool {
	for _, it := range items {
		rest := inlineLink.ReplaceAllString(it, "")
		if strings.Trim(rest, " ,.:;") != "" {
			return false
		}
	}
	return len(items) > 0
}

// stripInline drops Markdown inline markup, for headings.
func stripInline(md string) string {
	md = inlineLink.ReplaceAllString(md, "$1")
	md = strings.ReplaceAll(md, "**", "")
	return strings.ReplaceAll(md, "`", "")
}

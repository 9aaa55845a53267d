// Package manpage owns the writing of man pages: roff with the man macros,
// escaped so that no text a page quotes is read as a request, and the
// rendering of the Markdown subset that docs/ is written in (headings,
// paragraphs, lists, tables, fenced code, `code`, **strong** and links), so
// that a page can be made from the same text as a reference page.
package manpage

package config

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The TOML decoder has no public position API: MetaData keeps the position
// of each key privately, and for an array of tables only that of the last
// element. So a light scanner walks the raw text and records the line of
// every key path. It reads only what it needs (headers, keys, the extent of
// values) and never fails: on text it does not understand it moves on, so a
// missing entry only costs a line number, never a wrong answer about the
// config. It also bounds nesting, which the decoder handles in quadratic
// time.

// maxDepth bounds the nesting of arrays and inline tables and the number of
// parts of a dotted key. Nothing in a schedulerd config needs more than 3.
const maxDepth = 16

// positions maps a key path to the line where it is first written. A path
// joins the keys with dots; an element of an array (of tables, or of an
// inline array) has its index in brackets: "job[2].retry.max_attempts".
type positions map[string]int

// joinPath appends key to the path prefix.
func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// indexPath is the path of element i of the array at path.
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// line returns the line of path, or of its nearest parent that has one; 0
// when none does.
func (p positions) line(path string) int {
	for path != "" {
		if l, ok := p[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

type scanner struct {
	src    string
	i      int
	line   int
	pos    positions
	arrays map[string]int // number of [[header]] tables seen per path
	// deepLine is the line where nesting went past maxDepth; 0 if never.
	deepLine int
}

// scanPositions records the line of every key path in src. deepLine is the
// line where the nesting went past maxDepth (0 if it never did); the scan
// stops there.
func scanPositions(src string) (pos positions, deepLine int) {
	s := scan(src, positions{})
	return s.pos, s.deepLine
}

// scanDepth is scanPositions without recording the positions: the line
// where the nesting went past maxDepth, or 0.
func scanDepth(src string) (deepLine int) {
	return scan(src, nil).deepLine
}

// scan reads src, recording positions in pos unless it is nil.
func scan(src string, pos positions) *scanner {
	s := &scanner{src: strings.TrimPrefix(src, "\ufeff"), line: 1, pos: pos, arrays: map[string]int{}}
	s.top()
	return s
}

func (s *scanner) eof() bool { return s.i >= len(s.src) || s.deepLine > 0 }

func (s *scanner) peek(off int) byte {
	if s.i+off < len(s.src) {
		return s.src[s.i+off]
	}
	return 0
}

func (s *scanner) record(path string, line int) {
	if s.pos == nil {
		return // scanDepth
	}
	if _, ok := s.pos[path]; !ok {
		s.pos[path] = line
	}
}

func (s *scanner) tooDeep(depth int) bool {
	if depth > maxDepth && s.deepLine == 0 {
		s.deepLine = s.line
	}
	return s.deepLine > 0
}

// advance moves past one byte, counting lines.
func (s *scanner) advance() {
	if s.src[s.i] == '\n' {
		s.line++
	}
	s.i++
}

// skipBlank skips spaces and tabs.
func (s *scanner) skipBlank() {
	for !s.eof() && (s.src[s.i] == ' ' || s.src[s.i] == '\t') {
		s.i++
	}
}

// skipSpace skips blanks, newlines and comments.
func (s *scanner) skipSpace() {
	for !s.eof() {
		switch s.src[s.i] {
		case ' ', '\t', '\r', '\n':
			s.advance()
		case '#':
			s.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the start of the next line.
func (s *scanner) skipLine() {
	for !s.eof() && s.src[s.i] != '\n' {
		s.i++
	}
	if !s.eof() {
		s.advance()
	}
}

func (s *scanner) top() {
	table := ""
	for {
		s.skipSpace()
		if s.eof() {
			return
		}
		start := s.i
		if s.src[s.i] == '[' {
			table = s.header()
		} else {
			s.keyValue(table, 0)
		}
		// Whatever follows on the line (a comment, or text this scanner
		// does not understand) ends with the line.
		s.skipBlank()
		if !s.eof() && s.src[s.i] != '\n' && s.src[s.i] != '\r' {
			s.skipLine()
		}
		if s.i == start && !s.eof() {
			s.advance()
		}
	}
}

// header reads [a.b] or [[a.b]] and returns the path of the table it opens.
func (s *scanner) header() string {
	line := s.line
	s.i++ // [
	array := s.peek(0) == '['
	if array {
		s.i++
	}
	keys := s.keys()
	if s.tooDeep(len(keys)) || len(keys) == 0 {
		return ""
	}
	s.skipBlank()
	if s.peek(0) == ']' {
		s.i++
		if array && s.peek(0) == ']' {
			s.i++
		}
	}
	path := ""
	for _, k := range keys[:len(keys)-1] {
		path = joinPath(path, k)
		if n, ok := s.arrays[path]; ok {
			path = indexPath(path, n-1)
		}
		s.record(path, line)
	}
	path = joinPath(path, keys[len(keys)-1])
	if array {
		n := s.arrays[path]
		s.arrays[path] = n + 1
		s.record(path, line)
		path = indexPath(path, n)
	}
	s.record(path, line)
	return path
}

// keyValue reads key = value in the table at prefix.
func (s *scanner) keyValue(prefix string, depth int) {
	line := s.line
	keys := s.keys()
	if len(keys) == 0 || s.tooDeep(depth+len(keys)) {
		return
	}
	path := prefix
	for _, k := range keys {
		path = joinPath(path, k)
		s.record(path, line)
	}
	s.skipBlank()
	if s.peek(0) != '=' {
		return
	}
	s.i++
	s.skipBlank()
	s.value(path, depth+1)
}

// keys reads a dotted key: bare or quoted parts separated by dots.
func (s *scanner) keys() []string {
	var keys []string
	for {
		s.skipBlank()
		k, ok := s.key()
		if !ok {
			return keys
		}
		keys = append(keys, k)
		if len(keys) > maxDepth {
			return keys
		}
		s.skipBlank()
		if s.peek(0) != '.' {
			return keys
		}
		s.i++
	}
}

// key reads one part of a key.
func (s *scanner) key() (string, bool) {
	if s.eof() {
		return "", false
	}
	switch c := s.src[s.i]; {
	case c == '"':
		return s.basicString(), true
	case c == '\'':
		return s.literalString(), true
	case isBare(c):
		start := s.i
		for !s.eof() && isBare(s.src[s.i]) {
			s.i++
		}
		return s.src[start:s.i], true
	}
	return "", false
}

func isBare(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value, recording the keys of inline tables (also inside
// arrays) under path.
func (s *scanner) value(path string, depth int) {
	if s.eof() || s.tooDeep(depth) {
		return
	}
	switch s.src[s.i] {
	case '"':
		if strings.HasPrefix(s.src[s.i:], `"""`) {
			s.multiline(`"""`, true)
		} else {
			s.basicString()
		}
	case '\'':
		if strings.HasPrefix(s.src[s.i:], `'''`) {
			s.multiline(`'''`, false)
		} else {
			s.literalString()
		}
	case '[':
		s.array(path, depth)
	case '{':
		s.inlineTable(path, depth)
	default:
		// A number, a boolean or a datetime (which may hold a space).
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.src[s.i])) {
			s.i++
		}
	}
}

func (s *scanner) array(path string, depth int) {
	s.i++ // [
	for n := 0; ; n++ {
		s.skipSpace()
		if s.eof() {
			return
		}
		if s.src[s.i] == ']' {
			s.i++
			return
		}
		elem := indexPath(path, n)
		s.record(elem, s.line)
		start := s.i
		s.value(elem, depth+1)
		s.skipSpace()
		if s.eof() {
			return
		}
		switch s.src[s.i] {
		case ',':
			s.i++
		case ']':
		default:
			if s.i == start {
				s.advance() // not TOML; do not loop
			}
		}
	}
}

func (s *scanner) inlineTable(path string, depth int) {
	s.i++ // {
	for {
		s.skipSpace()
		if s.eof() {
			return
		}
		switch s.src[s.i] {
		case '}':
			s.i++
			return
		case ',':
			s.i++
			continue
		}
		start := s.i
		s.keyValue(path, depth)
		if s.i == start && !s.eof() {
			s.advance() // not TOML; do not loop
		}
	}
}

// basicString reads "..." and returns its decoded text.
func (s *scanner) basicString() string {
	s.i++ // "
	var b strings.Builder
	for !s.eof() {
		c := s.src[s.i]
		switch c {
		case '"':
			s.i++
			return b.String()
		case '\n':
			return b.String() // not TOML: a basic string ends with its line
		case '\\':
			s.escape(&b)
		default:
			b.WriteByte(c)
			s.i++
		}
	}
	return b.String()
}

// escape decodes the escape sequence at s.i into b.
func (s *scanner) escape(b *strings.Builder) {
	s.i++ // backslash
	if s.eof() {
		return
	}
	c := s.src[s.i]
	if c == '\n' {
		return // not TOML in a basic string
	}
	s.i++
	if r, ok := simpleEscapes[c]; ok {
		b.WriteByte(r)
		return
	}
	digits := hexEscapes[c]
	if digits == 0 || s.i+digits > len(s.src) {
		b.WriteByte('\\')
		b.WriteByte(c)
		return
	}
	r, err := strconv.ParseUint(s.src[s.i:s.i+digits], 16, 32)
	if err != nil || !utf8.ValidRune(rune(r)) {
		b.WriteByte('\\')
		b.WriteByte(c)
		return
	}
	s.i += digits
	b.WriteRune(rune(r))
}

var (
	simpleEscapes = map[byte]byte{'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', 'e': 0x1b, '"': '"', '\\': '\\'}
	hexEscapes    = map[byte]int{'x': 2, 'u': 4, 'U': 8}
)

// literalString reads '...' and returns its text.
func (s *scanner) literalString() string {
	s.i++ // '
	start := s.i
	for !s.eof() && s.src[s.i] != '\'' && s.src[s.i] != '\n' {
		s.i++
	}
	text := s.src[start:s.i]
	if s.peek(0) == '\'' {
		s.i++
	}
	return text
}

// multiline skips a multi-line string delimited by quote ("""or ”').
func (s *scanner) multiline(quote string, escapes bool) {
	s.i += len(quote)
	for !s.eof() {
		if escapes && s.src[s.i] == '\\' {
			s.i++
			if !s.eof() {
				s.advance()
			}
			continue
		}
		if strings.HasPrefix(s.src[s.i:], quote) {
			s.i += len(quote)
			// Up to two more quotes belong to the content.
			for n := 0; n < 2 && s.peek(0) == quote[0]; n++ {
				s.i++
			}
			return
		}
		s.advance()
	}
}

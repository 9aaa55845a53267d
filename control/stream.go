package control

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/jobs"
)

// attemptMeta is an Attempt without its output, which writeAttempt streams
// after the other fields. It converts from Attempt: the fields must stay
// the same.
type attemptMeta struct {
	Number      int         `json:"number"`
	Node        string      `json:"node"`
	Incarnation string      `json:"incarnation"`
	StartedAt   *time.Time  `json:"started_at"`
	FinishedAt  *time.Time  `json:"finished_at"`
	Status      jobs.Status `json:"status"`
	ExitCode    *int        `json:"exit_code"`
	Error       string      `json:"error"`
	Reason      jobs.Reason `json:"reason"`
	Output      string      `json:"-"`
	OutputBytes int64       `json:"output_bytes"`
	Truncated   bool        `json:"truncated"`
}

// streamChunk is how much of a reply is escaped before it is written: the
// memory a streamed reply holds besides the attempts the store returned.
const streamChunk = 32 << 10

// replyStream writes a JSON reply in chunks of streamChunk bytes, each
// with a write deadline of its own: a reply of any size takes as long as
// it needs while the client reads it, and a client that stops reading is
// cut off after timeout.
type replyStream struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	err     error
}

func newReplyStream(w http.ResponseWriter, timeout time.Duration) *replyStream {
	return &replyStream{w: w, rc: http.NewResponseController(w), timeout: timeout, buf: make([]byte, 0, streamChunk+16)}
}

// raw appends JSON text as it is.
func (s *replyStream) raw(b []byte) {
	s.buf = append(s.buf, b...)
	if len(s.buf) >= streamChunk {
		s.flush()
	}
}

// str appends text as the contents of a JSON string (without the quotes),
// escaped as encoding/json does: invalid UTF-8 becomes U+FFFD.
func (s *replyStream) str(text string) {
	for i := 0; i < len(text); {
		if len(s.buf) >= streamChunk {
			s.flush()
		}
		b := text[i]
		if b < utf8.RuneSelf {
			s.buf = appendEscapedByte(s.buf, b)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			s.buf = append(s.buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			s.buf = append(s.buf, `\u202`...)
			s.buf = append(s.buf, hexDigits[r&0xF])
		default:
			s.buf = append(s.buf, text[i:i+size]...)
		}
		i += size
	}
}

const hexDigits = "0123456789abcdef"

// appendEscapedByte appends an ASCII byte of a JSON string.
func appendEscapedByte(dst []byte, b byte) []byte {
	switch {
	case b == '"' || b == '\\':
		return append(dst, '\\', b)
	case b == '\n':
		return append(dst, '\\', 'n')
	case b == '\r':
		return append(dst, '\\', 'r')
	case b == '\t':
		return append(dst, '\\', 't')
	case b < 0x20:
		return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
	}
	return append(dst, b)
}

// flush writes what is buffered; after an error it only drops it.
func (s *replyStream) flush() {
	if len(s.buf) == 0 || s.err != nil {
		s.buf = s.buf[:0]
		return
	}
	// The read deadline too: when it passes, the server takes the client
	// for gone and cancels the request.
	deadline := time.Now().Add(s.timeout)
	_ = s.rc.SetReadDeadline(deadline)
	_ = s.rc.SetWriteDeadline(deadline)
	_, s.err = s.w.Write(s.buf)
	s.buf = s.buf[:0]
}

// writeAttempt writes one attempt as a JSON object, its output streamed.
func (s *replyStream) writeAttempt(a *jobs.Attempt) {
	meta, err := json.Marshal(attemptMeta(newAttempt(a)))
	if err != nil {
		s.err = err
		return
	}
	s.raw(meta[:len(meta)-1]) // without its closing brace
	s.raw([]byte(`,"output":"`))
	s.str(a.Output)
	s.raw([]byte(`"}`))
}

// writeAttempts writes the reply of GET /v1/runs/{id}/attempts,
// {"attempts": [...]}, one attempt at a time. Each attempt is dropped from
// as once written, so its output can be freed while the rest is sent.
func (s *replyStream) writeAttempts(as []*jobs.Attempt) error {
	s.raw([]byte(`{"attempts":[`))
	for i, a := range as {
		if i > 0 {
			s.raw([]byte(","))
		}
		as[i] = nil
		s.writeAttempt(a)
		if s.err != nil {
			return s.err
		}
	}
	s.raw([]byte("]}\n"))
	s.flush()
	return s.err
}

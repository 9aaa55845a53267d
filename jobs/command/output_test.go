package command

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

func runtimeGC() { runtime.GC() }

func memStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// TestCapture proves the head/ring capture matches a naive reference for
// every size around the limits and every chunking of the writes.
func TestCapture(t *testing.T) {
	t.Parallel()
	const limit = 8
	for _, size := range []int{0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 100} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte('a' + i%26)
		}
		wantHead := data[:min(size, limit)]
		rest := data[len(wantHead):]
		wantTail := rest[max(0, len(rest)-limit):]
		wantTrunc := size > 2*limit
		for _, chunk := range []int{1, 3, 7, 8, 9, 16, 64} {
			t.Run(fmt.Sprintf("size%d/chunk%d", size, chunk), func(t *testing.T) {
				c := newCapture(limit)
				for p := data; len(p) > 0; {
					n := min(chunk, len(p))
					c.write(p[:n])
					p = p[n:]
				}
				o := c.output()
				if !bytes.Equal(o.Head, wantHead) || !bytes.Equal(o.Tail, wantTail) {
					t.Errorf("head %q tail %q, want %q %q", o.Head, o.Tail, wantHead, wantTail)
				}
				if o.Total != int64(size) || o.Truncated != wantTrunc {
					t.Errorf("Total=%d Truncated=%v, want %d %v", o.Total, o.Truncated, size, wantTrunc)
				}
				if len(o.Head)+len(o.Tail) > 2*limit {
					t.Errorf("kept %d bytes, more than 2*limit", len(o.Head)+len(o.Tail))
				}
			})
		}
	}
}

// TestOutputString proves the marker line appears only when bytes were
// dropped and counts exactly the dropped bytes.
func TestOutputString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Output
		want string
	}{
		{"empty", Output{}, ""},
		{"head only", Output{Head: []byte("abc"), Total: 3}, "abc"},
		{"head and tail", Output{Head: []byte("abc"), Tail: []byte("de"), Total: 5}, "abcde"},
		{"truncated", Output{Head: []byte("abc"), Tail: []byte("xyz"), Total: 1006, Truncated: true},
			"abc\n[... 1000 bytes truncated ...]\nxyz"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("%s: String() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

package proctest

import (
	"flag"
	"strconv"
	"testing"
)

// TestLong: Long skips a test under -short and nothing else, so that
// make test, which does not pass -short, runs every long process test.
func TestLong(t *testing.T) {
	was := testing.Short()
	t.Cleanup(func() { flag.Set("test.short", strconv.FormatBool(was)) })
	for _, short := range []bool{false, true} {
		if err := flag.Set("test.short", strconv.FormatBool(short)); err != nil {
			t.Fatal(err)
		}
		var ran, skipped bool
		t.Run("short="+strconv.FormatBool(short), func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			Long(t, "a test")
			ran = true
		})
		if ran == short || skipped != short {
			t.Errorf("with -short=%t: went on past Long %t, skipped %t; want %t, %t", short, ran, skipped, !short, short)
		}
	}
}

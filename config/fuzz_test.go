package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseConfig checks that Parse never panics, that it returns either a
// config or *Error values naming the file, and that every job of a config
// it accepts validates.
func FuzzParseConfig(f *testing.F) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tt := range errorTests {
		if len(tt.src) < 4096 {
			f.Add([]byte(tt.src))
		}
	}
	for _, tt := range validSnippets {
		f.Add([]byte(tt.src))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.toml", data)
		// The client's read of the [daemon] table alone accepts every file
		// Parse accepts, with the same daemon.
		d, derr := ParseDaemon("f.toml", data)
		switch {
		case derr == nil && d == nil, derr != nil && d != nil:
			t.Fatalf("ParseDaemon = %v, %v", d, derr)
		case err == nil && derr != nil:
			t.Fatalf("ParseDaemon refused what Parse accepted: %v", derr)
		case err == nil && !reflect.DeepEqual(*d, cfg.Daemon):
			t.Fatalf("ParseDaemon's daemon %+v, Parse's %+v", *d, cfg.Daemon)
		}
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok || len(joined.Unwrap()) == 0 {
				t.Fatalf("error %T is not a join of errors", err)
			}
			for _, e := range joined.Unwrap() {
				var ce *Error
				if !errors.As(e, &ce) || ce.File != "f.toml" || ce.Msg == "" || ce.Line < 0 {
					t.Fatalf("error %#v", e)
				}
			}
			return
		}
		names := make(map[string]bool, len(cfg.Jobs))
		for _, d := range cfg.Jobs {
			if err := d.Validate(); err != nil {
				t.Fatalf("job %q does not validate: %v", d.Name, err)
			}
			if names[d.Name] {
				t.Fatalf("job name %q twice", d.Name)
			}
			names[d.Name] = true
			if d.Timeout <= 0 || d.KillGrace <= 0 || d.MisfireGrace <= 0 || d.CatchupWindow <= 0 || d.CatchupMax < 1 ||
				d.OutputLimit < MinOutputLimit || d.OutputLimit > MaxOutputLimit || d.Overlap == "" || d.Catchup == "" {
				t.Fatalf("job %q has settings out of range: %+v", d.Name, d)
			}
		}
		dm := cfg.Daemon
		if dm.Concurrency < 1 || dm.Concurrency > MaxConcurrency || dm.HeartbeatInterval <= 0 ||
			dm.InactiveThreshold-dm.HeartbeatInterval <= dm.HeartbeatInterval || dm.History < MinHistory ||
			!filepath.IsAbs(dm.StateDir) || !filepath.IsAbs(dm.Socket) {
			t.Fatalf("daemon settings out of range: %+v", dm)
		}
	})
}

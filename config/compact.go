package config

import (
	"strings"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// compact moves what a parsed config keeps into a few allocations made
// after parsing, and detaches it from the decoded file.
//
// The definitions, their strings and their schedules are made one job at a
// time among the much larger garbage of decoding (a tree of maps per job),
// and every string the decoder returns is a substring of the whole file.
// Kept as made, the jobs held a small object of each kind per job,
// scattered over spans whose other slots were free but could not be given
// back, and the file itself: a daemon with many schedules used far more
// heap spans than its live objects filled. Compacted, the definitions are
// one slice, the per-job strings one string, the repeated strings (overlap,
// user, workdir, ...) one copy each, and the schedules are packed with
// equal ones shared (schedule.Pack). After a reload the old config's
// allocations are freed once no attempt started under it runs any more.
func compact(cfg *Config) {
	d := &cfg.Daemon
	for _, s := range []*string{&cfg.Path, &d.NodeID, &d.Store, &d.StateDir, &d.Socket, &d.SocketGroup,
		&d.HealthListen, &d.APIListen, &d.APITLSCert, &d.APITLSKey, &d.LogFormat, &d.LogLevel} {
		*s = strings.Clone(*s)
	}
	for i := range cfg.Tokens {
		t := &cfg.Tokens[i]
		t.Name, t.Role = strings.Clone(t.Name), strings.Clone(t.Role)
	}
	defs := cfg.Jobs
	if len(defs) == 0 {
		return
	}
	// Per-job strings, packed into one string in this order.
	size := 0
	eachOwn(defs, func(s string) { size += len(s) })
	var b strings.Builder
	b.Grow(size)
	eachOwn(defs, func(s string) { b.WriteString(s) })
	all, off := b.String(), 0
	own := func(s string) string {
		s, off = all[off:off+len(s)], off+len(s)
		return s
	}
	// Strings that many jobs share, one copy each.
	shared := map[string]string{}
	intern := func(s string) string {
		if s == "" {
			return ""
		}
		c, ok := shared[s]
		if !ok {
			c = strings.Clone(s)
			shared[c] = c
		}
		return c
	}
	scheds := make([]*schedule.Schedule, len(defs))
	for i, d := range defs {
		scheds[i], _ = d.Schedule.(*schedule.Schedule)
	}
	scheds = schedule.Pack(scheds)

	nargs := 0
	for _, d := range defs {
		nargs += len(d.Command)
	}
	args := make([]string, 0, nargs)
	packed := make([]jobs.Definition, len(defs))
	for i, old := range defs {
		d := &packed[i]
		*d = *old
		d.Name = own(old.Name)
		if old.Command != nil {
			start := len(args)
			for _, a := range old.Command {
				args = append(args, own(a))
			}
			d.Command = args[start:len(args):len(args)]
		}
		d.Shell = own(old.Shell)
		d.Workdir, d.User = intern(old.Workdir), intern(old.User)
		d.Overlap, d.Catchup = jobs.Overlap(intern(string(old.Overlap))), jobs.Catchup(intern(string(old.Catchup)))
		d.Retry.Backoff = jobs.Backoff(intern(string(old.Retry.Backoff)))
		if old.Env != nil {
			d.Env = make(map[string]string, len(old.Env))
			for k, v := range old.Env {
				d.Env[intern(k)] = intern(v)
			}
		}
		if scheds[i] != nil {
			d.Schedule = scheds[i]
		}
		defs[i] = d
	}
}

// eachOwn calls f with the strings of each definition that compact packs
// into one string, in the order it takes them.
func eachOwn(defs []*jobs.Definition, f func(string)) {
	for _, d := range defs {
		f(d.Name)
		for _, a := range d.Command {
			f(a)
		}
		f(d.Shell)
	}
}

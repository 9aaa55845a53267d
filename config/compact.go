package config

import (
	"encoding/binary"
	"slices"
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
// user, workdir, ...) one copy each, equal commands and equal notify lists
// one copy each (a generated config repeats them job after job), and the
// schedules are packed with equal ones shared (schedule.Pack). The
// definitions are read only once parsed: jobs/command copies a command
// before it runs it. After a reload the old config's allocations are freed
// once no attempt started under it runs any more.
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
	for i := range cfg.Notifiers {
		n := &cfg.Notifiers[i]
		for _, s := range []*string{&n.Name, &n.Webhook, &n.SecretFile, &n.BodyTemplate, &n.Shell, &n.User,
			&n.MailFrom, &n.SMTP, &n.SMTPUser, &n.SMTPPasswordFile} {
			*s = strings.Clone(*s)
		}
		for j := range n.Command {
			n.Command[j] = strings.Clone(n.Command[j])
		}
		for j := range n.MailTo {
			n.MailTo[j] = strings.Clone(n.MailTo[j])
		}
	}
	defs := cfg.Jobs
	if len(defs) == 0 {
		return
	}
	cmdOf, notifyOf := firstEqual(defs, appendCommandKey), firstEqual(defs, appendNotifyKey)
	// Per-job strings, packed into one string in this order.
	size := 0
	eachOwn(defs, cmdOf, func(s string) { size += len(s) })
	var b strings.Builder
	b.Grow(size)
	eachOwn(defs, cmdOf, func(s string) { b.WriteString(s) })
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
	for i, d := range defs {
		if cmdOf[i] == i {
			nargs += len(d.Command)
		}
	}
	args := make([]string, 0, nargs)
	packed := make([]jobs.Definition, len(defs))
	for i, old := range defs {
		d := &packed[i]
		*d = *old
		d.Name = own(old.Name)
		switch {
		case cmdOf[i] < i:
			d.Command = packed[cmdOf[i]].Command
		case old.Command != nil:
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
		switch {
		case notifyOf[i] < i:
			d.Notify = packed[notifyOf[i]].Notify
		case old.Notify != nil:
			d.Notify = slices.Clip(slices.Clone(old.Notify))
			for j := range d.Notify {
				d.Notify[j].Notifier = intern(d.Notify[j].Notifier)
			}
		}
		if old.Env != nil {
			d.Env = make(map[string]string, len(old.Env))
			for k, v := range old.Env {
				d.Env[intern(k)] = intern(v)
			}
		}
		for _, l := range []*[]string{&d.OnSuccess, &d.OnFailure} {
			if *l != nil {
				*l = slices.Clip(slices.Clone(*l))
				for j := range *l {
					(*l)[j] = intern((*l)[j])
				}
			}
		}
		if scheds[i] != nil {
			d.Schedule = scheds[i]
		}
		defs[i] = d
	}
}

// eachOwn calls f with the strings of each definition that compact packs
// into one string, in the order it takes them: a command only where it
// first appears (cmdOf, see firstEqual).
func eachOwn(defs []*jobs.Definition, cmdOf []int, f func(string)) {
	for i, d := range defs {
		f(d.Name)
		if cmdOf[i] == i {
			for _, a := range d.Command {
				f(a)
			}
		}
		f(d.Shell)
	}
}

// firstEqual returns, for each definition, the index of the first one
// whose list (a command, a notify list) is equal to its own, as the keys
// that appendKey makes tell; a definition without the list (appendKey
// returns nil) is its own first.
func firstEqual(defs []*jobs.Definition, appendKey func([]byte, *jobs.Definition) []byte) []int {
	first := make([]int, len(defs))
	seen := map[string]int{}
	var key []byte
	for i, d := range defs {
		first[i] = i
		if key = appendKey(key[:0], d); key == nil {
			continue
		}
		if j, ok := seen[string(key)]; ok {
			first[i] = j
		} else {
			seen[string(key)] = i
		}
	}
	return first
}

// appendString appends s to a key, its length first, so that distinct
// lists make distinct keys.
func appendString(key []byte, s string) []byte {
	return append(binary.AppendUvarint(key, uint64(len(s))), s...)
}

// appendCommandKey appends the key of d's command to key; nil without one.
func appendCommandKey(key []byte, d *jobs.Definition) []byte {
	if d.Command == nil {
		return nil
	}
	key = binary.AppendUvarint(key, uint64(len(d.Command)))
	for _, a := range d.Command {
		key = appendString(key, a)
	}
	return key
}

// appendNotifyKey appends the key of d's notify list to key; nil without
// one.
func appendNotifyKey(key []byte, d *jobs.Definition) []byte {
	if d.Notify == nil {
		return nil
	}
	key = binary.AppendUvarint(key, uint64(len(d.Notify)))
	for _, t := range d.Notify {
		key = appendString(key, t.Notifier)
		key = binary.AppendVarint(key, int64(t.Renotify))
		key = binary.AppendUvarint(key, uint64(len(t.Events)))
		for _, e := range t.Events {
			key = appendString(key, string(e))
		}
	}
	return key
}

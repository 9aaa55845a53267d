package scheduler_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler/model"
)

// scenario is one seeded timeline of the simulator: the configs the
// daemon starts and reloads with (TOML, read by the config package as the
// daemon reads it), the events, and how each attempt ends.
type scenario struct {
	seed int64
	// draw is the attempt of the generator that made it: timelines that
	// the model finds ambiguous are drawn again.
	draw     int
	t0, end  time.Time
	configs  []string // TOML
	events   []simEvent
	profiles map[string]profile
}

// simEvent is an event of the timeline: a model.Event whose jobs are the
// config configs[cfg].
type simEvent struct {
	at      time.Time
	kind    model.Kind
	cfg     int // Start, Reload
	job     string
	label   string
	dedup   string
	nb, na  time.Time
	delta   time.Duration // Jump
	dropped bool          // removed while shrinking
}

// profile is how the attempts of a job behave: a duration drawn in
// [min, max), failing with probability fail, hanging (until stopped)
// with probability hang.
type profile struct {
	min, max   time.Duration
	fail, hang float64
}

// zones and the instants near which a timeline starts: DST changes (in
// Europe/Berlin, America/New_York, Australia/Lord_Howe and Asia/Tehran,
// which no longer has one), ends of months (for L and W) and plain days.
var (
	simZones  = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}
	simStarts = []time.Time{
		time.Date(2026, 3, 29, 0, 57, 0, 0, time.UTC),  // Berlin springs forward at 01:00 UTC
		time.Date(2026, 10, 25, 0, 57, 0, 0, time.UTC), // Berlin falls back at 01:00 UTC
		time.Date(2026, 3, 8, 6, 57, 0, 0, time.UTC),   // New York springs forward at 07:00 UTC
		time.Date(2026, 11, 1, 5, 57, 0, 0, time.UTC),  // New York falls back at 06:00 UTC
		time.Date(2026, 4, 4, 14, 57, 0, 0, time.UTC),  // Lord Howe moves back 30 minutes at 15:00 UTC
		time.Date(2026, 4, 30, 23, 57, 0, 0, time.UTC), // the end of April (L, W)
		time.Date(2026, 2, 28, 23, 57, 0, 0, time.UTC), // the end of February
		time.Date(2026, 5, 15, 10, 0, 0, 0, time.UTC),  // a Friday
		time.Date(2026, 7, 6, 12, 0, 0, 0, time.UTC),   // a Monday
	}
	// simSpecs are the schedules of cron jobs: every few seconds and
	// minutes, fixed times near the starts above (DST, month ends), and
	// the L, W and # day forms.
	simSpecs = []string{
		"* * * * * *", "*/2 * * * * *", "*/3 * * * * *", "*/5 * * * * *", "*/7 * * * * *",
		"*/10 * * * * *", "*/15 * * * * *", "*/30 * * * * *", "0 * * * * *", "* * * * *",
		"*/2 * * * *", "@every 4s", "@every 13s", "30 2 * * *", "0,30 * * * * *",
		"*/5 * * L * *", "*/5 * * LW * *", "*/5 * * 1W * *", "*/5 * * * * 5#3", "*/5 * * * * 5L",
		"*/4 0-3 * * *", "*/6 * 1 * * *", "15-45/10 * * * * *", "0 0 * * *",
	}
)

// simRand is the scenario's source of randomness.
type simRand struct{ *rand.Rand }

func (r simRand) pick(n int) int        { return r.IntN(n) }
func (r simRand) chance(p float64) bool { return r.Float64() < p }
func (r simRand) between(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return (a + time.Duration(r.Int64N(int64(b-a)))).Truncate(time.Microsecond)
}

// micro is a random microsecond offset, so that the events of a timeline
// do not fall on the instants (whole seconds and milliseconds) of ticks
// and jitter.
func (r simRand) micro() time.Duration { return time.Duration(1+r.IntN(999)) * time.Microsecond }

// genJob is a job as the generator keeps it between configs.
type genJob struct {
	name     string
	kind     string // cron, once, trigger
	settings map[string]string
}

func (j genJob) toml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[job]]\nname = %q\ncommand = [\"true\"]\n", j.name)
	for _, k := range sortedStrings(mapsKeys(j.settings)) {
		fmt.Fprintf(&b, "%s = %s\n", k, j.settings[k])
	}
	return b.String()
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func dur(d time.Duration) string { return fmt.Sprintf("%q", d.String()) }

func tomlTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// newJob draws a job.
func (r simRand) newJob(name string, t0 time.Time) genJob {
	j := genJob{name: name, settings: map[string]string{}}
	s := j.settings
	switch k := r.pick(10); {
	case k < 8:
		j.kind = "cron"
		s["schedule"] = fmt.Sprintf("%q", simSpecs[r.pick(len(simSpecs))])
		s["timezone"] = fmt.Sprintf("%q", simZones[r.pick(len(simZones))])
		s["overlap"] = fmt.Sprintf("%q", []string{"allow", "skip", "queue", "replace"}[r.pick(4)])
		s["catchup"] = fmt.Sprintf("%q", []string{"none", "latest", "all"}[r.pick(3)])
		s["misfire_grace"] = dur(time.Duration(1+r.pick(90)) * time.Second)
		if r.chance(0.5) {
			s["catchup_window"] = dur(time.Duration(10+r.pick(1800)) * time.Second)
		}
		if r.chance(0.5) {
			s["catchup_max"] = fmt.Sprint(1 + r.pick(5))
		}
		jitter := time.Duration(0)
		if r.chance(0.3) {
			jitter = time.Duration(100+r.pick(5000)) * time.Millisecond
			s["jitter"] = dur(jitter)
		}
		if r.chance(0.4) {
			s["start_deadline"] = dur(jitter + time.Duration(1+r.pick(120))*time.Second)
		}
	case k < 9:
		j.kind = "once"
		s["at"] = tomlTime(t0.Add(time.Duration(r.pick(300))*time.Second + r.micro()))
	default:
		j.kind = "trigger"
	}
	if r.chance(0.3) {
		s["max_concurrency"] = fmt.Sprint(r.pick(4))
	}
	s["timeout"] = dur(time.Duration(1+r.pick(120)) * time.Second)
	backoff := []string{"fixed", "exponential"}[r.pick(2)]
	initial := time.Duration(1+r.pick(20)) * time.Second
	maxDelay := time.Duration(0)
	if r.chance(0.7) {
		maxDelay = initial + time.Duration(r.pick(60))*time.Second
	}
	s["retry"] = fmt.Sprintf("{ max_attempts = %d, backoff = %q, initial_delay = %s, max_delay = %s, jitter = %v }",
		1+r.pick(4), backoff, dur(initial), dur(maxDelay), r.chance(0.5))
	if r.chance(0.15) {
		s["not_before"] = tomlTime(t0.Add(time.Duration(r.pick(120))*time.Second + r.micro()))
	}
	if r.chance(0.15) {
		s["not_after"] = tomlTime(t0.Add(time.Duration(130+r.pick(600))*time.Second + r.micro()))
	}
	return j
}

// mutate changes one or two keys of a job, as an operator's edit does,
// and now and then the whole job.
func (r simRand) mutate(j genJob, t0 time.Time) genJob {
	other := r.newJob(j.name, t0)
	if other.kind == j.kind && r.chance(0.2) {
		return other
	}
	out := genJob{name: j.name, kind: j.kind, settings: map[string]string{}}
	for k, v := range j.settings {
		out.settings[k] = v
	}
	keys := sortedStrings(mapsKeys(other.settings))
	for range 1 + r.pick(2) {
		k := keys[r.pick(len(keys))]
		if k == "at" || k == "schedule" && j.kind != "cron" {
			continue
		}
		out.settings[k] = other.settings[k]
	}
	return out
}

// valid reports whether a job parses, alone, under the daemon section.
func valid(daemon string, j genJob) bool {
	_, err := config.Parse("sim.toml", []byte(daemon+"\n"+j.toml()))
	return err == nil
}

// drawJob draws a job that parses; draw is newJob or a mutation.
func drawJob(daemon string, draw func() genJob) genJob {
	for {
		if j := draw(); valid(daemon, j) {
			return j
		}
	}
}

// simDaemon draws the [daemon] keys.
func (r simRand) simDaemon() (string, time.Duration) {
	conc := 1 + r.pick(6)
	var grace time.Duration
	var line string
	switch r.pick(4) {
	case 0:
		grace, line = 0, `shutdown_grace = "0s"`
	case 1:
		grace, line = 2*time.Second, `shutdown_grace = "2s"`
	case 2:
		grace, line = 45*time.Second, `shutdown_grace = "45s"`
	default:
		grace = config.DefaultShutdownGrace // the default
	}
	return fmt.Sprintf("[daemon]\nnode_id = \"sim\"\nconcurrency = %d\n%s\n", conc, line), grace
}

// drainTime is how long the daemon runs after the last event, every
// schedule paused, so that every run of a declared job can end.
const drainTime = 2 * time.Hour

// genScenario draws the timeline of seed; draw numbers the attempt.
func genScenario(seed int64, draw int) *scenario {
	var key [16]byte
	binary.BigEndian.PutUint64(key[:8], uint64(seed))
	binary.BigEndian.PutUint64(key[8:], uint64(draw))
	sum := sha256.Sum256(key[:])
	r := simRand{rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))}

	t0 := simStarts[r.pick(len(simStarts))].Add(time.Duration(r.pick(60))*time.Second + r.micro())
	sc := &scenario{seed: seed, draw: draw, t0: t0, profiles: map[string]profile{}}
	daemon, grace := r.simDaemon()
	names := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	pool := map[string]genJob{}
	var current []genJob
	for _, n := range names[:2+r.pick(3)] {
		j := drawJob(daemon, func() genJob { return r.newJob(n, t0) })
		pool[n] = j
		current = append(current, j)
	}
	for _, n := range names {
		p := profile{min: time.Duration(1+r.pick(500)) * time.Millisecond}
		p.max = p.min + time.Duration(1+r.pick(4))*time.Duration(1+r.pick(20))*time.Second
		p.fail = []float64{0, 0.2, 0.5, 0.9}[r.pick(4)]
		p.hang = []float64{0, 0, 0.05, 0.2}[r.pick(4)]
		sc.profiles[n] = p
	}
	render := func(js []genJob) int {
		var b strings.Builder
		b.WriteString(daemon)
		for _, j := range js {
			b.WriteString("\n")
			b.WriteString(j.toml())
		}
		sc.configs = append(sc.configs, b.String())
		return len(sc.configs) - 1
	}
	defsOf := func(cfg int) []*jobs.Definition {
		c, err := config.Parse("sim.toml", []byte(sc.configs[cfg]))
		if err != nil {
			panic(fmt.Sprintf("seed %d: the generated config does not parse: %v\n%s", seed, err, sc.configs[cfg]))
		}
		return c.Jobs
	}
	cfg := render(current)
	defs := defsOf(cfg)
	// clear reports whether t is clear of the instants around the ticks of
	// the declared cron jobs, where a tick is written and claimed ahead.
	clear := func(t time.Time) bool {
		for _, d := range defs {
			if d.Schedule == nil {
				continue
			}
			if n := d.Schedule.Next(t.Add(-time.Millisecond)); !n.IsZero() && !n.After(t.Add(2*model.FireLead)) {
				return false
			}
		}
		return true
	}
	at := t0
	add := func(e simEvent) {
		for !clear(e.at) {
			e.at = e.at.Add(77*time.Millisecond + r.micro())
		}
		if e.nb.Before(e.at) && !e.nb.IsZero() {
			e.nb = e.at.Add(r.micro())
		}
		if !e.na.IsZero() && !e.na.After(e.at) {
			e.na = e.at.Add(time.Second + r.micro())
		}
		sc.events = append(sc.events, e)
		at = e.at
	}
	add(simEvent{at: at, kind: model.Start, cfg: cfg})
	up := true
	phase := time.Duration(60+r.pick(300)) * time.Second
	labels := 0
	var triggered []string
	for at.Sub(t0) < phase {
		next := at.Add(time.Duration(r.pick(20_000))*time.Millisecond + r.micro())
		if !up {
			next = at.Add(time.Duration(1+r.pick(240))*time.Second + r.micro())
			add(simEvent{at: next, kind: model.Start, cfg: cfg})
			up = true
			continue
		}
		switch k := r.pick(100); {
		case k < 35:
			labels++
			e := simEvent{at: next, kind: model.Trigger, label: fmt.Sprintf("t%d", labels)}
			e.job = current[r.pick(len(current))].name
			if r.chance(0.05) {
				e.job = "nosuchjob"
			}
			if r.chance(0.3) {
				e.dedup = fmt.Sprintf("d%d", r.pick(3))
			}
			if r.chance(0.3) {
				e.nb = next.Add(time.Duration(r.pick(60_000))*time.Millisecond + r.micro())
			}
			if r.chance(0.25) {
				base := next
				if !e.nb.IsZero() {
					base = e.nb
				}
				e.na = base.Add(time.Duration(1+r.pick(120_000))*time.Millisecond + r.micro())
			}
			add(e)
			triggered = append(triggered, e.job+"!"+e.label)
		case k < 45:
			var label string
			if len(triggered) > 0 && r.chance(0.6) {
				label = triggered[r.pick(len(triggered))]
			} else {
				// A recent tick of a cron job.
				d := defs[r.pick(len(defs))]
				if d.Schedule == nil {
					continue
				}
				tick := d.Schedule.Next(next.Add(-time.Duration(1+r.pick(30)) * time.Second))
				if tick.IsZero() {
					continue
				}
				label = model.RunKey{Job: d.Name, Trigger: jobs.TriggerSchedule, At: tick}.String()
			}
			add(simEvent{at: next, kind: model.Cancel, label: label})
		case k < 55:
			kind := model.Pause
			if r.chance(0.5) {
				kind = model.Resume
			}
			add(simEvent{at: next, kind: kind, job: current[r.pick(len(current))].name})
		case k < 70:
			// Reload: add, remove or change jobs.
			js := slices.Clone(current)
			switch m := r.pick(3); {
			case m == 0 && len(js) > 1:
				i := r.pick(len(js))
				js = slices.Delete(js, i, i+1)
			case m == 1:
				n := names[r.pick(len(names))]
				if slices.ContainsFunc(js, func(j genJob) bool { return j.name == n }) {
					break
				}
				j, ok := pool[n]
				if !ok || r.chance(0.5) {
					j = drawJob(daemon, func() genJob { return r.newJob(n, next) })
				}
				pool[n] = j
				js = append(js, j)
			default:
				i := r.pick(len(js))
				old := js[i]
				js[i] = drawJob(daemon, func() genJob { return r.mutate(old, next) })
				pool[js[i].name] = js[i]
			}
			current = js
			cfg = render(current)
			defs = defsOf(cfg)
			add(simEvent{at: next, kind: model.Reload, cfg: cfg})
		case k < 85:
			add(simEvent{at: next, kind: model.Stop})
			if grace > 0 && r.chance(0.15) {
				// SIGKILL during the shutdown grace.
				add(simEvent{at: at.Add(r.between(time.Millisecond, grace)), kind: model.Kill})
			} else {
				at = at.Add(grace + time.Second)
			}
			up = false
		case k < 95:
			add(simEvent{at: next, kind: model.Kill})
			up = false
		default:
			at = next // quiet
		}
	}
	if !up {
		add(simEvent{at: at.Add(time.Duration(1+r.pick(60))*time.Second + r.micro()), kind: model.Start, cfg: cfg})
	}
	// The end: every schedule paused, the runs left to end, then a stop.
	for _, d := range defs {
		if d.Schedule != nil {
			add(simEvent{at: at.Add(time.Second + r.micro()), kind: model.Pause, job: d.Name})
		}
	}
	add(simEvent{at: at.Add(drainTime), kind: model.Stop})
	sc.end = at.Add(grace + time.Minute)
	if mode := cmp.Or(seedJumps[seed], *simJumps); mode != "off" {
		sc.addJumps(phase, mode == "all")
	}
	return sc
}

// seedJumps says how the regression seeds step the clock, as
// testdata/sim-seeds.txt marks them: off for those drawn before the
// generator stepped it, on (forward) or all (both ways); others step it
// as -sim.jumps says.
var seedJumps = map[int64]string{}

// addJumps steps the clock now and then during the first phase of the
// timeline: 4 timelines in 10 have 1 to 3 steps, on or back, by seconds
// to minutes or by an hour. They are drawn from a stream of their own, so
// that the rest of the timeline is the one drawn without them; the events
// after a step move with it, as the wall clock they are given in does.
func (sc *scenario) addJumps(phase time.Duration, back bool) {
	var key [24]byte
	binary.BigEndian.PutUint64(key[:8], uint64(sc.seed))
	binary.BigEndian.PutUint64(key[8:16], uint64(sc.draw))
	copy(key[16:], "jumps")
	sum := sha256.Sum256(key[:])
	r := simRand{rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))}
	if !r.chance(0.4) {
		return
	}
	var jumps []simEvent
	for range 1 + r.pick(3) {
		e := simEvent{at: sc.t0.Add(r.between(time.Second, phase) + r.micro()), kind: model.Jump}
		switch k := r.pick(10); {
		case k < 4:
			e.delta = r.between(time.Second, 2*time.Minute)
		case k < 8:
			e.delta = -r.between(time.Second, 2*time.Minute)
		case k < 9:
			e.delta = time.Hour
		default:
			e.delta = -time.Hour
		}
		if e.delta < 0 && !back {
			e.delta = -e.delta
		}
		jumps = append(jumps, e)
	}
	slices.SortFunc(jumps, func(a, b simEvent) int { return a.at.Compare(b.at) })
	var out []simEvent
	var shift time.Duration
	for _, e := range sc.events {
		for len(jumps) > 0 && jumps[0].at.Before(e.at) {
			j := jumps[0]
			jumps = jumps[1:]
			j.at = j.at.Add(shift)
			out = append(out, j)
			shift += j.delta
		}
		e.at = e.at.Add(shift)
		if !e.nb.IsZero() {
			e.nb = e.nb.Add(shift)
		}
		if !e.na.IsZero() {
			e.na = e.na.Add(shift)
		}
		out = append(out, e)
	}
	sc.events = out
	sc.end = sc.end.Add(shift)
}

// steppedBack reports whether the timeline steps the clock back.
func (sc *scenario) steppedBack() bool {
	return slices.ContainsFunc(sc.events, func(e simEvent) bool { return !e.dropped && e.kind == model.Jump && e.delta < 0 })
}

// modelEvents turns the timeline into the model's events; dropped events
// (shrinking) are left out.
func (sc *scenario) modelEvents() ([]model.Event, []int) {
	var out []model.Event
	var index []int
	for i, e := range sc.events {
		if e.dropped {
			continue
		}
		me := model.Event{At: e.at, Kind: e.kind, Job: e.job, Label: e.label, DedupID: e.dedup, NotBefore: e.nb, NotAfter: e.na,
			Delta: e.delta}
		if e.kind == model.Start || e.kind == model.Reload {
			c, err := config.Parse("sim.toml", []byte(sc.configs[e.cfg]))
			if err != nil {
				panic(err)
			}
			me.Jobs = c.Jobs
		}
		if e.kind == model.Cancel {
			me.Label = e.label
		}
		out = append(out, me)
		index = append(index, i)
	}
	return out, index
}

// settings are the model's settings of the scenario's daemon.
func (sc *scenario) settings() model.Settings {
	c, err := config.Parse("sim.toml", []byte(sc.configs[0]))
	if err != nil {
		panic(err)
	}
	return model.Settings{Concurrency: c.Daemon.Concurrency, ShutdownGrace: c.Daemon.ShutdownGrace, RetryRand: 0}
}

// outcome is how attempt number attempt of the run key ends: a pure
// function of the seed, the run and the attempt.
func (sc *scenario) outcome(key model.RunKey, attempt int) (time.Duration, bool) {
	h := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%d", sc.seed, key, attempt))
	r := rand.New(rand.NewPCG(binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:16])))
	p := sc.profiles[key.Job]
	if r.Float64() < p.hang {
		return 1000 * time.Hour, false
	}
	d := p.min + time.Duration(r.Int64N(int64(p.max-p.min)))
	d = d.Truncate(time.Microsecond) + time.Duration(1+r.IntN(999))*time.Microsecond
	return d, r.Float64() >= p.fail
}

// String lists the timeline, one event a line.
func (sc *scenario) String() string {
	evs, index := sc.modelEvents()
	var b strings.Builder
	cfgShown := map[int]bool{}
	for i, e := range evs {
		se := sc.events[index[i]]
		fmt.Fprintf(&b, "  #%d %s\n", index[i], e)
		if (se.kind == model.Start || se.kind == model.Reload) && !cfgShown[se.cfg] {
			cfgShown[se.cfg] = true
			for _, l := range strings.Split(strings.TrimSpace(sc.configs[se.cfg]), "\n") {
				fmt.Fprintf(&b, "      | %s\n", l)
			}
		}
	}
	return b.String()
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}

package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/command"
	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// Bounds of job settings.
const (
	// MinOutputLimit and MaxOutputLimit bound output_limit, in bytes.
	MinOutputLimit = 1 << 10
	MaxOutputLimit = 16 << 20
	// MaxCatchupMax bounds catchup_max.
	MaxCatchupMax = 100000
	// MaxAttempts bounds retry.max_attempts, as jobs.RetryPolicy does.
	MaxAttempts = 1000
)

// namePattern is the form of job names and node ids.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// envNamePattern is the form of a variable name in env.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnvPrefix starts the variables the daemon sets for a job.
const reservedEnvPrefix = "SCHEDULERD_"

// ValidJobName reports whether name may name a job: up to 128 letters,
// digits, '.', '_' and '-', starting with a letter or digit.
func ValidJobName(name string) bool { return namePattern.MatchString(name) }

// ValidEnvName reports whether a job's env may set the variable name: letters,
// digits and '_', not starting with a digit nor with SCHEDULERD_.
func ValidEnvName(name string) bool {
	return envNamePattern.MatchString(name) && !strings.HasPrefix(name, reservedEnvPrefix)
}

var (
	topKeys = []string{"daemon", "defaults", "job", "notifier", "token"}
	// jobOnlyKeys may be set in a [[job]] but not in [defaults].
	jobOnlyKeys = []string{"name", "schedule", "at", "command", "shell", "not_before", "not_after", "expect_success_within",
		"on_success", "on_failure"}
	// settingKeys may be set in a [[job]] and in [defaults].
	settingKeys = []string{
		"timeout", "kill_grace", "misfire_grace", "overlap", "catchup", "catchup_window",
		"catchup_max", "start_deadline", "jitter", "max_concurrency", "retry", "no_retry_exit_codes",
		"timezone", "workdir", "user", "env", "output_limit", "notify",
	}
	jobKeys   = slices.Concat(jobOnlyKeys, settingKeys)
	retryKeys = []string{"max_attempts", "backoff", "initial_delay", "max_delay", "jitter"}
)

// opt is a setting that may be absent.
type opt[T any] struct {
	v   T
	set bool
}

func (o *opt[T]) put(v T) { o.v, o.set = v, true }

// get returns the value of o when it is set, else d.
func (o opt[T]) get(d T) T {
	if o.set {
		return o.v
	}
	return d
}

// or returns o when it is set, else d.
func (o opt[T]) or(d opt[T]) opt[T] {
	if o.set {
		return o
	}
	return d
}

// settings are the keys a job may take from [defaults].
type settings struct {
	timezone                                                       opt[*time.Location]
	workdir, user                                                  opt[string]
	env                                                            map[string]string // nil when not set
	timeout, killGrace, misfireGrace, catchupWindow, startDeadline opt[time.Duration]
	jitter                                                         opt[time.Duration]
	overlap                                                        opt[jobs.Overlap]
	catchup                                                        opt[jobs.Catchup]
	catchupMax, maxConcurrency, outputLimit                        opt[int]
	noRetryExitCodes                                               opt[[]int]
	notify                                                         opt[[]string]
	retry                                                          retrySettings
}

type retrySettings struct {
	maxAttempts            opt[int]
	backoff                opt[jobs.Backoff]
	initialDelay, maxDelay opt[time.Duration]
	jitter                 opt[bool]
}

// rawJob is a [[job]] table (or [defaults]) as read, before defaults.
type rawJob struct {
	sc scope
	m  map[string]any
	settings
	name                    opt[string]
	schedule                opt[string]
	at, notBefore, notAfter opt[time.Time]
	command                 opt[[]string]
	shell                   opt[string]
	expectSuccessWithin     opt[time.Duration]
	onSuccess, onFailure    opt[[]string]
}

// readJob reads a [[job]] table, or [defaults] when defaults is set. m may
// be nil (no [defaults]).
func (p *parser) readJob(sc scope, m map[string]any, defaults bool) *rawJob {
	j := &rawJob{sc: sc, m: m}
	if !defaults {
		if v, ok := m["name"]; !ok {
			p.errorf(sc, "name", "is required")
		} else if name, ok := p.nonEmpty(sc, "name", v); ok {
			if namePattern.MatchString(name) {
				j.name.put(name)
				j.sc.label = fmt.Sprintf("job %q: ", name)
				sc = j.sc
			} else {
				p.errorf(sc, "name", "%s is not a valid job name: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", clip(fmt.Sprintf("%q", name)))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if defaults && slices.Contains(jobOnlyKeys, k) {
			p.errorf(sc, k, "cannot be set in [defaults]; set it in each [[job]]")
			continue
		}
		switch k {
		case "name":
		case "schedule":
			if s, ok := p.nonEmpty(sc, k, v); ok {
				j.schedule.put(s)
			}
		case "at":
			p.putTime(&j.at, sc, k, v)
		case "not_before":
			p.putTime(&j.notBefore, sc, k, v)
		case "not_after":
			p.putTime(&j.notAfter, sc, k, v)
		case "expect_success_within":
			if d, ok := p.duration(sc, k, v, positive); ok {
				if d < time.Minute {
					p.errorf(sc, k, "must be at least 1m, got %s", d)
				} else {
					j.expectSuccessWithin.put(d)
				}
			}
		case "on_success":
			p.putChain(&j.onSuccess, sc, k, v)
		case "on_failure":
			p.putChain(&j.onFailure, sc, k, v)
		case "command":
			if args, ok := p.command(sc, k, v); ok {
				j.command.put(args)
			}
		case "shell":
			if _, isList := v.([]any); isList {
				p.errorf(sc, k, "must be a string (a command line for /bin/sh -c); for a list of arguments use command")
			} else if s, ok := p.nonEmpty(sc, k, v); ok {
				j.shell.put(s)
			}
		default:
			if !slices.Contains(settingKeys, k) {
				p.unknownJobKey(sc, k, defaults)
				continue
			}
			p.setting(sc, &j.settings, k, v)
		}
	}
	return j
}

// unknownJobKey reports an unknown key of a [[job]] or of [defaults].
func (p *parser) unknownJobKey(sc scope, k string, defaults bool) {
	if slices.Contains(daemonKeys, k) {
		where := "[[job]]"
		if defaults {
			where = "[defaults]"
		}
		p.errorf(sc, k, "unknown key in %s; %s is a [daemon] setting", where, k)
		return
	}
	known := jobKeys
	if defaults {
		known = settingKeys
	}
	p.unknown(sc, k, known)
}

// putTime reads key k of sc as a datetime into o.
func (p *parser) putTime(o *opt[time.Time], sc scope, k string, v any) {
	if t, ok := p.datetime(sc, k, v); ok {
		o.put(t)
	}
}

// setting reads a key that a job may also take from [defaults].
func (p *parser) setting(sc scope, s *settings, k string, v any) {
	putDuration := func(o *opt[time.Duration], rule durationRule) {
		if d, ok := p.duration(sc, k, v, rule); ok {
			o.put(d)
		}
	}
	putInt := func(o *opt[int], lo, hi int64) {
		if n, ok := p.integer(sc, k, v, lo, hi); ok {
			o.put(n)
		}
	}
	// none: a job without the bound that [defaults] or the product
	// default would give it (jobs.Definition reads a negative timeout so).
	putDurationOrNone := func(o *opt[time.Duration], none time.Duration) {
		if v == "none" {
			o.put(none)
			return
		}
		putDuration(o, positiveOrNone)
	}
	switch k {
	case "timeout":
		putDurationOrNone(&s.timeout, -1)
	case "kill_grace":
		putDuration(&s.killGrace, positive)
	case "misfire_grace":
		putDuration(&s.misfireGrace, positive)
	case "catchup_window":
		putDuration(&s.catchupWindow, positive)
	case "start_deadline":
		putDurationOrNone(&s.startDeadline, 0)
	case "jitter":
		putDuration(&s.jitter, nonNegative)
	case "catchup_max":
		putInt(&s.catchupMax, 1, MaxCatchupMax)
	case "max_concurrency":
		putInt(&s.maxConcurrency, 0, 1<<31-1)
	case "output_limit":
		putInt(&s.outputLimit, MinOutputLimit, MaxOutputLimit)
	case "overlap":
		if x, ok := p.oneOf(sc, k, v, string(jobs.OverlapAllow), string(jobs.OverlapSkip), string(jobs.OverlapQueue), string(jobs.OverlapReplace)); ok {
			s.overlap.put(jobs.Overlap(x))
		}
	case "catchup":
		if x, ok := p.oneOf(sc, k, v, string(jobs.CatchupNone), string(jobs.CatchupLatest), string(jobs.CatchupAll)); ok {
			s.catchup.put(jobs.Catchup(x))
		}
	case "timezone":
		if name, ok := p.str(sc, k, v); ok {
			if name == "" {
				p.errorf(sc, k, "must not be empty; leave it out for the local time zone")
			} else if loc, err := p.zone(name); err != nil {
				p.errorf(sc, k, "unknown time zone %s", clip(fmt.Sprintf("%q", name)))
			} else {
				s.timezone.put(loc)
			}
		}
	case "workdir":
		if dir, ok := p.nonEmpty(sc, k, v); ok {
			if !filepath.IsAbs(dir) {
				p.errorf(sc, k, "must be an absolute path, got %s", clip(fmt.Sprintf("%q", dir)))
			} else {
				s.workdir.put(filepath.Clean(dir))
			}
		}
	case "user":
		if name, ok := p.nonEmpty(sc, k, v); ok {
			if err := p.lookupUser(name); err != nil {
				p.errorf(sc, k, "%v", err)
			} else {
				s.user.put(name)
			}
		}
	case "env":
		s.env = p.env(sc, k, v)
	case "no_retry_exit_codes":
		if codes, ok := p.exitCodes(sc, k, v); ok {
			s.noRetryExitCodes.put(codes)
		}
	case "retry":
		p.retry(sc, &s.retry, k, v)
	case "notify":
		if names, ok := p.notify(sc, k, v, p.notifierNames); ok {
			s.notify.put(names)
		}
	}
}

// command reads a non-empty list of non-empty strings.
func (p *parser) command(sc scope, k string, v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		if _, isString := v.(string); isString {
			p.errorf(sc, k, `must be a list such as ["/usr/local/bin/backup", "--full"]; for a shell command line use shell`)
		} else {
			p.errorf(sc, k, "must be a list of strings, not %s", typeName(v))
		}
		return nil, false
	}
	if len(list) == 0 {
		p.errorf(sc, k, "must not be empty: the first element is the program")
		return nil, false
	}
	args := make([]string, len(list))
	for i, e := range list {
		s, isString := e.(string)
		switch {
		case !isString:
			p.errorf(sc, k, "element %d must be a string, not %s", i, typeName(e))
			return nil, false
		case s == "":
			p.errorf(sc, k, "element %d is empty", i)
			return nil, false
		case strings.IndexByte(s, 0) >= 0:
			p.errorf(sc, k, "element %d must not contain a NUL byte", i)
			return nil, false
		}
		args[i] = s
	}
	return args, true
}

// env reads a table of environment variables.
func (p *parser) env(sc scope, k string, v any) map[string]string {
	m, ok := p.table(sc, k, v, `{ NAME = "value" }`)
	if !ok {
		return nil
	}
	esc := sc.sub(k)
	env := make(map[string]string, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		switch {
		case !envNamePattern.MatchString(name):
			p.errorf(esc, name, "is not a valid variable name: use letters, digits and '_', not starting with a digit")
			continue
		case strings.HasPrefix(name, reservedEnvPrefix):
			p.errorf(esc, name, "names starting with %s are set by the daemon", reservedEnvPrefix)
			continue
		}
		if s, ok := p.str(esc, name, m[name]); ok {
			env[name] = s
		}
	}
	return env
}

// exitCodes reads a list of exit codes.
func (p *parser) exitCodes(sc scope, k string, v any) ([]int, bool) {
	list, ok := v.([]any)
	if !ok {
		p.errorf(sc, k, "must be a list of exit codes such as [2, 3], not %s", typeName(v))
		return nil, false
	}
	codes := make([]int, 0, len(list))
	for i, e := range list {
		n, isInt := e.(int64)
		if !isInt || n < 1 || n > 255 {
			p.errorf(sc, k, "element %d must be an exit code from 1 to 255, got %s", i, typeName(e))
			return nil, false
		}
		codes = append(codes, int(n))
	}
	return codes, true
}

// retry reads the retry table into r.
func (p *parser) retry(sc scope, r *retrySettings, k string, v any) {
	m, ok := p.table(sc, k, v, `{ max_attempts = 5, backoff = "exponential" }`)
	if !ok {
		return
	}
	rsc := sc.sub(k)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "max_attempts":
			if n, ok := p.integer(rsc, k, v, 1, MaxAttempts); ok {
				r.maxAttempts.put(n)
			}
		case "backoff":
			if s, ok := p.oneOf(rsc, k, v, string(jobs.BackoffFixed), string(jobs.BackoffExponential)); ok {
				r.backoff.put(jobs.Backoff(s))
			}
		case "initial_delay":
			if d, ok := p.duration(rsc, k, v, nonNegative); ok {
				r.initialDelay.put(d)
			}
		case "max_delay":
			if d, ok := p.duration(rsc, k, v, nonNegative); ok {
				r.maxDelay.put(d)
			}
		case "jitter":
			if b, ok := p.boolean(rsc, k, v); ok {
				r.jitter.put(b)
			}
		default:
			p.unknown(rsc, k, retryKeys)
		}
	}
}

// zone loads a time zone, once per name.
func (p *parser) zone(name string) (*time.Location, error) {
	if z, ok := p.zones[name]; ok {
		return z.loc, z.err
	}
	loc, err := time.LoadLocation(name)
	p.zones[name] = zoneResult{loc, err}
	return loc, err
}

// lookupUser checks that a user exists, once per name.
func (p *parser) lookupUser(name string) error {
	if err, ok := p.users[name]; ok {
		return err
	}
	_, err := command.LookupUser(name)
	p.users[name] = err
	return err
}

// build merges a job with the defaults and makes its definition; nil when
// the job has problems (they are recorded). before is the number of
// problems recorded before the job was read.
func (p *parser) build(j, defaults *rawJob, before int) *jobs.Definition {
	sc := j.sc
	s := merge(&j.settings, &defaults.settings)

	_, hasCommand := j.m["command"]
	_, hasShell := j.m["shell"]
	switch {
	case hasCommand && hasShell:
		p.errorf(sc, "shell", "set only one of command and shell")
	case !hasCommand && !hasShell:
		p.errorf(sc, "command", `is required: set command = ["/path/to/program", "arg"] or shell = "a command line"`)
	}

	loc := time.Local
	if s.timezone.set {
		loc = s.timezone.v
	}
	def := &jobs.Definition{
		Name:                j.name.v,
		Command:             j.command.v,
		Shell:               j.shell.v,
		Workdir:             s.workdir.v,
		User:                s.user.v,
		Env:                 s.env,
		Timeout:             s.timeout.v,
		KillGrace:           s.killGrace.v,
		MisfireGrace:        s.misfireGrace.v,
		Overlap:             s.overlap.v,
		Catchup:             s.catchup.v,
		CatchupWindow:       s.catchupWindow.v,
		CatchupMax:          s.catchupMax.v,
		StartDeadline:       s.startDeadline.v,
		Jitter:              s.jitter.v,
		MaxConcurrency:      s.maxConcurrency.v,
		NoRetryExitCodes:    s.noRetryExitCodes.v,
		OutputLimit:         s.outputLimit.v,
		Notify:              p.targets(s.notify.v),
		ExpectSuccessWithin: j.expectSuccessWithin.v,
		OnSuccess:           j.onSuccess.v,
		OnFailure:           j.onFailure.v,
		Retry: jobs.RetryPolicy{
			MaxAttempts:  s.retry.maxAttempts.get(jobs.DefaultRetry.MaxAttempts),
			Backoff:      s.retry.backoff.get(jobs.DefaultRetry.Backoff),
			InitialDelay: s.retry.initialDelay.get(jobs.DefaultRetry.InitialDelay),
			MaxDelay:     s.retry.maxDelay.get(jobs.DefaultRetry.MaxDelay),
			Jitter:       s.retry.jitter.get(jobs.DefaultRetry.Jitter),
		},
	}

	_, hasSchedule := j.m["schedule"]
	_, hasAt := j.m["at"]
	if hasSchedule && hasAt {
		p.errorf(sc, "at", "set either schedule or at, not both")
	} else if j.schedule.set {
		sched, err := schedule.Parse(j.schedule.v, loc)
		if err != nil {
			// The parser's message starts with `schedule "spec": `.
			p.errorf(sc, "schedule", "%s", strings.TrimPrefix(err.Error(), "schedule "))
		} else {
			def.Schedule = sched
		}
	}
	if j.at.set {
		def.At = inZone(j.at.v, loc)
	}
	if j.notBefore.set {
		def.NotBefore = inZone(j.notBefore.v, loc)
	}
	if j.notAfter.set {
		def.NotAfter = inZone(j.notAfter.v, loc)
		switch {
		case j.notBefore.set && !def.NotAfter.After(def.NotBefore):
			p.errorf(sc, "not_after", "must be after not_before (%s)", def.NotBefore.Format(time.RFC3339))
		case j.at.set && !def.NotAfter.After(def.At):
			p.errorf(sc, "not_after", "must be after at (%s)", def.At.Format(time.RFC3339))
		}
	}
	jitterOK := def.Schedule == nil || p.checkJitter(j, s)
	if len(p.errs) > before || !j.name.set || !jitterOK {
		return nil
	}

	def.WithDefaults()
	if err := def.Validate(); err != nil {
		// Messages of Validate start with the key: put the error on its line.
		msg := err.Error()
		key, rest, ok := strings.Cut(msg, ": ")
		if !ok || strings.ContainsAny(key, " \"") {
			key, rest = "", msg
		}
		if key == "" {
			p.errAt(p.line(sc.path), strings.TrimRight(sc.label, ": ."), "%s", rest)
		} else {
			p.errAt(p.line(joinPath(sc.path, key)), sc.label+key, "%s", rest)
		}
		return nil
	}
	return def
}

// checkJitter reports whether a cron job's jitter leaves its runs time to
// start before start_deadline, which counts from the tick. The problem is
// recorded as the job's when it sets either key; otherwise both come from
// [defaults], where checkDefaults recorded it once.
func (p *parser) checkJitter(j *rawJob, s settings) bool {
	jitter, deadline := s.jitter.v, s.startDeadline.v
	if jitter <= 0 || deadline <= 0 || deadline > jitter {
		return true
	}
	switch {
	case j.jitter.set:
		p.errorf(j.sc, "jitter", "must be shorter than start_deadline (%s), which counts from the tick", deadline)
	case j.startDeadline.set:
		p.errorf(j.sc, "start_deadline", "must be longer than jitter (%s): it counts from the tick, and a run may start up to jitter after it", jitter)
	}
	return false
}

// checkDefaults checks the settings of [defaults] that depend on each
// other, which every job that sets neither inherits together.
func (p *parser) checkDefaults(d *rawJob) {
	jitter, deadline := d.jitter, d.startDeadline
	if jitter.set && deadline.set && jitter.v > 0 && deadline.v > 0 && deadline.v <= jitter.v {
		p.errorf(d.sc, "jitter", "must be shorter than start_deadline (%s), which counts from the tick", deadline.v)
	}
}

// merge returns the settings of a job: its own, else the defaults'. Retry
// merges field by field and env key by key.
func merge(job, defaults *settings) settings {
	s := settings{
		timezone:         job.timezone.or(defaults.timezone),
		workdir:          job.workdir.or(defaults.workdir),
		user:             job.user.or(defaults.user),
		timeout:          job.timeout.or(defaults.timeout),
		killGrace:        job.killGrace.or(defaults.killGrace),
		misfireGrace:     job.misfireGrace.or(defaults.misfireGrace),
		catchupWindow:    job.catchupWindow.or(defaults.catchupWindow),
		startDeadline:    job.startDeadline.or(defaults.startDeadline),
		jitter:           job.jitter.or(defaults.jitter),
		overlap:          job.overlap.or(defaults.overlap),
		catchup:          job.catchup.or(defaults.catchup),
		catchupMax:       job.catchupMax.or(defaults.catchupMax),
		maxConcurrency:   job.maxConcurrency.or(defaults.maxConcurrency),
		outputLimit:      job.outputLimit.or(defaults.outputLimit),
		noRetryExitCodes: job.noRetryExitCodes.or(defaults.noRetryExitCodes),
		notify:           job.notify.or(defaults.notify),
		retry: retrySettings{
			maxAttempts:  job.retry.maxAttempts.or(defaults.retry.maxAttempts),
			backoff:      job.retry.backoff.or(defaults.retry.backoff),
			initialDelay: job.retry.initialDelay.or(defaults.retry.initialDelay),
			maxDelay:     job.retry.maxDelay.or(defaults.retry.maxDelay),
			jitter:       job.retry.jitter.or(defaults.retry.jitter),
		},
	}
	if job.env != nil || defaults.env != nil {
		s.env = make(map[string]string, len(job.env)+len(defaults.env))
		maps.Copy(s.env, defaults.env)
		maps.Copy(s.env, job.env)
	}
	if s.noRetryExitCodes.set {
		s.noRetryExitCodes.v = slices.Clone(s.noRetryExitCodes.v)
	}
	if len(s.notify.v) == 0 {
		s.notify.v = nil // notify = [] in a job: no one, as when neither sets it
	} else {
		s.notify.v = slices.Clone(s.notify.v)
	}
	return s
}

package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Target is what a figure should reach: at most (Op "<=") or at least
// (Op ">=") Value.
type Target struct {
	Op    string
	Value float64
}

// atMost and atLeast build targets.
func atMost(v float64) *Target  { return &Target{Op: "<=", Value: v} }
func atLeast(v float64) *Target { return &Target{Op: ">=", Value: v} }

// Figure is one measured value of the report.
type Figure struct {
	Section string // "1 throughput", ...
	Name    string // what was measured
	Store   string // SQLite, PostgreSQL, robfig/cron, or "-"
	Value   float64
	Unit    string // runs/s, ms, ...
	// Text is the measured value as shown; Value formatted when empty.
	Text   string
	Target *Target
	Note   string
}

// Verdict says whether the figure met its target, and when it missed, by
// what factor (always >= 1: how far off the measured value is).
func (f Figure) Verdict() string {
	t := f.Target
	if t == nil {
		return "-"
	}
	if math.IsNaN(f.Value) {
		return "not measured"
	}
	switch t.Op {
	case "<=":
		if f.Value <= t.Value {
			return "met"
		}
		if t.Value == 0 {
			return "missed"
		}
		return fmt.Sprintf("missed by %.2fx", f.Value/t.Value)
	default:
		if f.Value >= t.Value {
			return "met"
		}
		if f.Value <= 0 {
			return "missed (nothing measured)"
		}
		return fmt.Sprintf("missed by %.2fx", t.Value/f.Value)
	}
}

// measured is the figure's value as shown.
func (f Figure) measured() string {
	if f.Text != "" {
		return f.Text
	}
	if math.IsNaN(f.Value) {
		return "n/a"
	}
	return withUnit(f.Value, f.Unit)
}

// target is the figure's target as shown.
func (f Figure) target() string {
	if f.Target == nil {
		return "-"
	}
	return f.Target.Op + " " + withUnit(f.Target.Value, f.Unit)
}

// withUnit formats a value and its unit ("12 ms", "1.5x", "0.5% of a core").
func withUnit(v float64, unit string) string {
	if unit == "x" || strings.HasPrefix(unit, "%") {
		return num(v) + unit
	}
	return num(v) + " " + unit
}

// num formats a value with a sensible precision and thousands separators.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return num(float64(d)/float64(time.Millisecond)) + " ms" }

// Report collects the figures, the raw numbers, the notes on method and the
// failed checks of a run, prints each figure as it comes, and renders
// BENCHMARKS.md at the end.
type Report struct {
	mu       sync.Mutex
	out      io.Writer // the live table
	started  time.Time
	figures  []Figure
	raw      map[string][]string // by section
	notes    map[string][]string // by section
	failures []string
	sections []string // in the order they ran
	// redact hides machine paths (the temporary directory, the checkout)
	// in everything the report writes.
	redact *strings.Replacer
}

// SetRedactions makes the report write each old string of the pairs
// (old, new, old, new, ...) as its new one; earlier pairs win.
func (r *Report) SetRedactions(pairs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redact = strings.NewReplacer(pairs...)
}

// clean applies the redactions.
func (r *Report) clean(s string) string {
	if r.redact == nil {
		return s
	}
	return r.redact.Replace(s)
}

// NewReport returns a report that prints figures to out as they come.
func NewReport(out io.Writer) *Report {
	return &Report{out: out, started: time.Now(), raw: map[string][]string{}, notes: map[string][]string{}}
}

// Section starts a section; its figures, notes and raw numbers follow.
func (r *Report) Section(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sections = append(r.sections, name)
	fmt.Fprintf(r.out, "\n== %s ==\n", name)
}

// Add records a figure and prints it.
func (r *Report) Add(f Figure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f.Note, f.Text = r.clean(f.Note), r.clean(f.Text)
	r.figures = append(r.figures, f)
	tw := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  %-46s\t%-11s\t%-22s\t%-18s\t%s\n", f.Name, f.Store, f.measured(), f.target(), f.Verdict())
	tw.Flush()
}

// Rawf records a raw number (one line) of a section and prints it.
func (r *Report) Rawf(section, format string, args ...any) {
	r.mu.Lock()
	line := r.clean(fmt.Sprintf(format, args...))
	defer r.mu.Unlock()
	r.raw[section] = append(r.raw[section], line)
	fmt.Fprintf(r.out, "    %s\n", line)
}

// Note records a note on method for a section (not printed live).
func (r *Report) Note(section, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes[section] = append(r.notes[section], r.clean(fmt.Sprintf(format, args...)))
}

// Failf records a failed correctness check; the program then exits non-zero.
func (r *Report) Failf(section, format string, args ...any) {
	r.mu.Lock()
	msg := r.clean(section + ": " + fmt.Sprintf(format, args...))
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
	fmt.Fprintf(r.out, "  CHECK FAILED: %s\n", msg)
}

// Failures returns the failed checks.
func (r *Report) Failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}

// Markdown renders the report as BENCHMARKS.md.
func (r *Report) Markdown(w io.Writer, command string, machine []string, settings []string, took time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks\n\n")
	p("Written by `%s` (the program in [`bench/`](bench/)); do not edit by hand.\n", command)
	p("Tests never assert on these figures. The benchmark reports them, and checks\n")
	p("correctness while it measures: a failed check makes it exit non-zero.\n\n")
	p("- Command: `%s`\n", command)
	p("- Date: %s (took %s)\n", r.started.UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	for _, m := range machine {
		p("- %s\n", m)
	}
	p("\n")
	if len(r.failures) > 0 {
		p("## Failed checks\n\n")
		for _, f := range r.failures {
			p("- %s\n", f)
		}
		p("\n")
	} else {
		p("Every correctness check passed.\n\n")
	}
	p("## Results\n\n")
	p("| # | figure | store | measured | target | verdict |\n")
	p("|---|---|---|---|---|---|\n")
	for _, f := range r.figures {
		name := f.Name
		if f.Note != "" {
			name += " (" + f.Note + ")"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", strings.SplitN(f.Section, " ", 2)[0], name, f.Store,
			f.measured(), f.target(), f.Verdict())
	}
	p("\n")
	if len(settings) > 0 {
		p("## Settings of this run\n\n")
		for _, s := range settings {
			p("- %s\n", s)
		}
		p("\n")
	}
	p("## Method and raw numbers\n\n")
	for _, s := range r.sections {
		p("### %s\n\n", s)
		for _, n := range r.notes[s] {
			p("%s\n\n", n)
		}
		if raw := r.raw[s]; len(raw) > 0 {
			p("```\n%s\n```\n\n", strings.Join(raw, "\n"))
		}
	}
	p("## How to reproduce\n\n")
	p("```sh\n")
	p("make bench                          # everything, full sizes (about 50 minutes); writes BENCHMARKS.md\n")
	p("go run ./bench -quick               # small sizes, a few minutes: checks that the program works\n")
	p("go run ./bench -only lag,idle       # some sections (throughput, cost, lag, idle, recovery, scale, pgbench, dashboard, burst)\n")
	p("go run ./bench -only throughput -stores postgres  # figure 1 on PostgreSQL alone, River beside it\n")
	p("go run ./bench -stores sqlite       # one store\n")
	p("go run ./bench -out FILE            # write the report elsewhere\n")
	p("```\n\n")
	p("PostgreSQL comes from `pg_config --bindir` (a throwaway server, as the tests start it),\n")
	p("or from `$SCHEDULERD_TEST_POSTGRES`. `-quick` and `-only` write no file unless `-out` is given.\n")
	_, err := io.WriteString(w, r.clean(b.String()))
	return err
}

// writeFile renders the report into path.
func (r *Report) writeFile(path, command string, machine, settings []string, took time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.Markdown(f, command, machine, settings, took); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

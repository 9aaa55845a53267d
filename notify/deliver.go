package notify

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/command"
	"github.com/schedulerd/schedulerd/store"
)

// Headers of a webhook request.
const (
	// HeaderID is the notification's id, also the payload's "id": the
	// receiver de-duplicates on it (a delivery is at least once).
	HeaderID = "X-Schedulerd-Id"
	// HeaderEvent is the event, as the payload's "event".
	HeaderEvent = "X-Schedulerd-Event"
	// HeaderTimestamp is the Unix time of the request, in seconds, which
	// the signature covers: a receiver refuses old ones (replays).
	HeaderTimestamp = "X-Schedulerd-Timestamp"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256, keyed by the
	// notifier's secret, of the timestamp, a '.', and the body.
	HeaderSignature = "X-Schedulerd-Signature"
)

// Sign returns the HeaderSignature value of a body sent at timestamp
// (Unix seconds) with secret.
func Sign(secret []byte, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is that of body at timestamp with
// secret, in constant time: what a receiver does.
func Verify(secret []byte, timestamp int64, body []byte, signature string) bool {
	return hmac.Equal([]byte(signature), []byte(Sign(secret, timestamp, body)))
}

// Target is a notifier as the Deliverer sends to it: a webhook, a
// command (Argv or Shell) or mail.
type Target struct {
	Name string
	// Webhook is the URL; Secret, when set, signs each body; Body, when
	// set, makes the body from the event's fields.
	Webhook string
	Secret  []byte
	Body    *template.Template
	// Argv or Shell run as User, with the event JSON on stdin.
	Argv  []string
	Shell string
	User  string
	// Mail, when set, mails each event.
	Mail *Mail
	// Timeout bounds one delivery.
	Timeout time.Duration
}

// Clock is the Deliverer's source of time; scheduler.RealClock and
// schedulertest.FakeClock are ones.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is as scheduler.Timer.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Config holds a Deliverer's settings.
type Config struct {
	Store store.Store
	// Node and Incarnation own the leases.
	Node        string
	Incarnation func() string
	// Concurrency bounds the deliveries at once. Default 4.
	Concurrency int
	// MaxAttempts is how many deliveries of a notification are tried
	// before it stays failed. Default 10.
	MaxAttempts int
	// Backoff spaces the attempts. Default: exponential from 5s to 10m,
	// with jitter.
	Backoff jobs.RetryPolicy
	// PollInterval is the longest the Deliverer sleeps when it knows of
	// nothing due: it then looks for notifications other nodes made.
	// Default 30s.
	PollInterval time.Duration
	// Wakeups, when set, wakes it when other nodes wrote (the store's
	// Wakeups).
	Wakeups <-chan struct{}
	// StoreClock passes a zero Now to the store (its clock rules).
	StoreClock bool
	Clock      Clock
	Logger     *slog.Logger
	// Rand returns floats in [0, 1) for the backoff's jitter.
	Rand func() float64
	// Version goes in the webhook's User-Agent.
	Version string
	// Hostname is the name this node gives itself to SMTP servers (EHLO).
	// Default: the host's name, or "localhost" when it is no domain name.
	Hostname string
}

func (c Config) withDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 10)
	if c.Backoff == (jobs.RetryPolicy{}) {
		c.Backoff = jobs.RetryPolicy{MaxAttempts: c.MaxAttempts, Backoff: jobs.BackoffExponential,
			InitialDelay: 5 * time.Second, MaxDelay: 10 * time.Minute, Jitter: true}
	}
	c.PollInterval = cmp.Or(c.PollInterval, 30*time.Second)
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	c.Version = cmp.Or(c.Version, "dev")
	if c.Hostname == "" {
		c.Hostname = ehloName()
	}
	return c
}

// ehloName is the host's name if it is a domain name (letters, digits,
// '-' and '.'), else "localhost".
func ehloName() string {
	name, err := os.Hostname()
	if err != nil || name == "" || len(name) > 253 ||
		strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" {
		return "localhost"
	}
	return name
}

// leaseMargin is how much longer than its notifier's timeout a lease
// lasts: the time to record the outcome.
const leaseMargin = 30 * time.Second

// minStoreClockWait is the shortest sleep of a Deliverer whose store's
// clock rules (see sleep).
const minStoreClockWait = 100 * time.Millisecond

// responseLimit bounds what is read of a webhook's response.
const responseLimit = 4 << 10

// Signals are test hooks: each, when set, receives a value when the
// Deliverer did that.
type Signals struct {
	// Finished receives the id of each notification whose attempt was
	// recorded.
	Finished chan string
	// Idle receives a value each time the Deliverer goes to sleep.
	Idle chan struct{}
}

// Deliverer sends the notifications of the outbox.
type Deliverer struct {
	cfg     Config
	log     *slog.Logger
	client  *http.Client
	Signals Signals

	mu      sync.Mutex
	targets map[string]*Target

	wake   chan struct{}
	slots  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// New makes a Deliverer of targets, by name.
func New(cfg Config, targets map[string]*Target) *Deliverer {
	cfg = cfg.withDefaults()
	d := &Deliverer{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "notify"),
		targets: targets,
		wake:    make(chan struct{}, 1),
		slots:   make(chan struct{}, cfg.Concurrency),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute,
				TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: time.Minute,
			},
			// A redirect is an answer that is not a success: a signed body
			// is never sent on to a URL that the config does not name.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	return d
}

// SetTargets swaps in the targets of a new config.
func (d *Deliverer) SetTargets(targets map[string]*Target) {
	d.mu.Lock()
	d.targets = targets
	d.mu.Unlock()
	d.Wake()
}

func (d *Deliverer) target(name string) *Target {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.targets[name]
}

// lease is how long a claim holds its notifications: the longest timeout
// of the targets, and a margin.
func (d *Deliverer) lease() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	longest := 10 * time.Second
	for _, t := range d.targets {
		longest = max(longest, t.Timeout)
	}
	return longest + leaseMargin
}

// Wake makes the Deliverer look for due notifications now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Start starts the delivery loop and returns.
func (d *Deliverer) Start(ctx context.Context) error {
	ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.done = make(chan struct{})
	go d.loop(ctx)
	return nil
}

// Stop ends the loop and waits for the deliveries in progress, which their
// timeouts bound (a notification whose delivery is cut short is left to
// its lease). It is idempotent.
func (d *Deliverer) Stop() {
	d.once.Do(func() {
		if d.cancel == nil {
			return
		}
		d.cancel()
		<-d.done
		d.wg.Wait()
	})
}

// loop claims due notifications while slots are free, and sleeps until
// the next is due, a wakeup, or PollInterval.
func (d *Deliverer) loop(ctx context.Context) {
	defer close(d.done)
	for ctx.Err() == nil {
		claimed, err := d.claim(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.WarnContext(ctx, "claim notifications", "error", err)
		}
		if claimed > 0 && err == nil {
			continue
		}
		d.sleep(ctx)
	}
}

// claim leases as many due notifications as there are free slots, and
// starts their deliveries.
func (d *Deliverer) claim(ctx context.Context) (int, error) {
	free := cap(d.slots) - len(d.slots)
	if free == 0 {
		return 0, nil
	}
	ns, err := d.cfg.Store.NotificationsClaim(ctx, store.NotificationsClaimParams{
		Node: d.cfg.Node, Incarnation: d.cfg.Incarnation(), Limit: free, Lease: d.lease(), Now: d.now(),
	})
	if err != nil {
		return 0, err
	}
	for _, n := range ns {
		d.slots <- struct{}{}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer func() { <-d.slots; d.Wake() }()
			d.deliver(ctx, n)
		}()
	}
	return len(ns), nil
}

func (d *Deliverer) now() time.Time {
	if d.cfg.StoreClock {
		return time.Time{}
	}
	return d.cfg.Clock.Now()
}

// sleep waits for a wakeup, the next due notification, or PollInterval.
func (d *Deliverer) sleep(ctx context.Context) {
	wait := d.cfg.PollInterval
	if cap(d.slots) > len(d.slots) {
		if next, err := d.cfg.Store.NotificationsNextDue(ctx); err == nil && !next.IsZero() {
			now := d.cfg.Clock.Now()
			if d.cfg.StoreClock {
				now = time.Now()
			}
			wait = min(wait, max(next.Sub(now), 0))
			if d.cfg.StoreClock {
				// next is by the database's clock: a host clock ahead of it
				// must not make the loop spin until the database catches up.
				wait = max(wait, minStoreClockWait)
			}
		}
	}
	if d.Signals.Idle != nil {
		select {
		case d.Signals.Idle <- struct{}{}:
		default:
		}
	}
	if wait <= 0 {
		return
	}
	t := d.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-d.cfg.Wakeups:
	case <-t.C():
	}
}

// deliver sends n and records the outcome.
func (d *Deliverer) deliver(ctx context.Context, n *store.Notification) {
	t := d.target(n.Notifier)
	var err error
	if t == nil {
		err = fmt.Errorf("notifier %q is not in this node's config", n.Notifier)
	} else {
		dctx, cancel := context.WithTimeout(ctx, t.Timeout)
		err = d.send(dctx, t, n)
		cancel()
		if err != nil && ctx.Err() != nil {
			return // stopping: the lease gives it to the next node to claim
		}
	}
	p := store.NotificationFinishParams{ID: n.ID, Incarnation: n.LeaseIncarnation, Delivered: err == nil, Now: d.now()}
	attempt := n.Attempts + 1
	if err != nil {
		p.Error = err.Error()
		if attempt >= d.cfg.MaxAttempts {
			p.Failed = true
			d.log.ErrorContext(ctx, "notification failed after its last attempt", "notifier", n.Notifier, "job", n.Job,
				"event", n.Event, "id", n.ID, "attempts", attempt, "error", err)
		} else {
			p.NextAttemptAt = d.cfg.Clock.Now().Add(d.cfg.Backoff.Delay(attempt, d.cfg.Rand))
			if d.cfg.StoreClock {
				p.NextAttemptAt = time.Now().Add(d.cfg.Backoff.Delay(attempt, d.cfg.Rand))
			}
			d.log.WarnContext(ctx, "notification not delivered; will retry", "notifier", n.Notifier, "job", n.Job,
				"event", n.Event, "id", n.ID, "attempt", attempt, "next_attempt_at", p.NextAttemptAt, "error", err)
		}
	} else {
		d.log.InfoContext(ctx, "notification delivered", "notifier", n.Notifier, "job", n.Job, "event", n.Event, "id", n.ID)
	}
	if ferr := d.cfg.Store.NotificationFinish(context.WithoutCancel(ctx), p); ferr != nil {
		d.log.WarnContext(ctx, "record notification", "id", n.ID, "error", ferr)
	}
	if d.Signals.Finished != nil {
		d.Signals.Finished <- n.ID
	}
}

// send delivers n to t once.
func (d *Deliverer) send(ctx context.Context, t *Target, n *store.Notification) error {
	switch {
	case t.Webhook != "":
		return d.post(ctx, t, n)
	case t.Mail != nil:
		return d.mail(ctx, t, n)
	}
	return run(ctx, t, n)
}

// Body returns the body of a webhook request of t for n: the event JSON,
// or t.Body run over its fields.
func Body(t *Target, payload []byte) ([]byte, error) {
	if t.Body == nil {
		return payload, nil
	}
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, fmt.Errorf("read the event: %w", err)
	}
	var b bytes.Buffer
	if err := t.Body.Execute(&b, fields); err != nil {
		return nil, fmt.Errorf("body_template: %w", err)
	}
	return b.Bytes(), nil
}

// post sends n to t's webhook. Errors never show the URL, whose path may
// be a secret: only its host.
func (d *Deliverer) post(ctx context.Context, t *Target, n *store.Notification) error {
	body, err := Body(t, n.Payload)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Webhook, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", stripURL(err))
	}
	host := req.URL.Host
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "schedulerd/"+d.cfg.Version)
	req.Header.Set(HeaderID, n.ID)
	req.Header.Set(HeaderEvent, string(n.Event))
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	if len(t.Secret) > 0 {
		req.Header.Set(HeaderSignature, Sign(t.Secret, ts, body))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook to %s: %w", host, stripURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, responseLimit))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection when cheap
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook to %s: %s: %s", host, resp.Status, clean(snippet, 200))
	}
	return nil
}

// stripURL drops the URL from an error of the HTTP client.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// clean makes a short printable message of a response body.
func clean(b []byte, n int) string {
	s := []rune(string(bytes.ToValidUTF8(b, []byte("?"))))
	for i, r := range s {
		if r < ' ' || r == 0x7f {
			s[i] = ' '
		}
	}
	if len(s) > n {
		s = append(s[:n], '.', '.', '.')
	}
	return string(s)
}

// run runs t's command with n's event on stdin, contained as a job is: its
// own process group and user, an environment of BaseEnv and the two
// variables below, the timeout.
func run(ctx context.Context, t *Target, n *store.Notification) error {
	res := command.Run(ctx, command.Spec{
		Argv: t.Argv, Shell: t.Shell, User: t.User, Stdin: n.Payload, OutputLimit: 2 << 10, KillGrace: 5 * time.Second,
		Env: map[string]string{"SCHEDULERD_NOTIFIER": t.Name, "SCHEDULERD_NOTIFICATION_ID": n.ID, "SCHEDULERD_EVENT": string(n.Event)},
	})
	switch {
	case res.StartErr != nil:
		return res.StartErr
	case res.Stopped:
		return fmt.Errorf("stopped after its timeout: %s", clean(res.Output.Tail, 200))
	case res.ExitCode != 0:
		return fmt.Errorf("exit code %d: %s", res.ExitCode, clean([]byte(res.Output.String()), 200))
	}
	return nil
}

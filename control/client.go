package control

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// maxReplyBytes bounds a reply the client reads whole. The attempts reply,
// which carries output of any size, is decoded as it comes instead.
const maxReplyBytes = 256 << 20

// Client calls the control API of a daemon over its unix socket, or over
// TCP with a bearer token (NewAPIClient). Its methods return *APIError for
// error replies (match them with errors.Is against the Err* kinds), and
// errors matching ErrDaemonNotRunning or ErrPermissionDenied when the
// socket cannot be reached.
type Client struct {
	// path is the socket, or the API's URL: what errors name.
	path string
	// base is what the paths of the API are appended to.
	base string
	// token is the API's bearer token; "" on the socket.
	token string
	hc    *http.Client
	// Timeout bounds each request except long polls. Default 30s.
	Timeout time.Duration
	// attemptToken is sent as AttemptTokenHeader when set.
	attemptToken string
}

// SetAttemptToken makes the client act as attempt number attempt of the
// run whose token it is (a job's SCHEDULERD_ATTEMPT and
// SCHEDULERD_ATTEMPT_TOKEN): the daemon then takes its progress reports
// and a cancel of that run, and nothing else.
func (c *Client) SetAttemptToken(attempt int, token string) {
	c.attemptToken = strconv.Itoa(attempt) + ":" + token
}

// NewClient returns a client of the socket at socketPath.
func NewClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:       2,
		IdleConnTimeout:    30 * time.Second,
		DisableCompression: true,
	}
	hc := &http.Client{Transport: tr, CheckRedirect: noRedirects}
	return &Client{path: socketPath, base: "http://schedulerd", hc: hc, Timeout: 30 * time.Second}
}

// NewAPIClient returns a client of the HTTP API at rawURL (api_listen:
// https://host:8080, or with a path prefix when a reverse proxy serves it
// under one) that sends token as its bearer token. It refuses a URL with
// credentials, a query or a fragment, and plain http:// to a host that is
// not a loopback address (127.0.0.0/8, ::1, localhost): the token would
// cross the network in clear. The certificate of an https:// URL is
// checked against the system's roots, which SSL_CERT_FILE and
// SSL_CERT_DIR can name.
func NewAPIClient(rawURL, token string) (*Client, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the API's URL %s: %w", clip(strconv.Quote(rawURL)), err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("the API's URL %s: want https://HOST:PORT (or http:// to a loopback address)", clip(strconv.Quote(rawURL)))
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("the API's URL %s has no host", clip(strconv.Quote(rawURL)))
	case u.User != nil:
		return nil, fmt.Errorf("the API's URL must not hold credentials: give the token in a file (--token-file)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("the API's URL %s: want no query or fragment", clip(strconv.Quote(rawURL)))
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return nil, fmt.Errorf("refusing to send the token over plain http to %s: use https://, "+
			"or http:// to a loopback address (127.0.0.1, ::1, localhost) such as an SSH tunnel's", u.Host)
	}
	if !validToken(token) {
		return nil, fmt.Errorf("the token must be 1 to %d printable ASCII characters without spaces", MaxTokenBytes)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        2,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	base := strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")
	hc := &http.Client{Transport: tr, CheckRedirect: noRedirects}
	return &Client{path: base, base: base, token: token, hc: hc, Timeout: 30 * time.Second}, nil
}

// loopbackHost reports whether host (no port) is localhost or a loopback
// address. A name is not resolved: only "localhost" counts.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// API reports whether the client calls the HTTP API rather than a socket.
func (c *Client) API() bool { return c.token != "" }

// noRedirects stops the client at a redirect; send turns it into an error.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Path is the socket the client calls, or the API's URL.
func (c *Client) Path() string { return c.path }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Jobs returns the declared jobs.
func (c *Client) Jobs(ctx context.Context) ([]JobInfo, error) {
	var out struct {
		Jobs []JobInfo `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, nil, &out, 0)
	return out.Jobs, err
}

// Trigger makes a run of job now.
func (c *Client) Trigger(ctx context.Context, job string, req TriggerRequest) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/trigger", nil, req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pause pauses a cron job's schedule.
func (c *Client) Pause(ctx context.Context, job string) (*PauseReply, error) {
	var out PauseReply
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/pause", nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Forget ends the expectation that the cluster keeps of a job no config
// declares any more.
func (c *Client) Forget(ctx context.Context, job string) (*ForgetReply, error) {
	var out ForgetReply
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/forget", nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume resumes a paused schedule.
func (c *Client) Resume(ctx context.Context, job string) (*PauseReply, error) {
	var out PauseReply
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/resume", nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunsQuery selects runs; zero fields select all (Limit 0: the server's
// 100). Since and Until bound when the runs were made; Before is the id of
// the last run of the page before (RunsPage.Next).
type RunsQuery struct {
	Job          string
	Status       jobs.Status
	Since, Until time.Time
	Before       string
	Limit        int
}

// Runs lists runs, newest first: the first page of q.
func (c *Client) Runs(ctx context.Context, q RunsQuery) ([]Run, error) {
	page, err := c.RunsPage(ctx, q)
	return page.Runs, err
}

// RunsPage lists a page of runs, newest first, with the before of the
// next page when one follows.
func (c *Client) RunsPage(ctx context.Context, q RunsQuery) (RunsPage, error) {
	v := url.Values{}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	if q.Before != "" {
		v.Set("before", q.Before)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out RunsPage
	err := c.do(ctx, http.MethodGet, "/v1/runs", v, nil, &out, 0)
	return out, err
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitRun returns the run once its status is not seen, it is finished, or
// wait is over (long poll). While the daemon refuses the poll as busy, it
// asks again after each Retry-After; refused for the whole wait, it
// returns the run as it is then, as a poll that saw no change would.
func (c *Client) WaitRun(ctx context.Context, id string, seen jobs.Status, wait time.Duration) (*Run, error) {
	v := url.Values{"wait": {wait.String()}}
	if seen != "" {
		v.Set("status", string(seen))
	}
	var out Run
	req := request{method: http.MethodGet, path: "/v1/runs/" + url.PathEscape(id), query: v, out: &out}
	err := c.retryBusy(ctx, wait, http.MethodGet, func() error { return c.send(ctx, req, wait+c.timeout()) })
	switch {
	case errors.Is(err, ErrBusy):
		return c.Run(ctx, id)
	case err != nil:
		return nil, err
	}
	return &out, nil
}

// Follow long-polls run id until it is finished, calling onChange (if not
// nil) with each status it sees, and returns the finished run.
func (c *Client) Follow(ctx context.Context, id string, onChange func(*Run)) (*Run, error) {
	run, err := c.Run(ctx, id)
	for err == nil {
		if onChange != nil {
			onChange(run)
		}
		if run.Status.Terminal() {
			return run, nil
		}
		seen := run.Status
		for err == nil && run.Status == seen {
			run, err = c.WaitRun(ctx, id, seen, 60*time.Second)
		}
	}
	return nil, err
}

// Attempts returns a run's attempts with their output. The reply has no
// size bound (each attempt's output is bounded by its job's output_limit):
// it is decoded attempt by attempt as it comes.
func (c *Client) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	var out []Attempt
	err := c.doStream(ctx, "/v1/runs/"+url.PathEscape(id)+"/attempts", func(r io.Reader) error {
		var err error
		out, err = decodeAttempts(r)
		return err
	})
	return out, err
}

// OutputParams selects what Output reads.
type OutputParams struct {
	// Attempt is the number of the attempt; 0 for the run's current one.
	Attempt int
	// From is where to start, an offset in bytes of the output as the
	// attempt wrote it (OutputInfo.Next of an earlier reply).
	From int64
	// Follow reads a running attempt's output as it is written until the
	// attempt ends: on this node as it comes, on another node once it
	// ends.
	Follow bool
}

// OutputInfo is what the reply of Output says of the output it carries.
type OutputInfo struct {
	State   OutputState
	Attempt int // 0 with OutputNone
	Node    string
	// Next is the offset to ask from next time; -1 when the reply does
	// not say (a follow, or OutputNone).
	Next int64
}

// Output reads the output of an attempt of run id (GET
// /v1/runs/{id}/output) and copies it to w as it comes, after calling
// begin, when it is not nil, with what the reply says of it. With
// p.Follow it has no timeout: it returns when the attempt has ended and
// its output was copied, when ctx is done, or when the connection fails.
func (c *Client) Output(ctx context.Context, id string, p OutputParams, begin func(OutputInfo), w io.Writer) (OutputInfo, error) {
	v := url.Values{}
	if p.Attempt > 0 {
		v.Set("attempt", strconv.Itoa(p.Attempt))
	}
	if p.From > 0 {
		v.Set("from", strconv.FormatInt(p.From, 10))
	}
	if p.Follow {
		v.Set("follow", "1")
	}
	var info OutputInfo
	req := request{method: http.MethodGet, path: "/v1/runs/" + url.PathEscape(id) + "/output", query: v,
		header: func(h http.Header) error {
			info = OutputInfo{State: OutputState(h.Get(OutputStateHeader)), Node: h.Get(OutputNodeHeader), Next: -1}
			var err error
			if info.Attempt, err = strconv.Atoi(h.Get(OutputAttemptHeader)); err != nil || info.State == "" {
				return fmt.Errorf("the reply says no attempt or state of the output (%s %q, %s %q): is this a schedulerd?",
					OutputAttemptHeader, clip(h.Get(OutputAttemptHeader)), OutputStateHeader, clip(string(info.State)))
			}
			if n, err := strconv.ParseInt(h.Get(OutputNextHeader), 10, 64); err == nil {
				info.Next = n
			}
			if begin != nil {
				begin(info)
			}
			return nil
		},
		stream: func(r io.Reader) error {
			_, err := io.Copy(w, r)
			return err
		},
	}
	timeout := c.timeout()
	if p.Follow {
		timeout = 0
	}
	err := c.retryBusy(ctx, c.timeout(), http.MethodGet, func() error { return c.send(ctx, req, timeout) })
	return info, err
}

// Events returns a run's history.
func (c *Client) Events(ctx context.Context, id string) ([]Event, error) {
	var out struct {
		Events []Event `json:"events"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/events", nil, nil, &out, 0)
	return out.Events, err
}

// Children returns the runs that the end of run id made (its chain),
// oldest first.
func (c *Client) Children(ctx context.Context, id string) ([]Run, error) {
	var out struct {
		Runs []Run `json:"runs"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/children", nil, nil, &out, 0)
	return out.Runs, err
}

// Cancel cancels a run, or asks its node to stop the running attempt.
func (c *Client) Cancel(ctx context.Context, id string) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/cancel", nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rerun makes a new run of the job of run id.
func (c *Client) Rerun(ctx context.Context, id string) (*Run, error) {
	var out Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/rerun", nil, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Progress reports the progress of the attempt req.Attempt of run id.
func (c *Client) Progress(ctx context.Context, id string, req ProgressRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/progress", nil, req, nil, 0)
}

// Nodes lists the registered nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out struct {
		Nodes []Node `json:"nodes"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &out, 0)
	return out.Nodes, err
}

// Health returns the node's health, healthy or not.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &out, 0)
	if ae := (*APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.Code == CodeUnhealthy {
		return &out, nil
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Reload asks the daemon to re-read its config. An error matching
// ErrReloadRejected says why it was rejected.
func (c *Client) Reload(ctx context.Context) error {
	var out ReloadReply
	return c.do(ctx, http.MethodPost, "/v1/reload", nil, nil, &out, 0)
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 30 * time.Second
}

// do sends a request and decodes the reply into out. A 503 reply of the
// health endpoint is decoded into out too, and returned as an APIError
// with the code unhealthy.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = c.timeout()
	}
	return c.retryBusy(ctx, timeout, method, func() error {
		return c.send(ctx, request{method: method, path: path, query: q, body: body, out: out}, timeout)
	})
}

// doStream is do for a reply of any size: decode reads it as it comes,
// instead of the reply being read whole (and bounded) first.
func (c *Client) doStream(ctx context.Context, path string, decode func(io.Reader) error) error {
	return c.retryBusy(ctx, c.timeout(), http.MethodGet, func() error {
		return c.send(ctx, request{method: http.MethodGet, path: path, stream: decode}, c.timeout())
	})
}

// request is one call of the API.
type request struct {
	method, path string
	query        url.Values
	body         any
	// out receives a reply read whole, or stream decodes it as it comes,
	// after header, when set, has read the headers of a reply of 2xx.
	out    any
	stream func(io.Reader) error
	header func(http.Header) error
}

// idleReader reads a streamed reply, putting off the request's timer by
// idle at each read: the reply fails when it stalls for idle.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	if ir.timer != nil {
		ir.timer.Reset(ir.idle)
	}
	return ir.r.Read(p)
}

// retryBusy runs send, again after the reply's Retry-After while the
// daemon refuses it as busy (429: it serves as many long polls or
// attempts replies as it does at once) or rate limited (429: the API
// token made too many requests), until budget has passed. A request
// refused so did nothing.
//
// A GET is also sent again, up to maxClosedRetries times after pauses
// from 10 ms doubling, when its connection was closed before any reply:
// the daemon closes a connection that has sent nothing for a moment when
// every slot is taken (a flood of silent clients), and on a busy machine
// a client can be that slow to write. A GET changes nothing, so sending
// it twice is safe; any other method is not sent again, since the client
// cannot tell that the daemon did not act on it. Something that hangs up
// on every request (not a daemon) fails the GET in about 0.6 s.
func (c *Client) retryBusy(ctx context.Context, budget time.Duration, method string, send func() error) error {
	start := time.Now()
	pause, closed := 10*time.Millisecond, 0
	for {
		err := send()
		var ae *APIError
		var wait time.Duration
		switch {
		case errors.As(err, &ae) && (ae.Code == CodeBusy || ae.Code == CodeRateLimited):
			wait = ae.RetryAfter
		case method == http.MethodGet && errors.As(err, new(*noReplyError)) && closed < maxClosedRetries:
			closed++
			wait, pause = pause, 2*pause
		default:
			return err
		}
		if time.Since(start)+wait > budget {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// send sends one request and decodes its reply, within timeout (none
// when it is 0). A redirect is an error, never followed: the daemon sends
// none (a path it would redirect gets 400), and following one could
// repeat a request, a trigger perhaps, on another endpoint.
func (c *Client) send(ctx context.Context, r request, timeout time.Duration) error {
	// timeout bounds the request up to its reply; a streamed reply may
	// then take longer as a whole (a large output on a slow link, or a
	// busy machine), but not stall for timeout between reads. No timeout
	// (a follow) waits as long as ctx.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })
		defer timer.Stop()
	}
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return err
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.attemptToken != "" {
		req.Header.Set(AttemptTokenHeader, c.attemptToken)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil && context.Cause(ctx) == context.DeadlineExceeded {
		err = fmt.Errorf("%w after %s", context.DeadlineExceeded, timeout)
	}
	if err != nil {
		if closedBeforeReply(err) && ctx.Err() == nil {
			return &noReplyError{c.connError(err)}
		}
		return c.connError(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400:
		return c.errorReply(r, resp)
	case resp.StatusCode >= 300:
		return &APIError{Status: resp.StatusCode, Code: CodeBadRequest, Message: fmt.Sprintf(
			"%s %s: the daemon answered %s, a redirect to %q, which is not followed", r.method, r.path, resp.Status, clip(resp.Header.Get("Location")))}
	case resp.StatusCode == http.StatusNoContent:
		return nil
	}
	if r.header != nil {
		if err := r.header(resp.Header); err != nil {
			return err
		}
	}
	switch {
	case r.stream != nil:
		if err := r.stream(&idleReader{r: resp.Body, timer: timer, idle: timeout}); err != nil {
			if context.Cause(ctx) == context.DeadlineExceeded {
				return fmt.Errorf("read the reply of %s: it stalled for %s: %w", c.path, timeout, context.DeadlineExceeded)
			}
			return fmt.Errorf("read the reply of %s: %w", c.path, err)
		}
		return nil
	case r.out == nil:
		return nil
	}
	data, err := readReply(resp.Body)
	if err != nil {
		return fmt.Errorf("read the reply of %s: %w", c.path, err)
	}
	if err := json.Unmarshal(data, r.out); err != nil {
		return fmt.Errorf("decode the reply of %s: %w", c.path, err)
	}
	return nil
}

// maxClosedRetries is how many times a GET is sent again after its
// connection was closed before any reply.
const maxClosedRetries = 6

// noReplyError is a request whose connection the daemon closed before it
// sent any reply.
type noReplyError struct{ err error }

func (e *noReplyError) Error() string { return e.err.Error() }
func (e *noReplyError) Unwrap() error { return e.err }

// closedBeforeReply reports whether err, of sending a request, says that
// the daemon closed the connection before it sent any reply. net/http
// reports a connection closed before the request was written with an
// error of its own that it does not export: it is known by its text.
func closedBeforeReply(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "http: server closed idle connection")
}

// readReply reads a reply whole, at most maxReplyBytes of it.
func readReply(body io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxReplyBytes+1))
	if err == nil && len(data) > maxReplyBytes {
		err = fmt.Errorf("the reply is larger than %d bytes", maxReplyBytes)
	}
	return data, err
}

// errorReply turns an error reply into an *APIError. The 503 of the health
// endpoint is decoded into r.out too, and has the code unhealthy.
func (c *Client) errorReply(r request, resp *http.Response) error {
	data, err := readReply(resp.Body)
	if err != nil {
		return fmt.Errorf("read the reply of %s: %w", c.path, err)
	}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		ae := &APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error}
		switch eb.Code {
		case CodeBusy:
			ae.RetryAfter = min(retryAfter(resp.Header.Get("Retry-After")), 10*time.Second)
		case CodeRateLimited:
			// Not shortened: asking again sooner would be refused again.
			ae.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		case CodeUnauthorized:
			ae.Message = fmt.Sprintf("the API at %s refused the token: it is none of the daemon's [[token]] tables", c.path)
		}
		return ae
	}
	if r.path == "/v1/health" && resp.StatusCode == http.StatusServiceUnavailable && r.out != nil && json.Unmarshal(data, r.out) == nil {
		return &APIError{Status: resp.StatusCode, Code: CodeUnhealthy, Message: "unhealthy"}
	}
	return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(clipBytes(data))))}
}

// retryAfter reads a Retry-After in seconds: 1s when it is missing or
// malformed, at most a day.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return time.Second
	}
	return time.Duration(min(n, 86400)) * time.Second
}

// connError explains why the socket or the API could not be used.
func (c *Client) connError(err error) error {
	if c.API() {
		return c.apiConnError(err)
	}
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: no socket at %s", ErrDaemonNotRunning, c.path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing listens on %s", ErrDaemonNotRunning, c.path)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: cannot connect to %s: the socket is for root, the daemon's user and members of socket_group", ErrPermissionDenied, c.path)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no reply from %s in time: %w", c.path, err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("control socket %s: %w", c.path, err)
}

// apiConnError explains why the API could not be reached.
func (c *Client) apiConnError(err error) error {
	var cve *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing listens on %s", ErrDaemonNotRunning, c.path)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no reply from %s in time: %w", c.path, err)
	case errors.As(err, &cve):
		return fmt.Errorf("the API at %s: its certificate is not trusted: %v (a certificate of your own authority, or a self-signed one: point SSL_CERT_FILE at it)", c.path, cve.Err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("the API at %s: %w", c.path, err)
}

func clipBytes(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// decodeAttempts decodes {"attempts": [...]} one attempt at a time: the
// decoder holds one attempt's JSON, never the whole reply.
func decodeAttempts(r io.Reader) ([]Attempt, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	out := []Attempt{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if key != "attempts" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return nil, err
		}
		for dec.More() {
			var a Attempt
			if err := dec.Decode(&a); err != nil {
				return nil, fmt.Errorf("attempt %d: %w", len(out)+1, err)
			}
			out = append(out, a)
		}
		if err := expectDelim(dec, ']'); err != nil {
			return nil, err
		}
	}
	return out, expectDelim(dec, '}')
}

// expectDelim reads the next token of dec, which must be the delimiter d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("malformed reply: got %v where %v was expected", tok, d)
	}
	return nil
}

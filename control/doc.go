// Package control owns the control socket of schedulerd: the HTTP+JSON API
// that the daemon serves on its unix socket, the same API over TCP for the
// holders of bearer tokens (api_listen, APIServer), the client that the
// command line uses to call either, and the optional TCP listener for
// /healthz, /readyz and /metrics.
//
// The socket is the daemon's only way in, so the package also owns its
// security: the socket lives in a directory of mode 0750 and is itself 0660
// (bound under a umask), owned by the daemon's user and socket_group, and
// every accepted connection is checked with SO_PEERCRED: root, the daemon's
// own user and members of socket_group are served; anyone else is logged
// with pid and uid and refused before a request is read. Requests are
// bounded in size (64 KiB), time and concurrency, and a malformed request
// gets a 4xx JSON error and changes nothing.
//
// Requests that take long are bounded apart, so that they never hold the
// connections that short requests need (MaxConns, 64): at most
// MaxLongPolls long polls wait at once (default a quarter of MaxConns, 16)
// and at most MaxAttemptReplies attempts replies, and outputs of an
// attempt, are sent at once (default 2), and at most MaxFollows outputs
// are followed as they are written (default 8). A request past a bound is
// refused at once, not queued: 429 with the code busy and Retry-After: 1. The Client asks again after it; a long
// poll refused for its whole wait returns the run as it is then. The
// attempts reply is written as it is encoded, 32 KiB at a time: the
// daemon holds the attempts the store read, never the reply, which JSON
// makes up to six times as large as the output. A follow holds what the
// attempt's LiveOutput returned, bounded as the output is, and writes it
// 32 KiB at a time, each piece within WriteTimeout: a client that stops
// reading is cut off, and one that goes away ends its follow, while the
// attempt writes on (a live output never waits for its followers).
//
// A path with an empty, "." or ".." segment, also when percent-encoded
// (%2e%2e), gets 400 and reaches no endpoint: it is never redirected to
// its cleaned form. The Client follows no redirect.
//
// Endpoints (all JSON; errors are {"error": "...", "code": "..."}), with
// the role (below) an API token needs for each:
//
//	GET  /v1/jobs                   declared jobs, then the retired {"jobs": [JobInfo]}     read
//	                                jobs the cluster still expects
//	POST /v1/jobs/{job}/trigger     make a run now (TriggerRequest) 201 Run                operate
//	POST /v1/jobs/{job}/pause       pause a cron schedule           {"job", "paused"}      operate
//	POST /v1/jobs/{job}/resume      resume it                       {"job", "paused"}      operate
//	POST /v1/jobs/{job}/forget      end the expectation of a job    {"job", "forgotten"}   operate
//	                                that no config declares (409
//	                                declared when this node declares
//	                                it, 404 not_expected when the
//	                                cluster does not expect it)
//	POST /v1/jobs/{job}/backfill    make runs of past ticks that    201 BackfillReply      operate
//	                                have none (BackfillRequest); a
//	                                dry run, or a range whose ticks all
//	                                have a run, 200 (409 no_schedule for
//	                                a job without a schedule)
//	GET  /v1/runs?job=&status=&since=&until=&before=&limit=         RunsPage               read
//	                                runs, newest first by when they were
//	                                made (since inclusive, until exclusive:
//	                                RFC 3339, a date or a duration before
//	                                now such as 7d, ParsePast), 100 a page
//	                                (limit 1 to 10000); next, when more
//	                                follow, is the before of the next page
//	                                (keyset: 400 for a before that is no run)
//	GET  /v1/runs/{id}              one run                         Run                    read
//	GET  /v1/runs/{id}?wait=60s[&status=S]  long poll: returns when the
//	                                run's status differs from S (default:
//	                                its status when the request came), the
//	                                run is finished, or the wait is over;
//	                                429 busy when MaxLongPolls wait already
//	GET  /v1/runs/{id}/attempts     attempts with output            {"attempts": [Attempt]} read
//	                                streamed attempt by attempt, of any size
//	                                (no Content-Length); 429 busy when
//	                                MaxAttemptReplies are being sent
//	GET  /v1/runs/{id}/attempts/{n}/output  the output of attempt n as   text/plain     read
//	                                stored, streamed; 429 busy as above
//	GET  /v1/runs/{id}/output?attempt=N&from=OFFSET&follow=1        text/plain     read
//	                                the output of attempt N (default the
//	                                run's current one) from byte OFFSET of
//	                                what it wrote; the headers say its state
//	                                (OutputState: live, stored, elsewhere,
//	                                none), attempt and node. Without follow:
//	                                what there is now (429 busy as above).
//	                                With follow: a live output as it is
//	                                written until the attempt ends, an
//	                                attempt on another node's stored output
//	                                once it ends; at most MaxFollows at once
//	                                (429 busy past them)
//	GET  /v1/runs/{id}/events       history with reasons            {"events": [Event]}    read
//	GET  /v1/runs/{id}/children     the runs its end made (on_success,  {"runs": [Run]}    read
//	                                on_failure), oldest first
//	POST /v1/runs/{id}/cancel       cancel, or stop a running attempt  Run                 operate
//	POST /v1/runs/{id}/rerun        a new run linked by rerun_of    201 Run                operate
//	POST /v1/runs/{id}/progress     progress of the calling attempt (ProgressRequest) 204;
//	                                403 without the attempt's token (below):
//	                                on the socket only
//	GET  /v1/stats/runs?job=&since=&until=  runs by outcome, success   RunStats               read
//	                                ratio, p50/p95/max duration of the
//	                                completed ones: one statement in the
//	                                store over the runs of the range; two
//	                                at once, then 429 busy
//	GET  /v1/nodes                  registered nodes                {"nodes": [Node]}      read
//	GET  /v1/notifications?job=&state=&limit=  notifications, newest
//	                                first, with their delivery state
//	                                                                {"notifications": [Notification]} read
//	GET  /v1/health                 200 or 503 with the problems    Health                 read
//	                                (store reachable, heartbeat fresh, loop
//	                                alive); requests at once share one check,
//	                                whose result serves those of the next 250ms
//	POST /v1/reload                 re-read the config (like SIGHUP) {"applied": true} or 422  admin
//
// Bodies of POST requests are JSON objects; unknown fields are rejected. The
// endpoints without parameters accept an empty body or {}.
//
// Attempt tokens: the daemon gives each command job's process the token
// of its attempt (SCHEDULERD_ATTEMPT_TOKEN), an HMAC of the run id and
// attempt number under a key of the process. A request that sends it in
// the Schedulerd-Attempt-Token header ("ATTEMPT:TOKEN") acts as that
// attempt: it may POST the progress and the cancel of its own run, and
// any other request with a token, or a token of another run, gets 403.
// Progress is taken only with the token, so a job cannot write into
// another run's attempt. The peer check comes first: a token does not let
// in a user who may not use the socket.
//
// The HTTP API (api_listen, APIServer) serves the same routes on TCP, with
// the same JSON and errors and the same bounds as the socket (MaxConns
// connections, evicting silent ones, MaxLongPolls and MaxAttemptReplies,
// 64 KiB bodies, the timeouts), over HTTP/1.1 alone, so that a connection
// carries one request at a time. Instead of the peer check, every request
// but GET /healthz (200 while the process answers: a liveness probe)
// needs a bearer token, "Authorization: Bearer TOKEN"; GET /metrics
// (RoleRead) is served there too. Tokens are those `schedulerd token
// new` makes (WellFormedToken: TokenPrefix and 256 random bits); a token
// of another form is refused before it is hashed. A token is declared in
// the config by its SHA-256 alone; the server hashes the token presented
// and compares the hash with every token's in constant time (TokenSet). A
// request with a missing, malformed or unknown token gets one reply, 401
// unauthorized with WWW-Authenticate: Bearer realm="schedulerd", byte for
// byte, whatever its path: nothing tells whether a token, or an
// endpoint, exists. A token presented that is not valid is a failed
// authentication of the client's address (ClientAddr): past 10, then one
// every 6s (100 of all addresses, then 10 a second), the address's wrong
// tokens get 429 rate_limited with a Retry-After, while a valid token is
// served from any address. Refusals are logged the first at once, then
// as a count a minute (RefusalLog); requests without a token for what
// browsers ask on their own (an icon) are not logged as refusals. With
// TLS, every reply has Strict-Transport-Security. What is logged on
// behalf of an API request carries the client's address (LogRemote). A token whose role (RoleRead, RoleOperate, RoleAdmin, each
// allowing what the one before does) does not allow the route gets 403
// permission_denied. Each token may make DefaultAPIRate requests a second
// on average and DefaultAPIBurst at once; past that, 429 rate_limited
// with a Retry-After, which the Client honours within its time budget.
// Attempt tokens belong to jobs, which use the socket: a request with
// one gets 403, and progress is refused. With a certificate (api_tls_cert,
// api_tls_key) the API speaks TLS 1.2 or later alone; a reload reads the
// files again (PrepareReload, then Apply), keeping the running
// certificate when they do not load, and puts the new config's tokens in
// use: a token removed is refused from the next request on. Handlers
// find who calls in the request's context (CallerFrom): the token's name
// and role on the API, the peer's user as RoleAdmin on the socket.
//
// Who asked for a change is recorded as its actor (Caller.Actor):
// "api:NAME" for a token, "socket:USER" for a user of the socket
// ("socket:uid N" for a uid without a name), "" for what the engine does
// on its own. A Run has actor (who made it: trigger, rerun) and
// cancelled_by (who asked to cancel it); an Event has actor (the
// creation's, a cancel's, and the end of an attempt stopped by a cancel
// request). Pause, resume, forget and reload are logged with the actor.
//
// The API serves a handler of its own at /ui/ and /favicon.ico (MountUI:
// the web dashboard, which takes its token from a login form and keeps a
// session) outside the bearer check, with the bounds of the other
// requests. That handler authenticates its callers with the API's tokens
// (Authenticate, and Holder for its sessions), spends their rate (Allow),
// and changes things only through the /v1 routes and their role checks
// (Act), with the token as the actor.
//
// The health listener (health_listen, HealthServer) serves GET /healthz
// (200 while the process answers), /readyz (the Health of /v1/health, 200
// or 503, shared and cached the same way) and /metrics, without
// credentials; the daemon warns when it binds an address that is not a
// loopback one. It holds at most 32 connections (HealthConfig.MaxConns):
// past that, new connections wait in the kernel's accept queue, holding no
// descriptor of the daemon, and a connection that has sent no request is
// closed to make room. A connection has 2s to send its headers and is
// closed after 5s idle.
package control

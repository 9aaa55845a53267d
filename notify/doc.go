// Package notify delivers the notifications of the store's outbox: each
// node runs a Deliverer beside its scheduling loop, which leases due
// notifications, sends each to its notifier (a webhook POST, signed with
// HMAC-SHA256, a command run as a job is, with the event on stdin, or a
// mail through an SMTP server, with the end of the run's output), and
// records the outcome: delivered, due again after a backoff, or failed
// after its last attempt. A notifier that is down costs the scheduling
// loop nothing: the Deliverer has its own goroutines, store calls and
// bounded concurrency.
package notify

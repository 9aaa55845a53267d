package control

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// Notification is one event for one notifier, with its delivery state.
type Notification struct {
	ID            string     `json:"id"`
	Notifier      string     `json:"notifier"`
	Job           string     `json:"job"`
	Event         string     `json:"event"`
	RunID         string     `json:"run_id"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastError     string     `json:"last_error"`
	// LeaseNode and LeaseUntil name the node delivering it, while one is.
	LeaseNode   string     `json:"lease_node"`
	LeaseUntil  *time.Time `json:"lease_until"`
	CreatedAt   *time.Time `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// NewNotification is the JSON of a stored notification.
func NewNotification(n *store.Notification) Notification {
	out := Notification{
		ID: n.ID, Notifier: n.Notifier, Job: n.Job, Event: string(n.Event), RunID: n.RunID, State: string(n.State),
		Attempts: n.Attempts, LastError: n.LastError, LeaseNode: n.LeaseNode,
		CreatedAt: utc(n.CreatedAt), DeliveredAt: utc(n.DeliveredAt), LeaseUntil: utc(n.LeaseUntil),
	}
	if n.State == store.NotificationPending {
		out.NextAttemptAt = utc(n.NextAttemptAt)
	}
	return out
}

// NotificationsQuery selects notifications.
type NotificationsQuery struct {
	Job   string
	State string
	Limit int
}

func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "job", "state", "limit") {
		return
	}
	q := r.URL.Query()
	f := store.NotificationFilter{Job: q.Get("job"), Limit: 100}
	switch st := store.NotificationState(q.Get("state")); st {
	case "", store.NotificationPending, store.NotificationDelivered, store.NotificationFailed:
		f.State = st
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "state: want pending, delivered or failed, got "+clip(strconv.Quote(string(st))))
		return
	}
	if !queryLimit(w, q, &f.Limit) {
		return
	}
	ns, err := s.cfg.Store.NotificationsList(r.Context(), f)
	if err != nil {
		s.engineError(w, r, err, CodeNotFound)
		return
	}
	out := make([]Notification, 0, len(ns))
	for _, n := range ns {
		out = append(out, NewNotification(n))
	}
	writeJSON(w, http.StatusOK, struct {
		Notifications []Notification `json:"notifications"`
	}{out})
}

// Notifications returns notifications with their delivery state, newest
// first.
func (c *Client) Notifications(ctx context.Context, q NotificationsQuery) ([]Notification, error) {
	v := url.Values{}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Notifications []Notification `json:"notifications"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/notifications", v, nil, &out, 0)
	return out.Notifications, err
}

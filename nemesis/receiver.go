package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Modes of the webhook receiver.
const (
	receiverUp   = "up"
	receiverDown = "down" // nothing listens: connections are refused
	receiverHang = "hang" // requests are read and never answered
)

// receiver is the webhook that the nodes' notifier posts to. It checks
// each body's signature and logs every request it answers 200, in memory
// and as JSON lines in a file. The nemesis takes it down (its port
// refuses connections) or makes it hang (it reads requests and answers
// none until the sender gives up).
type receiver struct {
	addr   string
	secret []byte

	mu         sync.Mutex
	mode       string
	srv        *http.Server
	unhang     chan struct{} // closed when a hang ends
	deliveries []Delivery
	log        *os.File
	enc        *json.Encoder
}

func newReceiver(secret []byte, logPath string) (*receiver, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &receiver{addr: ln.Addr().String(), secret: secret, mode: receiverUp, log: f, enc: json.NewEncoder(f)}
	r.serve(ln)
	return r, nil
}

// URL is the notifier's webhook.
func (r *receiver) URL() string { return "http://" + r.addr + "/hook" }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second}
	r.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

// setMode takes the receiver down, makes it hang, or brings it back up.
func (r *receiver) setMode(mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mode == r.mode {
		return nil
	}
	switch {
	case r.mode == receiverDown:
		// Listen again on the same port.
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			return err
		}
		r.serve(ln)
	case r.mode == receiverHang:
		close(r.unhang)
	}
	switch mode {
	case receiverDown:
		// Close the listener and every connection, hung requests too.
		_ = r.srv.Close()
	case receiverHang:
		r.unhang = make(chan struct{})
	}
	r.mode = mode
	return nil
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 64<<10))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	mode, unhang := r.mode, r.unhang
	r.mu.Unlock()
	if mode == receiverHang {
		select {
		case <-req.Context().Done():
		case <-unhang:
		}
		r.mu.Lock()
		mode = r.mode
		r.mu.Unlock()
		if req.Context().Err() != nil || mode != receiverUp {
			// The sender gave up, or the receiver went down: nothing
			// was delivered.
			return
		}
	}
	var ev struct {
		ID    string `json:"id"`
		Event string `json:"event"`
		Job   string `json:"job"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	d := Delivery{ID: ev.ID, Event: ev.Event, Job: ev.Job, At: time.Now(),
		SignatureOK: r.signed(req.Header.Get("X-Schedulerd-Timestamp"), req.Header.Get("X-Schedulerd-Signature"), body)}
	if req.Header.Get("X-Schedulerd-Id") != ev.ID {
		d.SignatureOK = false
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	_ = r.enc.Encode(d)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// signed checks a body's signature: sha256= and the hex HMAC-SHA256 of
// the timestamp, a dot and the body.
func (r *receiver) signed(timestamp, signature string, body []byte) bool {
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte(timestamp + "."))
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	return timestamp != "" && hmac.Equal([]byte(want), []byte(signature))
}

// taken returns the deliveries so far.
func (r *receiver) taken() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

// Close stops the receiver.
func (r *receiver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode == receiverHang {
		close(r.unhang)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	r.mode = receiverDown
	return errors.Join(err, r.log.Close())
}

package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// HealthServer serves GET /healthz, /readyz and /metrics on TCP
// (health_listen): /healthz is 200 whenever the process answers; /readyz
// is 200 when the node is healthy and 503 with the problems otherwise;
// /metrics is the node's figures in the Prometheus text format. It changes
// nothing and needs no credentials.
type HealthServer struct {
	ln   net.Listener
	http *http.Server
	log  *slog.Logger
}

// ListenHealth binds addr (host:port) for the health endpoints.
func ListenHealth(addr string, engine Engine, logger *slog.Logger) (*HealthServer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "health")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health_listen: %w", err)
	}
	hs := &HealthServer{ln: ln, log: log}
	hs.http = &http.Server{
		Handler:           HealthHandler(engine),
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("health endpoints listening", "addr", ln.Addr().String())
	return hs, nil
}

// Addr is the bound address.
func (hs *HealthServer) Addr() net.Addr { return hs.ln.Addr() }

// Start serves in a goroutine.
func (hs *HealthServer) Start() {
	go func() {
		if err := hs.http.Serve(hs.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			hs.log.Error("health endpoints stopped", "error", err)
		}
	}()
}

// Close stops the server, waiting until ctx for requests being served.
func (hs *HealthServer) Close(ctx context.Context) error {
	if err := hs.http.Shutdown(ctx); err != nil {
		return errors.Join(err, hs.http.Close())
	}
	return nil
}

// HealthHandler serves /healthz and /readyz, and /metrics when the engine
// is a MetricsSource.
func HealthHandler(engine Engine) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		writeHealth(w, engine.Health(ctx))
	})
	endpoints := "GET /healthz or /readyz"
	if src, ok := engine.(MetricsSource); ok {
		mux.HandleFunc("GET /metrics", serveMetrics(src))
		endpoints = "GET /healthz, /readyz or /metrics"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint; use "+endpoints)
	})
	return rejectDotSegments(mux)
}

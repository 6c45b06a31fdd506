package httpapi

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/instore-dev/instore"
)

// MaxBodyBytes is the largest request body accepted (64 KiB); a larger one
// answers 413.
const MaxBodyBytes = 64 << 10

// HandlerFunc is a handler that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// API is one HTTP surface (online, access, ops) with its middleware.
type API struct {
	// Surface labels metrics and log lines ("online", "access", ...).
	Surface  string
	Logger   *slog.Logger
	Metadata *instore.Metadata
	Metrics  *Metrics
	// MaxBodyBytes defaults to MaxBodyBytes.
	MaxBodyBytes int64

	Mux *http.ServeMux

	// accessLog has the surface attribute pre-formatted.
	accessLog *slog.Logger
}

// NewAPI returns an API with an empty route table.
func NewAPI(surface string, logger *slog.Logger, meta *instore.Metadata, m *Metrics) *API {
	return &API{Surface: surface, Logger: logger, Metadata: meta, Metrics: m, MaxBodyBytes: MaxBodyBytes, Mux: http.NewServeMux(),
		accessLog: logger.With(slog.String("surface", surface))}
}

// SetAccessLogger makes the access log go to l instead of Logger.
func (a *API) SetAccessLogger(l *slog.Logger) {
	a.accessLog = l.With(slog.String("surface", a.Surface))
}

// Handle adds a route; h's error becomes a problem response.
func (a *API) Handle(pattern string, h HandlerFunc) {
	a.Mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.Error(w, r, err)
		}
	})
}

// requestInfo is what the access log reports of a request: its id and the
// cause of its error. It travels in the response writer the middleware
// hands down, which saves a context and a request copy per request.
type requestInfo struct {
	RequestID string
	Err       error
}

// infoFrom finds the requestInfo behind w, through any wrappers that
// implement Unwrap.
func infoFrom(w http.ResponseWriter) *requestInfo {
	for {
		switch x := w.(type) {
		case *responseWriter:
			return &x.info
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// RequestID returns the request id of the request w answers.
func RequestID(w http.ResponseWriter) string {
	if i := infoFrom(w); i != nil {
		return i.RequestID
	}
	return ""
}

// requestIDs makes cheap unique ids: a random per-process prefix and a
// counter.
var (
	ridPrefix  = newRIDPrefix()
	ridCounter atomic.Uint64
)

func newRIDPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:]) + "_"
}

func newRequestID() string {
	return ridPrefix + strconv.FormatUint(ridCounter.Add(1), 36)
}

// validRequestID accepts a client's X-Request-Id: 1-128 of [A-Za-z0-9._-].
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ServeHTTP runs the middleware around the route table: request id, body
// limit, panic recovery, 404/405 as problems, metrics and the access log.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := r.Header.Get("X-Request-Id")
	if !validRequestID(rid) {
		rid = newRequestID()
	}
	w.Header()["X-Request-Id"] = []string{rid}
	rw := &responseWriter{ResponseWriter: w, req: r, info: requestInfo{RequestID: rid}}
	info := &rw.info

	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.Logger.LogAttrs(r.Context(), slog.LevelError, "panic",
				slog.String("requestId", rid), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			info.Err = fmt.Errorf("panic: %v", v)
			if !rw.wroteHeader {
				WriteProblem(w, NewProblem(errors.New("panic"), rid, a.Metadata))
				rw.status = http.StatusInternalServerError
			}
		}
		a.finish(r, rw, info, start)
	}()

	max := a.MaxBodyBytes
	if max <= 0 {
		max = MaxBodyBytes
	}
	if r.ContentLength > max {
		a.Error(rw, r, Errorf413(max))
	} else {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		a.Mux.ServeHTTP(rw, r)
		if rw.intercepted != 0 {
			a.routeMiss(rw, r)
		}
	}
}

// Errorf413 is the payload-too-large error.
func Errorf413(max int64) error {
	return instore.Errorf(instore.EPayloadTooLarge, "The request body is larger than %d bytes.", max)
}

func (a *API) routeMiss(rw *responseWriter, r *http.Request) {
	status := rw.intercepted
	rw.intercepted = 0
	rw.missed = true
	var err error
	if status == http.StatusMethodNotAllowed {
		err = instore.Errorf(instore.EMethodNotAllowed, "This path does not accept %s.", r.Method)
	} else {
		err = instore.Errorf(instore.ENotFound, "No such resource.")
	}
	a.Error(rw, r, err)
}

func (a *API) finish(r *http.Request, rw *responseWriter, info *requestInfo, start time.Time) {
	d := time.Since(start)
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	status := rw.status
	if status == 0 {
		status = http.StatusOK
	}
	if a.Metrics != nil {
		a.Metrics.observe(a.Surface, route, status, d)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	if !a.accessLog.Enabled(r.Context(), level) {
		return
	}
	// Five attributes: slog keeps them inline in the record, no allocation.
	method, dur, reqID := slog.String("method", r.Method), slog.Int64("durationUs", d.Microseconds()), slog.String("requestId", info.RequestID)
	if info.Err != nil {
		a.accessLog.LogAttrs(r.Context(), level, "request", method, slog.String("route", route), slog.Int("status", status), dur, reqID,
			slog.Int64("bytes", rw.bytes), slog.String("error", info.Err.Error()))
		return
	}
	a.accessLog.LogAttrs(r.Context(), level, "request", method, slog.String("route", route), slog.Int("status", status), dur, reqID)
}

// responseWriter records the status and size, and intercepts the plain-text
// 404 and 405 answers of the ServeMux so they become problems.
type responseWriter struct {
	http.ResponseWriter
	req         *http.Request
	status      int
	bytes       int64
	wroteHeader bool
	intercepted int
	info        requestInfo
	// missed is set once the route miss is being answered as a problem.
	missed bool
}

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader || w.intercepted != 0 {
		return
	}
	if !w.missed && w.req.Pattern == "" && (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) {
		w.intercepted = code
		return
	}
	w.wroteHeader = true
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.intercepted != 0 {
		return len(b), nil
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack lets the terminal gateway take the connection over for a
// WebSocket.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection cannot be hijacked")
	}
	conn, rw, err := h.Hijack()
	if err == nil {
		w.wroteHeader, w.status = true, http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Flush supports long-polling and server-sent events.
func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if !w.wroteHeader {
			w.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

// Metrics are the HTTP latency histograms, by surface, route and status.
type Metrics struct {
	hist      *prometheus.HistogramVec
	observers sync.Map // obsKey -> prometheus.Observer
}

type obsKey struct {
	surface, route string
	status         int
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "instore",
		Name:      "http_request_duration_seconds",
		Help:      "Latency of HTTP requests by surface, route pattern and status code.",
		Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"surface", "route", "code"})
	reg.MustRegister(h)
	return &Metrics{hist: h}
}

func (m *Metrics) observe(surface, route string, status int, d time.Duration) {
	k := obsKey{surface, route, status}
	o, ok := m.observers.Load(k)
	if !ok {
		o, _ = m.observers.LoadOrStore(k, m.hist.WithLabelValues(surface, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

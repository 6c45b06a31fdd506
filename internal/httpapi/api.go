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
	pathpkg "path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/logging"
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
	// BodyLimits holds the body limits of the paths that take another
	// than MaxBodyBytes (POST /print: instore.MaxPrintBodyBytes).
	BodyLimits map[string]int64

	// Unavailable, when set, tells the errors that say the store cannot
	// serve for now (sqlstore.Unavailable: no primary reachable during a
	// PostgreSQL failover) from the service's own failures: they answer
	// 503 (unavailable) with Retry-After and UnavailableDetail, not 500.
	Unavailable func(error) bool
	// UnavailableDetail is the detail of those 503s.
	UnavailableDetail string

	// Mux is the route table. Patterns with a host are not supported: the
	// routes of Handle with a literal path are matched before it.
	Mux *http.ServeMux

	// exact holds Handle's routes whose pattern is a method and a literal
	// path, by path, for ServeHTTP to find with a map lookup instead of
	// the Mux's walk of its tree (which matches them the same way, in
	// about ten times the time).
	exact map[string][]exactRoute

	// accessLog has the surface attribute pre-formatted.
	accessLog *logging.Prechecked
}

// NewAPI returns an API with an empty route table.
func NewAPI(surface string, logger *slog.Logger, meta *instore.Metadata, m *Metrics) *API {
	return &API{Surface: surface, Logger: logger, Metadata: meta, Metrics: m, MaxBodyBytes: MaxBodyBytes, Mux: http.NewServeMux(),
		exact: map[string][]exactRoute{}, accessLog: newAccessLog(logger, surface)}
}

// SetAccessLogger makes the access log go to l instead of Logger.
func (a *API) SetAccessLogger(l *slog.Logger) {
	a.accessLog = newAccessLog(l, a.Surface)
}

func newAccessLog(l *slog.Logger, surface string) *logging.Prechecked {
	return logging.NewPrechecked(l.With(slog.String("surface", surface)))
}

// Handle adds a route; h's error becomes a problem response. Routes are
// added before the API serves: unlike the ServeMux's, Handle is not safe
// to call while ServeHTTP runs.
func (a *API) Handle(pattern string, h HandlerFunc) {
	f := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.Error(w, r, err)
		}
	})
	a.Mux.Handle(pattern, f) // which also refuses invalid and conflicting patterns
	if method, path, ok := exactPattern(pattern); ok {
		a.exact[path] = append(a.exact[path], exactRoute{method: method, pattern: pattern, h: f})
	}
}

// exactRoute is a route whose pattern is a method and a literal path.
type exactRoute struct {
	method, pattern string
	h               http.Handler
}

// exactPattern splits a pattern of the form "METHOD /literal/path" whose
// path is clean, has no wildcard, no trailing slash (which would match a
// subtree) and no byte a URL path escapes, so that the ServeMux matches it
// for a request of that method whose URL path is that path, and for no
// other path; CONNECT, whose paths the ServeMux does not clean, is left
// to it.
func exactPattern(pattern string) (method, path string, ok bool) {
	method, path, ok = strings.Cut(pattern, " ")
	if !ok || method == "" || method == http.MethodConnect || len(path) < 2 || path[0] != '/' || path[len(path)-1] == '/' ||
		pathpkg.Clean(path) != path {
		return "", "", false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; c < 'A' || c > 'Z' {
			return "", "", false
		}
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
			return "", "", false
		}
	}
	return method, path, true
}

// route returns the handler of an exact route for r, setting r.Pattern as
// the ServeMux would, or nil for the ServeMux to route r. A URL whose path
// was sent with escapes (RawPath set) goes to the ServeMux.
func (a *API) route(r *http.Request) http.Handler {
	if r.URL.RawPath != "" {
		return nil
	}
	for _, e := range a.exact[r.URL.Path] {
		if e.method == r.Method {
			r.Pattern = e.pattern
			return e.h
		}
	}
	return nil
}

// requestInfo is what the access log reports of a request: its id and the
// cause of its error, and when it arrived. It travels in the response
// writer the middleware hands down, which saves a context and a request
// copy per request.
type requestInfo struct {
	RequestID string
	Err       error
	// start is the time ServeHTTP read as the request arrived: the
	// middleware's clock for the request (duration, authentication cache,
	// rate limit), read once.
	start time.Time
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

// requestStart returns the time the request w answers arrived, or the
// zero time if w is not the middleware's.
func requestStart(w http.ResponseWriter) time.Time {
	if i := infoFrom(w); i != nil {
		return i.start
	}
	return time.Time{}
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
	var b [48]byte // the prefix's 17 bytes and at most 13 digits
	n := copy(b[:], ridPrefix)
	return string(strconv.AppendUint(b[:n], ridCounter.Add(1), 36))
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
	rw := &responseWriter{ResponseWriter: w, req: r, info: requestInfo{start: time.Now()}, metrics: a.Metrics}
	info := &rw.info
	rid := headerValue(r.Header, "X-Request-Id")
	if !validRequestID(rid) {
		rid, rw.madeID = newRequestID(), true
	}
	info.RequestID = rid
	rw.ridHeader[0] = rid
	w.Header()["X-Request-Id"] = rw.ridHeader[:]

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
		a.finish(r, rw, info)
	}()

	max := a.MaxBodyBytes
	if max <= 0 {
		max = MaxBodyBytes
	}
	if n, ok := a.BodyLimits[r.URL.Path]; ok {
		max = n
	}
	if r.ContentLength > max {
		a.Error(rw, r, Errorf413(max))
	} else {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		if h := a.route(r); h != nil {
			rw.exactRoute = true
			h.ServeHTTP(rw, r)
		} else {
			a.Mux.ServeHTTP(rw, r)
		}
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

// headerValue is h.Get(key) for a key already in canonical form.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// The attributes of an access line, by position, for the marks of
// logging.Prechecked.
const (
	accessMethod = 1 << iota
	accessRoute
	accessStatus
	accessDuration
	accessRequestID
	accessBytes
	accessError // never safe
)

// accessPC is the program counter of the access log's records (a handler
// with AddSource shows it): finish's, found on the first request.
var accessPC atomic.Uintptr

func (a *API) finish(r *http.Request, rw *responseWriter, info *requestInfo) {
	end := time.Now()
	d := end.Sub(info.start)
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	status := rw.status
	if status == 0 {
		status = http.StatusOK
	}
	if a.Metrics != nil {
		if rw.wait != 0 {
			// Its duration is the client's wait, not the service's latency.
			a.Metrics.waitEnd(rw.wait)
		} else {
			a.Metrics.observe(a.Surface, route, status, d)
		}
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	ctx := r.Context()
	if !a.accessLog.Enabled(ctx, level) {
		return
	}
	pc := accessPC.Load()
	if pc == 0 {
		var pcs [1]uintptr
		runtime.Callers(1, pcs[:])
		pc = pcs[0]
		accessPC.Store(pc)
	}
	// The record is the one slog.Logger.LogAttrs would make, at the time
	// read for the duration instead of a third clock read. Five
	// attributes: slog keeps them inline in the record, no allocation.
	rec := slog.NewRecord(end, level, "request", pc)
	rec.AddAttrs(slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
		slog.Int64("durationUs", d.Microseconds()), slog.String("requestId", info.RequestID))
	// What the server made needs no redaction walk: status and duration
	// are numbers, and so is the size; the route is one of its patterns
	// when the exact routes found it, or "unmatched". What the client sent
	// is checked: the method unless it is a standard one (net/http takes
	// any token, say "isk_..."), the request id unless the server made
	// it, the error, whose text may quote anything, and a route the
	// ServeMux set (its redirects can set it to the client's path).
	safe := uint64(accessStatus | accessDuration)
	if rw.exactRoute || r.Pattern == "" {
		safe |= accessRoute
	}
	if standardMethod(r.Method) {
		safe |= accessMethod
	}
	if rw.madeID {
		safe |= accessRequestID
	}
	if info.Err != nil {
		rec.AddAttrs(slog.Int64("bytes", rw.bytes), slog.String("error", info.Err.Error()))
		safe |= accessBytes
	}
	a.accessLog.Handle(ctx, rec, safe)
}

// standardMethod reports whether m is one of the methods of RFC 9110 or
// PATCH.
func standardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// responseWriter records the status and size, and intercepts the plain-text
// 404 and 405 answers of the ServeMux so they become problems.
type responseWriter struct {
	http.ResponseWriter
	req         *http.Request
	status      int
	bytes       int64
	intercepted int
	info        requestInfo
	// ridHeader is the X-Request-Id header's value, allocated with the
	// writer.
	ridHeader   [1]string
	wroteHeader bool
	// missed is set once the route miss is being answered as a problem.
	missed bool
	// exactRoute is set when the exact routes found the handler (and
	// r.Pattern is one of the API's patterns).
	exactRoute bool
	// madeID is set when the server generated the request id.
	madeID bool
	// wait is set by Waiting: the request holds its answer.
	wait WaitKind
	// metrics are the API's (nil: none).
	metrics *Metrics
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

// WaitKind names a request that holds its answer while it waits for a
// change (Waiting).
type WaitKind uint8

const (
	// WaitLongPoll is a status request's long-poll (GET
	// /transaction/{onlineAPIRefId}?wait=).
	WaitLongPoll WaitKind = 1 + iota
	// WaitStream is a stream of server-sent events (the console's).
	WaitStream
)

// Waiting marks the request w answers as one that holds its answer while
// it waits (kind): its duration is the client's wait, so it is left out of
// the request-latency histogram and counted instead as a long-poll or an
// event stream, with a gauge of those waiting now. Call it once the
// request is valid, before the wait; a second call changes nothing.
func Waiting(w http.ResponseWriter, kind WaitKind) {
	for {
		switch x := w.(type) {
		case *responseWriter:
			if x.wait == 0 && kind != 0 {
				x.wait = kind
				if x.metrics != nil {
					x.metrics.waitStart(kind)
				}
			}
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// Metrics are the HTTP latency histograms, by surface, route and status,
// and the counts of the requests that wait (Waiting).
type Metrics struct {
	hist      *prometheus.HistogramVec
	observers sync.Map // obsKey -> prometheus.Observer

	longPolls, streams            prometheus.Counter
	longPollsWaiting, streamsOpen prometheus.Gauge
}

func (m *Metrics) waitStart(kind WaitKind) {
	switch kind {
	case WaitLongPoll:
		m.longPolls.Inc()
		m.longPollsWaiting.Inc()
	case WaitStream:
		m.streams.Inc()
		m.streamsOpen.Inc()
	}
}

func (m *Metrics) waitEnd(kind WaitKind) {
	switch kind {
	case WaitLongPoll:
		m.longPollsWaiting.Dec()
	case WaitStream:
		m.streamsOpen.Dec()
	}
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
	m := &Metrics{hist: h,
		longPolls: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "instore", Name: "long_polls_total",
			Help: "Status requests that waited for a change (GET /transaction/{onlineAPIRefId}?wait=), left out of instore_http_request_duration_seconds."}),
		longPollsWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "instore", Name: "long_polls_waiting",
			Help: "Status requests waiting for a change now."}),
		streams: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "instore", Name: "event_streams_total",
			Help: "Streams of server-sent events opened (the sandbox console's), left out of instore_http_request_duration_seconds."}),
		streamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "instore", Name: "event_streams_open",
			Help: "Streams of server-sent events open now."}),
	}
	reg.MustRegister(h, m.longPolls, m.longPollsWaiting, m.streams, m.streamsOpen)
	return m
}

func (m *Metrics) observe(surface, route string, status int, d time.Duration) {
	k := obsKey{surface, route, status}
	o, ok := m.observers.Load(k)
	if !ok {
		o, _ = m.observers.LoadOrStore(k, m.hist.WithLabelValues(surface, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

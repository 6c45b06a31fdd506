package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/logging"
)

var accessKey = []byte("access log test key")

// newLoggedAPI is an API logging through the service's logger (JSON, with
// redaction) into the returned buffer.
func newLoggedAPI(t *testing.T) (*API, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	meta := instore.DefaultMetadata()
	a := NewAPI("online", logging.New(&logs, logging.Options{Format: logging.FormatJSON, FingerprintKey: accessKey}), &meta, nil)
	ok := func(w http.ResponseWriter, r *http.Request) error {
		w.Write([]byte("ok"))
		return nil
	}
	a.Handle("GET /ok", ok)
	// Any method, the client's own included (any token is a method).
	a.Handle("/any", ok)
	a.Handle("GET /leak", func(w http.ResponseWriter, r *http.Request) error {
		return errors.New("upstream refused key_SECRET3 of mer_SECRET4")
	})
	// A ServeMux redirect of a CONNECT request to this subtree sets the
	// request's pattern to the client's path.
	a.Mux.HandleFunc("/sub/{x}/", func(w http.ResponseWriter, r *http.Request) {})
	return a, &logs
}

// accessLine decodes a JSON log line into its keys, in order, and values.
func accessLine(t *testing.T, line string) ([]string, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var keys []string
	m := map[string]any{}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line %q: %v", line, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys = append(keys, tok.(string))
		m[tok.(string)] = v
	}
	return keys, m
}

// TestAccessLogLine: the access line's fields, in their order, with the
// time of the request's end and its duration.
func TestAccessLogLine(t *testing.T) {
	a, logs := newLoggedAPI(t)
	before := time.Now()
	w, _ := do(a, "GET", "/ok", nil, nil)
	after := time.Now()
	keys, line := accessLine(t, logs.String())
	if got, want := strings.Join(keys, ","), "time,level,msg,surface,method,route,status,durationUs,requestId"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	rid := w.Header().Get("X-Request-Id")
	for k, want := range map[string]any{"level": "INFO", "msg": "request", "surface": "online", "method": "GET", "route": "GET /ok",
		"status": json.Number("200"), "requestId": rid} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v", k, line[k], want)
		}
	}
	if !strings.HasPrefix(rid, "req_") {
		t.Errorf("generated request id %q", rid)
	}
	at, err := time.Parse(time.RFC3339Nano, line["time"].(string))
	if err != nil || at.Before(before.Round(0)) || at.After(after.Round(0)) {
		t.Errorf("time = %v (%v), want between %v and %v", line["time"], err, before, after)
	}
	if us, err := line["durationUs"].(json.Number).Int64(); err != nil || us < 0 || us > after.Sub(before).Microseconds() {
		t.Errorf("durationUs = %v, want within the request (%v)", line["durationUs"], after.Sub(before))
	}

	logs.Reset()
	do(a, "GET", "/nope", nil, map[string]string{"X-Request-Id": "abc-123"})
	keys, line = accessLine(t, logs.String())
	if got, want := strings.Join(keys, ","), "time,level,msg,surface,method,route,status,durationUs,requestId,bytes,error"; got != want {
		t.Errorf("keys of a failed request = %s, want %s", got, want)
	}
	if line["route"] != "unmatched" || line["status"] != json.Number("404") || line["requestId"] != "abc-123" || line["level"] != "INFO" {
		t.Errorf("failed request's line = %v", line)
	}
}

// TestAccessLogRedactsWhatTheClientSends: a client's request id, a method
// of its own, the text of an error and a route the ServeMux made of the
// client's path reach the access line only as fingerprints (each alone on
// its line, so that no other value sends the line through the redacting
// handler), while what the server made stays readable.
func TestAccessLogRedactsWhatTheClientSends(t *testing.T) {
	a, logs := newLoggedAPI(t)
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjbGlfMSJ9.c2lnbmF0dXJl"
	for _, tc := range []struct {
		name, method, path, requestID string
		secrets                       []string
	}{
		{"request id with a key", "GET", "/ok", "isk_live_SECRET1", []string{"isk_live_SECRET1"}},
		{"request id with a customer id", "GET", "/ok", "x.cus_SECRET5", []string{"cus_SECRET5"}},
		{"request id with a JWT", "GET", "/ok", jwt, []string{jwt}},
		{"unknown method", "ics_SECRET2", "/ok", "", []string{"ics_SECRET2"}},
		{"method of its own", "key_SECRET7", "/any", "", []string{"key_SECRET7"}},
		{"error text", "GET", "/leak", "", []string{"key_SECRET3", "mer_SECRET4"}},
		{"route of a ServeMux redirect", "CONNECT", "/sub/isk_SECRET6", "", []string{"isk_SECRET6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			hdr := map[string]string{}
			if tc.requestID != "" {
				hdr["X-Request-Id"] = tc.requestID
			}
			do(a, tc.method, tc.path, nil, hdr)
			out := logs.String()
			for _, s := range tc.secrets {
				if strings.Contains(out, s) || !strings.Contains(out, logging.Fingerprint(accessKey, s)) {
					t.Errorf("%s not fingerprinted: %s", s, out)
				}
			}
		})
	}
	// The cases above are what they say.
	logs.Reset()
	if w, _ := do(a, "key_SECRET7", "/any", nil, nil); w.Code != http.StatusOK {
		t.Errorf("own method = %d, want 200", w.Code)
	}
	logs.Reset()
	do(a, "CONNECT", "/sub/isk_SECRET6", nil, nil)
	if _, line := accessLine(t, logs.String()); !strings.HasPrefix(line["route"].(string), "/sub/") || line["error"] != nil {
		t.Errorf("the ServeMux no longer puts the client's path in the pattern of a CONNECT redirect; find another case for the test: %s", logs.String())
	}

	logs.Reset()
	do(a, "GET", "/ok", nil, nil)
	if _, line := accessLine(t, logs.String()); !strings.HasPrefix(line["requestId"].(string), "req_") || line["route"] != "GET /ok" || line["method"] != "GET" {
		t.Errorf("a clean request's line = %v, want its fields readable", line)
	}
}

// TestMadeRequestIDsNeedNoRedaction: the access log leaves out the
// redaction check of the request ids the server makes, because the
// redacting handler would leave them as they are, whatever the counter
// spells in base 36.
func TestMadeRequestIDsNeedNoRedaction(t *testing.T) {
	var logs bytes.Buffer
	l := logging.New(&logs, logging.Options{Format: logging.FormatJSON})
	saved := ridCounter.Load()
	defer ridCounter.Store(saved)
	for _, spelled := range []string{"0", "bearer", "bearerx", "key", "isk", "eyj", "3w5e11264sgsf"} {
		n, err := strconv.ParseUint(spelled, 36, 64)
		if err != nil {
			t.Fatal(err)
		}
		ridCounter.Store(n - 1)
		id := newRequestID()
		if want := ridPrefix + spelled; id != want || !validRequestID(id) {
			t.Errorf("made id %q, want %q, a valid request id", id, want)
		}
		logs.Reset()
		l.Info("request", "requestId", id)
		if !strings.Contains(logs.String(), `"requestId":"`+id+`"`) {
			t.Errorf("the redacting logger changes the made id %q: %s", id, logs.String())
		}
	}
}

// TestAccessLogSource: a handler that shows the source sees the access
// log's records come from the middleware's finish.
func TestAccessLogSource(t *testing.T) {
	var logs bytes.Buffer
	meta := instore.DefaultMetadata()
	a := NewAPI("online", slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{AddSource: true})), &meta, nil)
	a.Handle("GET /ok", func(w http.ResponseWriter, r *http.Request) error { return nil })
	for range 2 {
		do(a, "GET", "/ok", nil, nil)
	}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var line struct {
			Source struct{ Function, File string }
		}
		json.Unmarshal([]byte(l), &line)
		if !strings.HasSuffix(line.Source.Function, "httpapi.(*API).finish") || !strings.HasSuffix(line.Source.File, "api.go") {
			t.Errorf("source = %+v, want the middleware's finish", line.Source)
		}
	}
}

// TestServeHTTPAllocations: the middleware allocates its response writer
// (with the X-Request-Id header's value in it) and, when the client sends
// no usable request id, the id; the access line allocates nothing.
func TestServeHTTPAllocations(t *testing.T) {
	meta := instore.DefaultMetadata()
	a := NewAPI("online", logging.New(discardWriter{}, logging.Options{Format: logging.FormatJSON}), &meta, NewMetrics(prometheus.NewRegistry()))
	body := []byte("{}")
	a.Handle("GET /in-store/api/v1/metadata", func(w http.ResponseWriter, r *http.Request) error {
		w.Write(body)
		return nil
	})
	for _, tc := range []struct {
		requestID string
		want      float64
	}{{"", 2}, {"abc-123", 1}} {
		r := httptest.NewRequest("GET", "/in-store/api/v1/metadata", nil)
		if tc.requestID != "" {
			r.Header.Set("X-Request-Id", tc.requestID)
		}
		w := &nopWriter{h: http.Header{}}
		if got := testing.AllocsPerRun(100, func() {
			clear(w.h)
			a.ServeHTTP(w, r)
		}); got > tc.want {
			t.Errorf("request id %q: %v allocations per request, want %v", tc.requestID, got, tc.want)
		}
	}
}

// nopWriter is a ResponseWriter that keeps nothing but its header, for the
// benchmark.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkServeHTTP is the middleware's own cost on the authenticated
// metadata route: request id, authentication on the cache, rate limit,
// routing, headers, the histogram and the access line (JSON, redacting,
// to a discarding writer).
//
//	go test -run=^$ -bench=ServeHTTP -benchmem ./internal/httpapi/
func BenchmarkServeHTTP(b *testing.B) {
	f := newAuthFixture(b)
	meta := instore.DefaultMetadata()
	body, _ := json.Marshal(&meta)
	a := NewAPI("online", logging.New(discardWriter{}, logging.Options{Format: logging.FormatJSON}), &meta, NewMetrics(prometheus.NewRegistry()))
	g := &Guard{Auth: f.auth, Surface: instore.SurfaceOnline, Limiter: NewRateLimiter(1e9, 1e9)}
	hdr := http.Header{"Content-Type": {"application/json"}, "Etag": {`"0123456789abcdef01234567"`}, "Cache-Control": {"private, no-cache"}, "Content-Length": {"2981"}}
	a.Handle("GET /in-store/api/v1/metadata", g.Wrap(func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		h := w.Header()
		for k, v := range hdr {
			h[k] = v
		}
		w.Write(body)
		return nil
	}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("GET", "/in-store/api/v1/metadata", nil)
		r.Header = f.header.Clone()
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			a.ServeHTTP(w, r)
		}
	})
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

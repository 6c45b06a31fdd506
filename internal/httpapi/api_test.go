package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/instore-dev/instore"
)

func newTestAPI(t *testing.T) (*API, *bytes.Buffer, *prometheus.Registry) {
	t.Helper()
	var logs bytes.Buffer
	meta := instore.DefaultMetadata()
	reg := prometheus.NewRegistry()
	a := NewAPI("online", slog.New(slog.NewJSONHandler(&logs, nil)), &meta, NewMetrics(reg))
	a.Handle("GET /ok", func(w http.ResponseWriter, r *http.Request) error {
		w.Write([]byte("ok"))
		return nil
	})
	a.Handle("GET /busy", func(w http.ResponseWriter, r *http.Request) error {
		return &instore.Error{Code: instore.WP09, Detail: "The terminal is processing a transaction.", OnlineAPIRefID: "ref1"}
	})
	a.Handle("GET /panic", func(w http.ResponseWriter, r *http.Request) error {
		panic("secret internal state isk_abc")
	})
	a.Handle("GET /fail", func(w http.ResponseWriter, r *http.Request) error {
		return io.ErrUnexpectedEOF // an unclassified error
	})
	a.Handle("POST /echo", func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := DecodeJSON(r, &v); err != nil {
			return err
		}
		return json.NewEncoder(w).Encode(v)
	})
	return a, &logs, reg
}

func do(a http.Handler, method, path string, body io.Reader, hdr map[string]string) (*httptest.ResponseRecorder, *Problem) {
	r := httptest.NewRequest(method, path, body)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	if w.Header().Get("Content-Type") != ProblemContentType {
		return w, nil
	}
	var p Problem
	json.Unmarshal(w.Body.Bytes(), &p)
	return w, &p
}

func TestAPIProblems(t *testing.T) {
	a, logs, _ := newTestAPI(t)
	tests := []struct {
		name, method, path string
		body               string
		hdr                map[string]string
		wantStatus         int
		wantType           string
		wantTitle          string
	}{
		{"unknown path", "GET", "/nope", "", nil, 404, "urn:instore:problem:not-found", "Not found"},
		{"wrong method", "DELETE", "/ok", "", nil, 405, "urn:instore:problem:method-not-allowed", "Method not allowed"},
		{"service code", "GET", "/busy", "", nil, 409, "urn:instore:problem:WP09", "Terminal is busy processing previous transaction"},
		{"panic", "GET", "/panic", "", nil, 500, "urn:instore:problem:internal", "Internal server error"},
		{"unclassified", "GET", "/fail", "", nil, 500, "urn:instore:problem:internal", "Internal server error"},
		{"too large by length", "POST", "/echo", strings.Repeat(" ", MaxBodyBytes+1), map[string]string{"Content-Type": "application/json"}, 413, "urn:instore:problem:payload-too-large", "Payload too large"},
		{"not json", "POST", "/echo", "a=b", map[string]string{"Content-Type": "text/plain"}, 415, "urn:instore:problem:unsupported-media-type", "Unsupported media type"},
		{"bad json", "POST", "/echo", "{", map[string]string{"Content-Type": "application/json"}, 400, "urn:instore:problem:validation", "Request validation failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, p := do(a, tt.method, tt.path, strings.NewReader(tt.body), tt.hdr)
			if w.Code != tt.wantStatus || p == nil {
				t.Fatalf("%s %s = %d %q, want %d problem", tt.method, tt.path, w.Code, w.Body.String(), tt.wantStatus)
			}
			if p.Type != tt.wantType || p.Title != tt.wantTitle || p.Status != tt.wantStatus {
				t.Errorf("%s %s problem = %+v, want type %q title %q", tt.method, tt.path, p, tt.wantType, tt.wantTitle)
			}
			if rid := w.Header().Get("X-Request-Id"); rid == "" || p.RequestID != rid {
				t.Errorf("requestId = %q, X-Request-Id = %q, want equal and set", p.RequestID, rid)
			}
			if strings.Contains(w.Body.String(), "isk_abc") || strings.Contains(w.Body.String(), "unexpected EOF") {
				t.Errorf("problem body leaks internals: %s", w.Body.String())
			}
		})
	}
	if !strings.Contains(logs.String(), `"msg":"panic"`) || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("panic not logged with its stack; logs:\n%s", logs.String())
	}
}

func TestAPIServiceCodeProblemFields(t *testing.T) {
	a, _, _ := newTestAPI(t)
	w, _ := do(a, "GET", "/busy", nil, nil)
	var m map[string]any
	json.Unmarshal(w.Body.Bytes(), &m)
	if m["errorId"] != float64(9) || m["errorCode"] != "WP09" || m["onlineAPIRefId"] != "ref1" {
		t.Errorf("WP09 problem = %s, want errorId 9, errorCode WP09, onlineAPIRefId ref1", w.Body.String())
	}
	w, _ = do(a, "GET", "/nope", nil, nil)
	m = nil
	json.Unmarshal(w.Body.Bytes(), &m)
	if _, ok := m["errorId"]; ok {
		t.Errorf("not-found problem = %s, want no errorId", w.Body.String())
	}
}

func TestAPIRequestIDAndAccessLog(t *testing.T) {
	a, logs, reg := newTestAPI(t)
	w, _ := do(a, "GET", "/ok", nil, map[string]string{"X-Request-Id": "abc-123"})
	if got := w.Header().Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("X-Request-Id = %q, want the client's abc-123", got)
	}
	w, _ = do(a, "GET", "/ok", nil, map[string]string{"X-Request-Id": "bad id with spaces"})
	if got := w.Header().Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Errorf("X-Request-Id = %q for an invalid client id, want a generated req_...", got)
	}
	var line map[string]any
	first := strings.SplitN(logs.String(), "\n", 2)[0]
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("access log line %q: %v", first, err)
	}
	for k, want := range map[string]any{"msg": "request", "method": "GET", "route": "GET /ok", "status": float64(200), "requestId": "abc-123"} {
		if line[k] != want {
			t.Errorf("access log %s = %v, want %v (line %s)", k, line[k], want, first)
		}
	}
	if _, ok := line["durationUs"]; !ok {
		t.Errorf("access log has no durationUs: %s", first)
	}
	if n := testutil.CollectAndCount(reg, "instore_http_request_duration_seconds"); n != 1 {
		t.Errorf("histogram series = %d, want 1 (surface online, route GET /ok, code 200)", n)
	}
}

package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/instore-dev/instore"
)

// newRoutedAPI registers routes of every kind: exact ones (a method and a
// literal path), wildcards, a subtree, and patterns added to the Mux
// directly. Each handler writes which pattern it is and what the request
// says of its route.
func newRoutedAPI() *API {
	meta := instore.DefaultMetadata()
	a := NewAPI("online", slog.New(slog.DiscardHandler), &meta, nil)
	for _, p := range []string{"GET /a/b", "POST /a/b", "GET /a/{id}", "GET /t/", "GET /x.y/z~w_-", "DELETE /d", "GET /m/n",
		"PUT /in-store/api/v1/metadata", "GET /{$}", "GET /e/{$}", "HEAD /h"} {
		a.Handle(p, func(w http.ResponseWriter, r *http.Request) error {
			w.Write([]byte(p + "|" + r.Pattern + "|" + r.PathValue("id")))
			return nil
		})
	}
	a.Mux.HandleFunc("/m/n", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("any method|" + r.Pattern)) })
	a.Mux.HandleFunc("GET /z", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("mux|" + r.Pattern)) })
	return a
}

// TestExactRoutesMatchServeMux: every request is answered the same with
// the exact routes' map as with the ServeMux alone, and the map serves
// only the requests the ServeMux would give its route.
func TestExactRoutesMatchServeMux(t *testing.T) {
	fast, muxOnly := newRoutedAPI(), newRoutedAPI()
	muxOnly.exact = nil
	for _, tc := range []struct {
		method, target string
		exact          bool // served from the map
	}{
		{"GET", "/a/b", true},
		{"GET", "/a/b?q=1", true},
		{"POST", "/a/b", true},
		{"HEAD", "/a/b", false},
		{"PUT", "/a/b", false},
		{"GET", "/a/c", false},
		{"GET", "/a/b/", false},
		{"GET", "/a//b", false},
		{"GET", "/a/./b", false},
		{"GET", "/a/../a/b", false},
		{"GET", "/a/%62", false},
		{"GET", "/a%2Fb", false},
		{"GET", "/t", false},
		{"GET", "/t/x", false},
		{"GET", "/x.y/z~w_-", true},
		{"GET", "/x.y/z%7Ew_-", false},
		{"DELETE", "/d", true},
		{"GET", "/d", false},
		{"GET", "/m/n", true},
		{"POST", "/m/n", false},
		{"GET", "/z", false},
		{"PUT", "/in-store/api/v1/metadata", true},
		{"GET", "/in-store/api/v1/metadata", false},
		{"GET", "/", false},
		{"GET", "/e/", false},
		{"HEAD", "/h", true},
		{"GET", "/h", false},
		{"get", "/a/b", false},
		{"OPTIONS", "*", false},
		{"CONNECT", "/a/b", false},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			if got := fast.route(r) != nil; got != tc.exact {
				t.Errorf("served from the map: %v, want %v", got, tc.exact)
			}
			var answers [2]*httptest.ResponseRecorder
			for i, a := range []*API{fast, muxOnly} {
				w := httptest.NewRecorder()
				a.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
				answers[i] = w
			}
			f, m := answers[0], answers[1]
			f.Header().Del("X-Request-Id")
			m.Header().Del("X-Request-Id")
			if f.Code != m.Code || f.Header().Get("Location") != m.Header().Get("Location") || f.Header().Get("Content-Type") != m.Header().Get("Content-Type") ||
				!bytes.Equal(stripRequestID(f.Body.Bytes()), stripRequestID(m.Body.Bytes())) {
				t.Errorf("with exact routes: %d %v %s\nServeMux alone: %d %v %s", f.Code, f.Header(), f.Body, m.Code, m.Header(), m.Body)
			}
		})
	}
}

// stripRequestID removes the request id from a problem body.
func stripRequestID(b []byte) []byte {
	if i := bytes.Index(b, []byte(`"requestId":"`)); i >= 0 {
		if j := bytes.IndexByte(b[i+13:], '"'); j >= 0 {
			return append(append([]byte(nil), b[:i]...), b[i+13+j+1:]...)
		}
	}
	return b
}

func TestExactPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, method, path string
	}{
		{"GET /in-store/api/v1/metadata", "GET", "/in-store/api/v1/metadata"},
		{"POST /oauth2/token", "POST", "/oauth2/token"},
		{"GET /x.y/z~w_-", "GET", "/x.y/z~w_-"},
		{"/in-store/api/v1/metadata", "", ""},
		{"GET /terminal/{terminalId}", "", ""},
		{"GET /t/", "", ""},
		{"GET /", "", ""},
		{"GET /e/{$}", "", ""},
		{"GET  /a", "", ""},
		{"GET\t/a", "", ""},
		{"GET host.example/a", "", ""},
		{"GET /a/../b", "", ""},
		{"GET /a//b", "", ""},
		{"GET /a%20b", "", ""},
		{"GET /a b", "", ""},
		{"get /a", "", ""},
		{"CONNECT /a", "", ""},
		{" /a", "", ""},
	} {
		m, p, ok := exactPattern(tc.pattern)
		if m != tc.method || p != tc.path || ok != (tc.method != "") {
			t.Errorf("exactPattern(%q) = %q, %q, %v; want %q, %q", tc.pattern, m, p, ok, tc.method, tc.path)
		}
	}
}

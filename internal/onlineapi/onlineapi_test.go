package onlineapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStaticDoc: the document with its header, HEAD without the body, and
// 304 for a matching If-None-Match.
func TestStaticDoc(t *testing.T) {
	body := []byte(`{"a":1}`)
	d := newStaticDoc(body, "application/json")
	serve := func(method string, hdr http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/doc", nil)
		for k, v := range hdr {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		w.Header().Set("X-Request-Id", "req_1")
		if err := d.serve(w, r, nil); err != nil {
			t.Fatal(err)
		}
		return w
	}
	full := http.Header{
		"X-Request-Id":   {"req_1"},
		"Content-Type":   {"application/json"},
		"Etag":           {d.etag},
		"Cache-Control":  {"private, no-cache"},
		"Content-Length": {strconv.Itoa(len(body))},
	}
	for _, tc := range []struct {
		name, method string
		hdr          http.Header
		status       int
		header       http.Header
		body         string
	}{
		{"GET", "GET", nil, 200, full, string(body)},
		{"HEAD", "HEAD", nil, 200, full, ""},
		{"stale ETag", "GET", http.Header{"If-None-Match": {`"other"`}}, 200, full, string(body)},
		{"empty If-None-Match", "GET", http.Header{"If-None-Match": {""}}, 200, full, string(body)},
		{"ETag", "GET", http.Header{"If-None-Match": {d.etag}}, 304, http.Header{"X-Request-Id": {"req_1"}, "Etag": {d.etag}, "Cache-Control": {"private, no-cache"}}, ""},
		{"weak ETag in a list", "GET", http.Header{"If-None-Match": {`"x", W/` + d.etag}}, 304, http.Header{"X-Request-Id": {"req_1"}, "Etag": {d.etag}, "Cache-Control": {"private, no-cache"}}, ""},
		{"star", "GET", http.Header{"If-None-Match": {"*"}}, 304, http.Header{"X-Request-Id": {"req_1"}, "Etag": {d.etag}, "Cache-Control": {"private, no-cache"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(tc.method, tc.hdr)
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Errorf("= %d %q, want %d %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			if diff := cmp.Diff(tc.header, w.Header()); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

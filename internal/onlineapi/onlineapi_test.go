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

// TestAtoi: a query's integer is decimal digits only, as an event cursor
// is: a sign, a space, a hex or exponent form is refused (strconv.Atoi
// took "+1" for ?limit= and ?wait= while ?after= refused it).
func TestAtoi(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1": 1, "60": 60, "007": 7, "9223372036854775807": 9223372036854775807,
		"+1": -1, "-1": -1, " 1": -1, "1 ": -1, "": -1, "0x10": -1, "1e2": -1, "9223372036854775808": -1, "١": -1} {
		n, err := atoi(s)
		if (err == nil) != (want >= 0) || err == nil && n != want {
			t.Errorf("atoi(%q) = %d, %v; want %d (-1: refused)", s, n, err, want)
		}
	}
}

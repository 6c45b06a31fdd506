package sandbox

import (
	"net/http/httptest"
	"testing"
)

// TestFromLoopback: the demo's credentials go only to a browser on this
// machine that asked this server by a loopback name, with no proxy between.
func TestFromLoopback(t *testing.T) {
	for _, tc := range []struct {
		remote, host, header string
		want                 bool
	}{
		{"127.0.0.1:50000", "127.0.0.1:8080", "", true},
		{"[::1]:50000", "[::1]:8080", "", true},
		{"127.0.0.1:50000", "localhost:8080", "", true},
		{"[::ffff:127.0.0.1]:50000", "127.0.0.1:8080", "", true},
		{"192.0.2.7:50000", "127.0.0.1:8080", "", false},                // another machine
		{"10.1.2.3:50000", "demo.internal:8080", "", false},             // another machine, by name
		{"127.0.0.1:50000", "rebound.example:8080", "", false},          // a name rebound to 127.0.0.1
		{"127.0.0.1:50000", "127.0.0.1:8080", "X-Forwarded-For", false}, // a proxy on this machine
		{"127.0.0.1:50000", "127.0.0.1:8080", "Forwarded", false},
		{"127.0.0.1:50000", "127.0.0.1:8080", "X-Real-Ip", false},
		{"garbage", "127.0.0.1:8080", "", false},
	} {
		r := httptest.NewRequest("GET", "/console/defaults", nil)
		r.RemoteAddr, r.Host = tc.remote, tc.host
		if tc.header != "" {
			r.Header.Set(tc.header, "203.0.113.9")
		}
		if got := fromLoopback(r); got != tc.want {
			t.Errorf("from %s to %s (%s): %v, want %v", tc.remote, tc.host, tc.header, got, tc.want)
		}
	}
}

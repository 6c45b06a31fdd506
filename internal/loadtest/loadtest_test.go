package loadtest

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	// 1..10000 microseconds, once each.
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.9, 9000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if rel := math.Abs(float64(got-c.want)) / float64(c.want); rel > 0.016 {
			t.Errorf("quantile(%v) = %v, want %v within 1.6%%", c.q, got, c.want)
		}
	}
	if h.mean() != 5000500*time.Nanosecond {
		t.Errorf("mean = %v", h.mean())
	}
	var m hist
	m.merge(&h)
	m.merge(&h)
	if m.n != 20000 || m.quantile(0.5) != h.quantile(0.5) {
		t.Errorf("merge: n %d, p50 %v", m.n, m.quantile(0.5))
	}
	var empty hist
	if empty.quantile(0.99) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}

func TestHistIndexMonotonic(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<40; v = v*9/8 + 1 {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("index(%d) = %d after %d", v, i, prev)
		}
		if mid := histValue(i); math.Abs(float64(mid-v)) > float64(v)/64+1 {
			t.Fatalf("value(index(%d)) = %d: off by more than 1/64", v, mid)
		}
		prev = i
	}
}

func TestRawClient(t *testing.T) {
	big := strings.Repeat("x", 5000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") != "yes" {
			w.WriteHeader(400)
			return
		}
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		case "/chunked":
			w.Write([]byte(big[:100]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[100:]))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/304":
			w.WriteHeader(304)
		}
	}))
	defer srv.Close()
	host, err := hostOf(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := newRawClient(host)
	defer c.Close()
	for _, tc := range []struct {
		path, body string
		status     int
	}{{"/length", "hello", 200}, {"/chunked", big, 200}, {"/304", "", 304}, {"/close", "bye", 200}, {"/length", "hello", 200}, {"/length", "hello", 200}} {
		st, err := c.do(rawRequest(host, tc.path, "X-Test", "yes"), 5*time.Second)
		if err != nil || st != tc.status || string(c.body) != tc.body {
			t.Fatalf("GET %s = %d %q %v, want %d %q", tc.path, st, truncate(c.body, 20), err, tc.status, truncate([]byte(tc.body), 20))
		}
	}
	if st, _ := c.do(rawRequest(host, "/length"), 5*time.Second); st != 400 {
		t.Errorf("without the header: %d, want 400", st)
	}
}

func TestReadProc(t *testing.T) {
	s, err := readProc(0)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.RSS <= 0 || s.HWM < s.RSS || s.CPU < 0 {
		t.Errorf("readProc(self) = %+v", s)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for u, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "http://[::1]:8080": true,
		"http://10.0.0.1:8080": false, "http://example.com": false, "ws://192.168.1.1:8082": false,
	} {
		if err := loopbackURL(u); (err == nil) != ok {
			t.Errorf("loopbackURL(%s) = %v", u, err)
		}
	}
}

func TestCommas(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 12.34: "12.3", 999: "999", 1234: "1,234", 1234567.8: "1,234,568"} {
		if got := commas(v); got != want {
			t.Errorf("commas(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestCPUSnapshotSince: a process that ended between two snapshots (a
// closed PostgreSQL connection) cannot make the CPU figure negative; a new
// one counts from zero.
func TestCPUSnapshotSince(t *testing.T) {
	before := cpuSnapshot{1: 5 * time.Second, 2: 9 * time.Second}
	after := cpuSnapshot{1: 7 * time.Second, 3: time.Second} // 2 ended, 3 started
	if got := after.since(before); got != 3*time.Second {
		t.Errorf("since = %v, want 3s (2s of pid 1, 1s of the new pid 3)", got)
	}
}

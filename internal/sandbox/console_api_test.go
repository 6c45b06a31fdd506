package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testserver"
)

func TestConsoleOnlyInSandbox(t *testing.T) {
	srv := testserver.Start(t, testserver.Config(t.TempDir()))
	for _, path := range []string{"/console", "/console/static/app.js", "/console/events"} {
		resp, err := http.Get(srv.URL("online") + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s outside sandbox mode = %d, want 404", path, resp.StatusCode)
		}
	}
}

// events opens the console's event stream and returns its events one by
// one as (kind, data).
func events(t *testing.T, info demo.Info) (<-chan [2]string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := onlineCaller(info).Open(ctx, "/console/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /console/events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan [2]string, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sr := client.NewEventStreamReader(resp.Body)
		for {
			m, err := sr.Next()
			if err != nil {
				return
			}
			if m.HasData {
				ch <- [2]string{m.Event, m.Data}
			}
		}
	}()
	return ch, cancel
}

// startWatched starts the demo with a caller of its Online API (startAPI)
// and the console's event stream (closed when the test ends), and returns
// them with the virtual terminal that waits for a person.
func startWatched(t *testing.T) (*onlineAPI, demo.Info, <-chan [2]string, demo.Terminal) {
	t.Helper()
	d, a := startAPI(t)
	info := d.Info()
	ch, stop := events(t, info)
	t.Cleanup(stop)
	return a, info, ch, info.Terminals[0]
}

// next returns the data of the next event of this kind that matches. The
// console's stream carries the virtual devices only: any other kind (a
// transaction, a print job: the page reads those from the Online API's
// stream) fails the test.
func next(t *testing.T, ch <-chan [2]string, kind string, match func(string) bool) string {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended while waiting for %s", kind)
			}
			if ev[0] != "snapshot" && ev[0] != "device" {
				t.Fatalf("the console's stream sent a %q event; it carries only the devices", ev[0])
			}
			if ev[0] == kind && (match == nil || match(ev[1])) {
				return ev[1]
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// TestConsoleEventsAndActions: the console's own stream is a snapshot of
// the visible virtual devices and the currencies' decimals, then each
// device's changes, nothing else; the buttons act on the devices.
func TestConsoleEventsAndActions(t *testing.T) {
	d := startDemo(t)
	info := d.Info()
	// Without credentials: 401.
	resp, err := http.Get(info.OnlineAPIBaseURL + "/console/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("events without credentials = %d, want 401", resp.StatusCode)
	}
	ch, stop := events(t, info)
	defer stop()
	var snap map[string]json.RawMessage
	if err := json.Unmarshal([]byte(next(t, ch, "snapshot", nil)), &snap); err != nil {
		t.Fatal(err)
	}
	var devices []struct {
		SerialNumber string `json:"serialNumber"`
		Interactive  bool   `json:"interactive"`
	}
	var digits map[string]int
	json.Unmarshal(snap["devices"], &devices)
	json.Unmarshal(snap["currencyDigits"], &digits)
	if len(snap) != 2 || len(devices) != 3 || !devices[0].Interactive || digits["JPY"] != 0 || digits["SEK"] != 2 {
		t.Fatalf("snapshot = %s, want the 3 devices (the first waiting for a person) and the currencies' decimals, nothing else", keys(snap))
	}
	// A button on a terminal that does not wait for a person sets its next
	// outcome: the mobile terminal declines the next purchase.
	mobile := info.Terminals[1]
	if code, body := consoleAction(t, info, mobile.SerialNumber, "decline"); code != 200 {
		t.Fatalf("decline action = %d %s", code, body)
	}
	isMobile := func(s string) bool { return strings.Contains(s, `"serialNumber":"`+mobile.SerialNumber+`"`) }
	next(t, ch, "device", func(s string) bool { return isMobile(s) && strings.Contains(s, `"nextOutcome":11`) })
	// The purchase takes it: the device's screen shows the decline and
	// its next outcome is gone.
	purchase(t, info, mobile.TerminalID, 1000)
	next(t, ch, "device", func(s string) bool {
		return isMobile(s) && strings.Contains(s, `"nextOutcome":null`) && strings.Contains(s, "DECLINED")
	})
	// Unknown devices and actions are 404 problems.
	for _, dev := range [][2]string{{"NOPE", "approve"}, {mobile.SerialNumber, "dance"}} {
		if code, _ := consoleAction(t, info, dev[0], dev[1]); code != 404 {
			t.Errorf("POST /console/devices/%s/%s = %d, want 404", dev[0], dev[1], code)
		}
	}
	// A printer button sets the next print status, shown on the device.
	consoleAction(t, info, mobile.SerialNumber, "out-of-paper")
	next(t, ch, "device", func(s string) bool { return isMobile(s) && strings.Contains(s, `"nextPrint":2`) })
}

// consoleAction presses a console button (POST
// /console/devices/{serialNumber}/{action}, action with its query) with
// the demo's credentials and returns the status and body of the answer.
func consoleAction(t *testing.T, info demo.Info, serial, action string) (int, string) {
	t.Helper()
	code, b := onlineCaller(info).Call(t, "POST", "/console/devices/"+serial+"/"+action, nil)
	return code, string(b)
}

// answer sends req and returns the status and body of its answer.
func answer(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestConsoleDefaultsOnlyToLoopback: the demo's credentials are offered to
// a browser on the same machine; a request by another name (a DNS name
// rebound to 127.0.0.1) or through a proxy gets 403 and no credentials.
func TestConsoleDefaultsOnlyToLoopback(t *testing.T) {
	d := startDemo(t)
	info := d.Info()
	get := func(host, forwarded string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", info.OnlineAPIBaseURL+"/console/defaults", nil)
		if host != "" {
			req.Host = host
		}
		if forwarded != "" {
			req.Header.Set("X-Forwarded-For", forwarded)
		}
		return answer(t, req)
	}
	if code, body := get("", ""); code != 200 || !strings.Contains(body, info.AccessToken) {
		t.Errorf("GET /console/defaults from this machine = %d, want 200 with the demo's token", code)
	}
	for _, tc := range [][2]string{{"rebound.example:8080", ""}, {"", "203.0.113.9"}} {
		code, body := get(tc[0], tc[1])
		if code != 403 || strings.Contains(body, info.AccessToken) || strings.Contains(body, info.SubscriptionKey) {
			t.Errorf("GET /console/defaults with Host %q, X-Forwarded-For %q = %d, want 403 without credentials", tc[0], tc[1], code)
		}
	}
}

// TestConsoleStaticNames: the console's files are served; a name that is
// no file's (bytes that are not UTF-8, which the file server answered 500
// to, NUL, the directory itself, a climb out) is a 404 problem.
func TestConsoleStaticNames(t *testing.T) {
	d := startDemo(t)
	base := d.Server.URL("online")
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Content-Type")
	}
	if code, _ := get("/console/static/app.js"); code != 200 {
		t.Errorf("GET /console/static/app.js = %d, want 200", code)
	}
	for _, p := range []string{"/console/static/%FF", "/console/static/a%C3%28", "/console/static/%00", "/console/static/",
		"/console/static/..%2F..%2Fgo.mod", "/console/static/nope.js"} {
		if code, ct := get(p); code != 404 || ct != "application/problem+json" {
			t.Errorf("GET %s = %d %s, want 404 application/problem+json", p, code, ct)
		}
	}
}

package sandbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/server"
)

func TestConsoleOnlyInSandbox(t *testing.T) {
	srv, err := server.New(context.Background(), server.Config{
		ListenOnline: "127.0.0.1:0", ListenAccess: "127.0.0.1:0", ListenTerminal: "127.0.0.1:0", ListenOps: "127.0.0.1:0",
		DataDir: t.TempDir(), SQLiteSynchronous: "NORMAL",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
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
	req, _ := http.NewRequestWithContext(ctx, "GET", info.OnlineAPIBaseURL+"/console/events", nil)
	req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
	req.Header.Set("Authorization", "Bearer "+info.AccessToken)
	resp, err := http.DefaultClient.Do(req)
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
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var kind string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ch <- [2]string{kind, line[6:]}
			}
		}
	}()
	return ch, cancel
}

func next(t *testing.T, ch <-chan [2]string, kind string, match func(string) bool) string {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended while waiting for %s", kind)
			}
			if ev[0] == kind && (match == nil || match(ev[1])) {
				return ev[1]
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

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
	var snap struct {
		Devices []struct {
			SerialNumber string `json:"serialNumber"`
			Interactive  bool   `json:"interactive"`
		} `json:"devices"`
		Metadata struct {
			ErrorCodes []any `json:"errorCodes"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(next(t, ch, "snapshot", nil)), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Devices) != 3 || len(snap.Metadata.ErrorCodes) != 15 || !snap.Devices[0].Interactive {
		t.Fatalf("snapshot = %+v", snap)
	}
	// A button on a terminal that does not wait for a person sets its next
	// outcome: the mobile terminal declines the next purchase.
	mobile := info.Terminals[1]
	req, _ := http.NewRequest("POST", info.OnlineAPIBaseURL+"/console/devices/"+mobile.SerialNumber+"/decline", nil)
	req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
	req.Header.Set("Authorization", "Bearer "+info.AccessToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("decline action = %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	ref := purchase(t, info, mobile.TerminalID, 1000)
	next(t, ch, "transaction", func(s string) bool {
		return strings.Contains(s, ref) && strings.Contains(s, `"statusId":11`)
	})
	// Unknown devices and actions are 404 problems.
	for _, path := range []string{"/console/devices/NOPE/approve", "/console/devices/" + mobile.SerialNumber + "/dance"} {
		req, _ := http.NewRequest("POST", info.OnlineAPIBaseURL+path, nil)
		req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
		req.Header.Set("Authorization", "Bearer "+info.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("POST %s = %d, want 404", path, resp.StatusCode)
		}
	}
	// A print job appears too.
	body := strings.NewReader(`{"terminalId":"` + mobile.TerminalID + `","lines":["hello"]}`)
	req, _ = http.NewRequest("POST", info.OnlineAPIBaseURL+"/in-store/api/v1/print", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
	req.Header.Set("Authorization", "Bearer "+info.AccessToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	next(t, ch, "print", func(s string) bool { return strings.Contains(s, `"status":"SUCCESS"`) })
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
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
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

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/server"
)

// TestDemoReadyWhenItSaysSo holds the virtual terminals' connection back
// until the demo printed its JSON line (or, for a demo that waits for
// them, until a few seconds passed), then purchases at once: the demo must
// not print before its terminals are ready, so the purchase is accepted
// and approved, never answered 409 WP23. (A demo that printed after a
// time-out with its terminals still offline fails here at every run.)
func TestDemoReadyWhenItSaysSo(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	// A demo that waits for its terminals prints only once they connect:
	// the gate opens by itself after longer than any time-out a demo
	// printing without them would have used.
	fallback := time.AfterFunc(8*time.Second, open)
	defer fallback.Stop()
	demoConfigHook = func(c *server.Config) {
		c.SandboxDialGate = func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	t.Cleanup(func() { demoConfigHook = nil })
	info, _, _ := runDemo(t, "--sim-delay", "0")
	open()
	body := `{"terminalId":"` + info.Terminals[0].TerminalID + `","amount":1250,"currency":"SEK"}`
	req, _ := http.NewRequest("POST", info.OnlineAPIBaseURL+"/in-store/api/v1/purchase", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
	req.Header.Set("Authorization", "Bearer "+info.AccessToken)
	tx := demoCall(t, req, http.StatusCreated)
	for range 5 {
		if tx.Status != "PENDING" {
			break
		}
		req, _ := http.NewRequest("GET", info.OnlineAPIBaseURL+"/in-store/api/v1/transaction/"+tx.Ref+"?wait=20", nil)
		req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
		req.Header.Set("Authorization", "Bearer "+info.AccessToken)
		tx = demoCall(t, req, http.StatusOK)
	}
	if tx.Status != "APPROVED" {
		t.Errorf("the purchase sent right after the JSON line ended %s, want APPROVED", tx.Status)
	}
}

type demoTx struct {
	Ref    string `json:"onlineAPIRefId"`
	Status string `json:"status"`
}

func demoCall(t *testing.T, req *http.Request, want int) demoTx {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", req.Method, req.URL.Path, resp.StatusCode, b, want)
	}
	var tx demoTx
	if err := json.Unmarshal(b, &tx); err != nil {
		t.Fatal(err)
	}
	return tx
}

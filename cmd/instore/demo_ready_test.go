package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/apitest"
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
	c := apitest.Caller{Base: info.OnlineAPIBaseURL, Key: info.SubscriptionKey, Token: info.AccessToken}
	tx := demoCall(t, c, "POST", "/in-store/api/v1/purchase", map[string]any{"terminalId": info.Terminals[0].TerminalID, "amount": 1250, "currency": "SEK"}, http.StatusCreated)
	for range 5 {
		if tx.Status != "PENDING" {
			break
		}
		tx = demoCall(t, c, "GET", "/in-store/api/v1/transaction/"+tx.Ref+"?wait=20", nil, http.StatusOK)
	}
	if tx.Status != "APPROVED" {
		t.Errorf("the purchase sent right after the JSON line ended %s, want APPROVED", tx.Status)
	}
}

type demoTx struct {
	Ref    string `json:"onlineAPIRefId"`
	Status string `json:"status"`
}

func demoCall(t *testing.T, c apitest.Caller, method, path string, body any, want int) demoTx {
	t.Helper()
	st, b := c.Call(t, method, path, body)
	if st != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, st, b, want)
	}
	var tx demoTx
	if err := json.Unmarshal(b, &tx); err != nil {
		t.Fatal(err)
	}
	return tx
}

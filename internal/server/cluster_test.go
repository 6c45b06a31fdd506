package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sim"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// Several nodes on one PostgreSQL (internal/cluster): the ECR talks to node
// A, the terminal holds its session with node B. Everything the ECR asks
// is committed on A and reaches the terminal through B (a link, a
// purchase, a cancel); what the terminal reports on B wakes the ECR's
// waits on A. When B shuts down, the terminal fails over to A at once
// (1012) and the next purchase runs there.

// startNode starts another node on e's PostgreSQL schema.
func startNode(t *testing.T, e *env) *server.Server {
	t.Helper()
	cfg := e.cfg
	testserver.Loopback(&cfg)
	cfg.DataDir, cfg.NodeID = "", ""
	return testserver.Start(t, cfg)
}

func TestTwoNodes(t *testing.T) {
	u := freshPostgres(t)
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is not set; set it to a postgres:// URL to run the cluster tests")
	}
	a := owedEnv(t, func(c *server.Config) { c.DatabaseURL = u }, func(c *server.Config) {
		c.ClusterHeartbeat, c.ClusterDead, c.ClusterRescan = 200*time.Millisecond, time.Second, 500*time.Millisecond
	})
	b := startNode(t, a.env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(a.logs.String())
		}
	})

	// An unlinked device on B, linked through A.
	ctx := context.Background()
	const serial = "VT-CLUSTER-1"
	_, secret, err := a.ad.CreateDevice(ctx, serial, instore.ModelCountertop, a.customer.ID)
	must(t, err)
	ts, err := a.ad.AllocateTerminals(ctx, a.merchantRec.ID, 1)
	must(t, err)
	term := ts[0].TerminalID
	vt, err := sim.New(sim.Config{
		GatewayURLs:  []string{b.URL("terminal") + protocol.Path, a.srv.URL("terminal") + protocol.Path},
		SerialNumber: serial, Secret: secret, Delay: 300 * time.Millisecond,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	})
	must(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- vt.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })
	testwait.For(t, "the device shows a link code", func() bool { return vt.State().LinkCode != "" })
	if b.Gateway.Sessions() != 1 || a.srv.Gateway.Sessions() != 0 {
		t.Fatalf("sessions: A %d, B %d; want the device on B", a.srv.Gateway.Sessions(), b.Gateway.Sessions())
	}
	if r := a.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": term, "linkCode": vt.State().LinkCode}, nil); r.resp.StatusCode != 200 {
		t.Fatalf("link through A: %d %s", r.resp.StatusCode, r.body)
	}
	testwait.For(t, "the device on B shows the terminal ID linked through A", func() bool { return vt.State().TerminalID == term })
	if r := a.get(t, "/in-store/api/v1/terminal/"+term); !strings.Contains(string(r.body), `"online":true`) {
		t.Fatalf("A sees the terminal on B offline: %s", r.body)
	}

	// A purchase through A, run by the terminal on B.
	tx := a.purchase(t, term, 1250).tx(t, 201)
	if final := a.final(t, tx.OnlineAPIRefID); final.StatusID != instore.StatusApproved {
		t.Fatalf("purchase through A ended %d %s, want APPROVED", final.StatusID, final.Status)
	}

	// A cancel through A reaches the terminal on B.
	vt.SetInteractive(true)
	tx = a.purchase(t, term, 1300).tx(t, 201)
	if r := a.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil); r.resp.StatusCode != 202 {
		t.Fatalf("cancel through A: %d %s", r.resp.StatusCode, r.body)
	}
	if final := a.final(t, tx.OnlineAPIRefID); final.StatusID != instore.StatusAbortedByCashier {
		t.Fatalf("cancelled purchase ended %d %s, want ABORTED_BY_CASHIER", final.StatusID, final.Status)
	}
	vt.SetInteractive(false)

	// A print through A, printed on B, answered on A.
	if r := a.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": term, "lines": []string{"Thank you"}}, nil); r.resp.StatusCode != 200 && r.resp.StatusCode != 201 || !strings.Contains(string(r.body), `"status":"SUCCESS"`) {
		t.Fatalf("print through A: %d %s", r.resp.StatusCode, r.body)
	}

	// The timeline shows who did what, across the nodes.
	if evs := a.timeline(t, tx.OnlineAPIRefID); len(evs) < 3 || evs[0].Kind != instore.EventCreated {
		t.Fatalf("timeline of the cancelled purchase: %+v", evs)
	}

	// B shuts down: the device moves to A at once and purchases go on.
	must(t, b.Close())
	testwait.For(t, "the device moves to A", func() bool { return a.srv.Gateway.Sessions() == 1 && vt.State().Online })
	tx = a.purchase(t, term, 1400).tx(t, 201)
	if final := a.final(t, tx.OnlineAPIRefID); final.StatusID != instore.StatusApproved {
		t.Fatalf("purchase after the failover ended %d %s, want APPROVED", final.StatusID, final.Status)
	}
}

// TestAttemptOfAnotherNode: a retry with an Idempotency-Key whose first
// request runs on another live node, and has created nothing yet, waits for
// it (409 after the wait) instead of running beside it; the attempt of a
// node that stopped beating was abandoned, and the retry runs.
func TestAttemptOfAnotherNode(t *testing.T) {
	u := freshPostgres(t)
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is not set; set it to a postgres:// URL to run the cluster tests")
	}
	a := startSandbox(t, func(c *server.Config) {
		c.DatabaseURL, c.IdempotencyWait = u, 300*time.Millisecond
	})
	b := startNode(t, a.env)
	ctx := context.Background()
	body := map[string]any{"terminalId": a.terminals[0], "amount": 500, "currency": "SEK"}
	running := func(key, attempt string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		sum := sha256.Sum256(append([]byte("POST /in-store/api/v1/purchase\n"), raw...))
		rec := &instore.IdempotencyRecord{MerchantID: a.merchantRec.ID, Key: key, Method: "POST",
			Path: "/in-store/api/v1/purchase", RequestHash: sum[:], Attempt: attempt, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
		if existing, err := a.srv.Store.BeginIdempotency(ctx, rec); err != nil || existing != nil {
			t.Fatalf("BeginIdempotency = %v, %v", existing, err)
		}
	}
	running("on-live-node", "att_first@"+b.Node.ID())
	a.post(t, "/in-store/api/v1/purchase", body, map[string]string{"Idempotency-Key": "on-live-node"}).problem(t, 409, "conflict")
	running("on-dead-node", "att_first@node_gone")
	if tx := a.post(t, "/in-store/api/v1/purchase", body, map[string]string{"Idempotency-Key": "on-dead-node"}).tx(t, 201); tx.OnlineAPIRefID == "" {
		t.Fatal("no transaction")
	}
}

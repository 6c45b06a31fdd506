package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sim"
	"github.com/instore-dev/instore/internal/testwait"
)

// freshPostgres returns a URL of a new schema in $INSTORE_TEST_DATABASE_URL
// (dropped at the end), or "" when the variable is unset.
func freshPostgres(tb testing.TB) string { return pgtest.Schema(tb, "bench") }

// BenchmarkPurchaseLife measures the whole life of a purchase as an ECR sees
// it: POST /purchase (stored, sent to the terminal, acknowledged: 201), then
// GET /transaction?wait until the final status, with N virtual terminals
// (real WebSocket clients, no card delay) each driven by its own ECR, on
// SQLite (synchronous FULL) and, when INSTORE_TEST_DATABASE_URL is set,
// PostgreSQL. ns/op is wall time per purchase life divided by the
// concurrency, i.e. the inverse of the throughput; "ms/life" is the mean
// latency of one life.
//
//	go test -run='^$' -bench=BenchmarkPurchaseLife -benchtime=2000x ./internal/server/
func BenchmarkPurchaseLife(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/terminals=%d", backend, n), func(b *testing.B) {
				benchPurchaseLife(b, backend, n)
			})
		}
	}
}

func benchPurchaseLife(b *testing.B, backend string, n int) {
	cfg := func(c *server.Config) {
		c.RateLimit = 0
		c.SQLiteSynchronous = "FULL"
		c.Logger = slog.New(slog.DiscardHandler)
		c.AuthCacheTTL = time.Second
	}
	if backend == "postgres" {
		u := freshPostgres(b)
		if u == "" {
			b.Skip("INSTORE_TEST_DATABASE_URL is not set")
		}
		inner := cfg
		cfg = func(c *server.Config) { inner(c); c.DatabaseURL = u }
	}
	e := start(b, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terminals := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		serial := fmt.Sprintf("BENCH-%03d", i)
		terminalID, secret := e.provision(b, serial)
		vt, err := sim.New(sim.Config{GatewayURL: e.srv.URL("terminal") + protocol.Path, SerialNumber: serial, Secret: secret,
			Model: instore.ModelCountertop, SoftwareVersion: "1.0.0", Logger: slog.New(slog.DiscardHandler),
			BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
		must(b, err)
		wg.Add(1)
		go func() { defer wg.Done(); vt.Run(ctx) }()
		terminals <- terminalID
	}
	defer wg.Wait()
	defer cancel()
	// Wait until every terminal is online.
	testwait.For(b, fmt.Sprintf("all %d terminals online", n), func() bool { return e.srv.Gateway.Sessions() == n })
	tr := &http.Transport{MaxIdleConnsPerHost: n + 4}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	defer tr.CloseIdleConnections()
	hdr := http.Header{"Authorization": {"Bearer " + e.token}, "Ocp-Apim-Subscription-Key": {e.key}, "Content-Type": {"application/json"}}
	call := func(method, u string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		req.Header = hdr.Clone()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	var jobs sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range n {
		jobs.Add(1)
		go func() {
			defer jobs.Done()
			term := <-terminals
			for range work {
				t0 := time.Now()
				body, _ := json.Marshal(map[string]any{"terminalId": term, "amount": 1000, "currency": "SEK"})
				st, out := call("POST", e.online+"/in-store/api/v1/purchase", body)
				if st != 201 {
					b.Errorf("purchase = %d %s", st, out)
					return
				}
				var tx struct {
					Ref      string                    `json:"onlineAPIRefId"`
					StatusID instore.TransactionStatus `json:"statusId"`
				}
				json.Unmarshal(out, &tx)
				for tx.StatusID == instore.StatusPending {
					st, out = call("GET", e.online+"/in-store/api/v1/transaction/"+tx.Ref+"?wait=30", nil)
					if st != 200 {
						b.Errorf("status = %d %s", st, out)
						return
					}
					json.Unmarshal(out, &tx)
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	jobs.Wait()
	b.StopTimer()
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		b.ReportMetric(float64(sum.Microseconds())/float64(len(lat))/1000, "ms/life")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms/life")
	}
}

// BenchmarkGatewayLatency measures the time from an ECR's purchase request
// to the terminal receiving the command (HTTP, authentication, the
// transaction committed to the store, the frame written), with a terminal
// written from the protocol alone that acknowledges and approves at once.
//
//	go test -run='^$' -bench=BenchmarkGatewayLatency -benchtime=500x ./internal/server/
func BenchmarkGatewayLatency(b *testing.B) {
	e := start(b, func(c *server.Config) {
		c.RateLimit, c.SQLiteSynchronous, c.Logger = 0, "FULL", slog.New(slog.DiscardHandler)
	})
	s := &sandbox{env: e}
	term, secret := s.provision(b, "LAT-1")
	d := dialDevice(b, e.srv.URL("terminal"), "LAT-1", secret)
	body, _ := json.Marshal(map[string]any{"terminalId": term, "amount": 1000, "currency": "SEK"})
	hdr := e.auth(e.token, e.key)
	hdr["Content-Type"] = "application/json"
	// Commit to receipt: observers are told of a new transaction right
	// after its commit, before it is sent.
	var committedMu sync.Mutex
	committed := map[string]time.Time{}
	e.srv.Service.Observe(func(id string) {
		now := time.Now()
		committedMu.Lock()
		if _, ok := committed[id]; !ok {
			committed[id] = now
		}
		committedMu.Unlock()
	})
	var total time.Duration
	lat := make([]time.Duration, 0, b.N)
	dispatch := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequest("POST", e.online+"/in-store/api/v1/purchase", bytes.NewReader(body))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		cmd := d.expect(protocol.TypePurchase)
		received := time.Now()
		l := received.Sub(t0)
		total += l
		lat = append(lat, l)
		committedMu.Lock()
		at, ok := committed[cmd.Ref]
		committedMu.Unlock()
		if !ok {
			b.Fatalf("no commit observed for %s before the terminal received it", cmd.Ref)
		}
		dispatch = append(dispatch, received.Sub(at))
		d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
		d.result(cmd.Ref, 0, protocol.TypeConfirm)
		<-done
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/command")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms/command")
	sort.Slice(dispatch, func(i, j int) bool { return dispatch[i] < dispatch[j] })
	b.ReportMetric(float64(dispatch[len(dispatch)/2].Microseconds())/1000, "p50-ms/commit-to-terminal")
	b.ReportMetric(float64(dispatch[len(dispatch)*99/100].Microseconds())/1000, "p99-ms/commit-to-terminal")
}

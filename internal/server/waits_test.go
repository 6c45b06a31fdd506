package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestTimeoutsCoverWaits(t *testing.T) {
	cases := []struct {
		name                string
		cfg                 server.Config
		writeTimeout, close time.Duration
	}{
		// The longest request: a retry that waits 30 s for the first and
		// then prints (30 s); the shutdown: a print (30 s).
		{"defaults", server.Config{}, 90 * time.Second, 40 * time.Second},
		{"short base write time-out", server.Config{WriteTimeout: time.Second}, 70 * time.Second, 40 * time.Second},
		{"long print", server.Config{PrintTimeout: 2 * time.Minute}, 160 * time.Second, 130 * time.Second},
		{"long ack", server.Config{AckTimeout: 5 * time.Minute}, 341 * time.Second, 311 * time.Second},
		{"long idempotency wait", server.Config{IdempotencyWait: 2 * time.Minute}, 160 * time.Second, 40 * time.Second},
		{"short waits: the long-poll is the longest", server.Config{AckTimeout: time.Second, PrintTimeout: time.Second, IdempotencyWait: time.Second},
			90 * time.Second, 12 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.OnlineWriteTimeout(); got != tc.writeTimeout {
				t.Errorf("OnlineWriteTimeout() = %s, want %s", got, tc.writeTimeout)
			}
			if got := tc.cfg.DefaultShutdownTimeout(); got != tc.close {
				t.Errorf("DefaultShutdownTimeout() = %s, want %s", got, tc.close)
			}
			// Every wait ends before the write time-out, with the margin.
			for _, w := range []time.Duration{time.Duration(instore.MaxWait) * time.Second, tc.cfg.LongestRequest(), tc.cfg.PostWait()} {
				if w+server.WaitMargin > tc.cfg.OnlineWriteTimeout() {
					t.Errorf("a wait of %s plus the margin outlasts the write time-out %s", w, tc.cfg.OnlineWriteTimeout())
				}
			}
		})
	}
}

// TestAnswersOutlastWriteTimeout gives the listeners a write time-out
// shorter than every wait of the Online API: each wait's answer still
// arrives, because the Online API's write time-out is raised above the
// longest wait (with a fixed one, the client would see the connection close
// with no reply).
func TestAnswersOutlastWriteTimeout(t *testing.T) {
	s := startSandbox(t, func(c *server.Config) {
		c.WriteTimeout = 100 * time.Millisecond
		c.SimDelay = 500 * time.Millisecond
		c.PrintTimeout = 500 * time.Millisecond
		c.IdempotencyWait = 5 * time.Second
	})
	counter, mobile, pinpad := s.terminals[0], s.terminals[1], s.terminals[2]

	// The wait for an acknowledgement that never comes (91: WP25 after the
	// ack time-out), by two requests with one Idempotency-Key: one of them
	// also waits for the other.
	var wg sync.WaitGroup
	answers := make([]reply, 2)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": pinpad, "amount": 1091, "currency": "SEK"},
				map[string]string{"Idempotency-Key": "no-ack"})
		}()
	}
	wg.Wait()
	replays := 0
	for i, a := range answers {
		if a.resp == nil {
			t.Fatalf("purchase %d got no answer", i)
		}
		p := a.problem(t, 504, "WP25")
		if p.OnlineAPIRefID == "" || p.OnlineAPIRefID != answers[0].problemRef(t) {
			t.Errorf("answer %d names transaction %q, want the first's %q", i, p.OnlineAPIRefID, answers[0].problemRef(t))
		}
		if a.resp.Header.Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	if replays != 1 {
		t.Errorf("%d of the two answers were replays, want 1", replays)
	}

	// A status request that holds until the result (after the card delay).
	tx := s.purchase(t, counter, 4200).tx(t, 201)
	if got := s.get(t, "/in-store/api/v1/transaction/"+tx.OnlineAPIRefID+"?wait=20").tx(t, 200); got.StatusID != instore.StatusApproved {
		t.Errorf("long-poll answered status %d, want APPROVED", got.StatusID)
	}

	// A print the terminal never answers: TIMEOUT at the print time-out.
	s.post(t, "/sandbox/v1/terminals/"+mobile+"/printer", map[string]any{"statusId": 6}, nil)
	job := s.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": mobile, "lines": []string{"x"}}, nil).job(t)
	if job.Status != "TIMEOUT" {
		t.Errorf("print status = %s, want TIMEOUT", job.Status)
	}
}

// problemRef is the onlineAPIRefId of a problem answer.
func (r reply) problemRef(t *testing.T) string {
	t.Helper()
	var p problem
	must(t, json.Unmarshal(r.body, &p))
	return p.OnlineAPIRefID
}

// TestCloseAnswersWaitingRequests closes the server while a status request
// holds for a result that will not come and a purchase waits for an
// acknowledgement that will not come either: the status request is
// answered at once with the transaction as it is (PENDING), not cut by the
// shutdown time-out; the purchase, an operation, is let finish (504 WP25 at
// its ack time-out).
func TestCloseAnswersWaitingRequests(t *testing.T) {
	arrived := make(chan struct{}, 1)
	ck, clock := newClock()
	e := startWith(t, func(c *server.Config) {
		clock(c)
		c.AckTimeout = 1500 * time.Millisecond
		// Long enough that only the shutdown can end the status request.
		c.TransactionDeadline = time.Minute
		c.RateLimit = 0
	}, func(srv *server.Server) {
		srv.WrapOnline(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == "GET" && strings.Contains(r.URL.RawQuery, "wait=60") {
					arrived <- struct{}{}
				}
				next.ServeHTTP(w, r)
			})
		})
	})
	s := &sandbox{env: e}
	termA, secretA := s.provision(t, "RAW-A")
	termB, secretB := s.provision(t, "RAW-B")
	a := dialDevice(t, s.srv.URL("terminal"), "RAW-A", secretA)
	b := dialDevice(t, s.srv.URL("terminal"), "RAW-B", secretB)

	acked := make(chan txJSON, 1)
	go func() { acked <- s.purchase(t, termA, 5000).tx(t, 201) }()
	cmd := a.expect(protocol.TypePurchase)
	a.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
	tx := <-acked
	status := answer(func() reply { return s.get(t, "/in-store/api/v1/transaction/"+tx.OnlineAPIRefID+"?wait=60") })
	purchase := answer(func() reply {
		return s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": termB, "amount": 700, "currency": "SEK"},
			map[string]string{"Idempotency-Key": "in-flight"})
	})
	b.expect(protocol.TypePurchase)
	<-arrived
	closed := make(chan error, 1)
	go func() { closed <- s.srv.Close() }()
	// The status request is answered by the shutdown: the clock has not
	// moved, so neither its wait nor the deadline ended it.
	if r := <-status; r.resp == nil {
		t.Errorf("the status request waiting at shutdown got no answer")
	} else if got := r.tx(t, 200); got.OnlineAPIRefID != tx.OnlineAPIRefID || got.StatusID != instore.StatusPending {
		t.Errorf("status request at shutdown answered %s status %d, want %s PENDING", got.OnlineAPIRefID, got.StatusID, tx.OnlineAPIRefID)
	}
	// The shutdown lets the purchase run to its ack time-out.
	select {
	case r := <-purchase:
		t.Fatalf("the purchase was answered before its ack time-out (%v)", r.resp != nil)
	default:
	}
	advance(t, ck, 1500*time.Millisecond)
	wantAckTimeout(t, <-purchase, "the purchase waiting for its acknowledgement at shutdown")
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// answer sends request in a goroutine; the channel gets its reply, an
// empty one (no resp) when the request failed the test, so that a wait on
// it ends.
func answer(request func() reply) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		var r reply
		defer func() { ch <- r }()
		r = request()
	}()
	return ch
}

// wantAckTimeout fails t unless what got r, an answer 504 WP25.
func wantAckTimeout(t *testing.T, r reply, what string) {
	t.Helper()
	if r.resp == nil {
		t.Errorf("%s got no answer", what)
		return
	}
	r.problem(t, 504, "WP25")
}

// TestReadyzDuringShutdown: from the moment Close starts, /readyz answers
// 503 while what is in flight is answered (the ops listener closes last).
func TestReadyzDuringShutdown(t *testing.T) {
	ck, clock := newClock()
	e := start(t, func(c *server.Config) {
		clock(c)
		c.AckTimeout = 2 * time.Second
		c.RateLimit = 0
	})
	s := &sandbox{env: e}
	readyz := e.srv.URL("ops") + "/readyz"
	status := func() int {
		resp, err := http.Get(readyz)
		if err != nil {
			return 0 // closed
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != 200 {
		t.Fatalf("/readyz before the shutdown = %d, want 200", got)
	}
	term, d := s.rawTerminal(t, "RAW-RDY")
	purchase := answer(func() reply { return s.purchase(t, term, 700) })
	d.expect(protocol.TypePurchase) // in flight: waits for an ack that never comes
	closed := make(chan error, 1)
	go func() { closed <- s.srv.Close() }()
	testwait.For(t, "/readyz to turn 503 during the shutdown", func() bool {
		select {
		case <-purchase:
			t.Fatalf("the in-flight purchase was answered before /readyz turned 503")
		default:
		}
		switch got := status(); got {
		case 503:
			return true
		case 200:
			return false
		default:
			t.Fatalf("/readyz during the shutdown = %d, want 200 until it turns 503", got)
			return false
		}
	})
	advance(t, ck, 2*time.Second) // the in-flight purchase's ack time-out
	wantAckTimeout(t, <-purchase, "the in-flight purchase")
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestDrainHandsOffSessionsFirst: at the start of a shutdown /readyz turns
// 503 and the terminals' sessions are closed with 1012 (reconnect, to
// another node) while a request is still in flight, which is then
// answered.
func TestDrainHandsOffSessionsFirst(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock, func(c *server.Config) { c.AckTimeout = 3 * time.Second })
	term, d := s.rawTerminal(t, "RAW-DRAIN")

	// A purchase the device never acknowledges: in flight until WP25.
	answered := make(chan int, 1)
	go func() {
		r := s.purchase(t, term, 1000)
		answered <- r.resp.StatusCode
	}()
	d.expect("purchase")

	closed := make(chan error, 1)
	go func() { closed <- s.srv.Close() }()

	// The session is closed with 1012 while the purchase still waits.
	d.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var code int
	for {
		_, _, err := d.conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			code = ce.Code
			break
		}
		if err != nil {
			t.Fatalf("session ended without a close frame: %v", err)
		}
	}
	if code != 1012 {
		t.Errorf("session closed with %d, want 1012 (service restart: reconnect elsewhere)", code)
	}
	select {
	case st := <-answered:
		t.Fatalf("the purchase was answered (%d) before the session was handed off", st)
	default:
	}
	resp, err := http.Get(s.srv.URL("ops") + "/readyz")
	if err != nil {
		t.Fatalf("/readyz while draining: %v (it must answer 503, not stop answering)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", resp.StatusCode)
	}
	// Answered as a purchase the terminal never acknowledged is: 504 WP25.
	advance(t, ck, 3*time.Second)
	if st := <-answered; st != http.StatusGatewayTimeout {
		t.Errorf("the purchase in flight was answered %d, want 504 WP25", st)
	}
	must(t, <-closed)
}

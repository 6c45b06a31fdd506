package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
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

// After a failover no terminal is busy with a sale the service ended: a
// transaction ended without the terminal's result (WP25, WP36) may still
// run on the terminal until its cancel arrives, so a new command must
// never overtake that cancel, whichever node ends the transaction, takes
// the new purchase or holds the terminal's session (internal/service/owed.go). Each test
// holds one node's work at the moment that let the new command through
// first, so that the order is decided by the code and not by the timing.

// gatedStore holds a node's reads at a gate: hello reads of OpenEffects
// (heldOwed) or the reads of a wake-up (heldWake, TerminalBySerial).
type gatedStore struct {
	instore.Store
	// When set, the first OpenEffects waits until a second one starts (or
	// release is closed).
	holdOwed atomic.Bool
	calls    atomic.Int32
	second   chan struct{}
	// When set, TerminalBySerial waits until release is closed.
	holdWake atomic.Bool
	release  chan struct{}
	once     sync.Once
}

func newGatedStore(st instore.Store) *gatedStore {
	return &gatedStore{Store: st, second: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStore) open() { g.once.Do(func() { close(g.release) }) }

func (g *gatedStore) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	if g.holdOwed.Load() {
		switch g.calls.Add(1) {
		case 1:
			select {
			case <-g.second:
			case <-g.release:
			case <-time.After(15 * time.Second):
			}
		case 2:
			close(g.second)
		}
	}
	return g.Store.OpenEffects(ctx, serial)
}

func (g *gatedStore) TerminalBySerial(ctx context.Context, serial string) (*instore.Terminal, error) {
	if g.holdWake.Load() {
		select {
		case <-g.release:
		case <-time.After(15 * time.Second):
		}
	}
	return g.Store.TerminalBySerial(ctx, serial)
}

// startGatedNode starts another node on e's PostgreSQL schema, its store
// behind a gate.
func startGatedNode(t *testing.T, e *env) (*server.Server, *gatedStore) {
	t.Helper()
	cfg := e.cfg
	testserver.Loopback(&cfg)
	cfg.DataDir, cfg.NodeID = "", ""
	ctx := context.Background()
	st, err := server.OpenStore(ctx, cfg)
	must(t, err)
	g := newGatedStore(st)
	srv, err := server.NewWithStore(ctx, cfg, g)
	if err != nil {
		t.Fatalf("server.NewWithStore (second node): %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start (second node): %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(g.open) // runs first: nothing stays held at the end
	return srv, g
}

// twoNodes starts node A (the ECR's) with a fake clock and node B (the
// terminal's) behind a gate, on one fresh PostgreSQL schema.
func twoNodes(t *testing.T) (a *sandbox, b *server.Server, gate *gatedStore, advanceBy func(time.Duration)) {
	u := freshPostgres(t)
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is not set; set it to a postgres:// URL to run the cluster tests")
	}
	clk, clock := newClock()
	a = owedEnv(t, func(c *server.Config) { c.DatabaseURL = u }, func(c *server.Config) {
		clock(c)
		c.AckTimeout, c.TransactionDeadline = 5*time.Second, time.Second
		c.ClusterHeartbeat, c.ClusterDead, c.ClusterRescan = 200*time.Millisecond, 2*time.Second, 500*time.Millisecond
	})
	b, gate = startGatedNode(t, a.env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(a.logs.String())
		}
	})
	return a, b, gate, func(d time.Duration) { advance(t, clk, d) }
}

// wantCancelFirst reads d's messages until a purchase other than ref
// arrives and fails unless the owed cancel of ref came before it (the
// terminal still runs ref and would decline the new one
// TERMINAL_IS_BUSY); after names the moment in the failure. The terminal
// then acknowledges the new purchase, whose request must answer 201 on
// done: the test ends after it, so that no request outlives the server.
func wantCancelFirst(t *testing.T, d *rawDevice, ref string, done <-chan reply, after string) {
	t.Helper()
	first := ""
	for {
		env := d.next()
		switch {
		case env.Type == protocol.TypeCancel && env.Ref == ref && first == "":
			first = "cancel " + env.Ref
		case env.Type == protocol.TypePurchase && env.Ref != ref:
			if first == "" {
				first = "purchase " + env.Ref
			}
			if first != "cancel "+ref {
				t.Errorf("first message after %s = %s; want the owed cancel of %s", after, first, ref)
			}
			d.send(protocol.TypeAck, "", env.ID, env.Ref, nil)
			(<-done).tx(t, 201)
			return
		}
	}
}

// sendWhen makes the ECR's request send from a goroutine once ready holds,
// again while send says its reply does not count (false), until the test
// ends; the reply that counts comes on the channel returned.
func sendWhen(t *testing.T, ready func() bool, send func() (reply, bool)) <-chan reply {
	done := make(chan reply, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		testwait.Until(testwait.Timeout, func() bool {
			if closed(stop) {
				return true
			}
			if !ready() {
				return false
			}
			r, ok := send()
			if ok {
				done <- r
			}
			return ok
		})
	}()
	return done
}

// TestCommandAfterCancelOfAnotherNode: node A ends a purchase its terminal
// (on node B) never acknowledged (WP25) and owes the cancel, which B is to
// send when A's wake-up reaches it; the ECR's next purchase lands on B
// before that wake-up ran. B sends the owed cancel before the new command.
func TestCommandAfterCancelOfAnotherNode(t *testing.T) {
	viaB, term, d, first := cancelHeldOnAnotherNode(t, "RAW-ORDER-1")
	// The ECR's next purchase, through B.
	done := make(chan reply, 1)
	go func() { done <- viaB.purchase(t, term, 6000) }()
	wantCancelFirst(t, d, first.Ref, done, "the WP25")
}

// cancelHeldOnAnotherNode: node A ends WP25 a purchase its terminal serial
// (on node B) never acknowledged, and B's wake-ups are held, so the cancel
// A owes reaches B only after. It returns the ECR's sandbox through B, the
// terminal ID, the device and the purchase it got.
func cancelHeldOnAnotherNode(t *testing.T, serial string) (viaB *sandbox, term string, d *rawDevice, first protocol.Envelope) {
	a, b, gate, advanceBy := twoNodes(t)
	term, secret := a.provision(t, serial)
	d = dialDevice(t, b.URL("terminal"), serial, secret)
	done := make(chan reply, 1)
	go func() { done <- a.purchase(t, term, 5000) }()
	first = d.expect(protocol.TypePurchase) // through B, woken by A
	// The terminal starts it; its ack is lost with a node. B's wake-ups
	// are held from now on: the cancel A owes reaches B only after.
	gate.holdWake.Store(true)
	advanceBy(5 * time.Second) // A's ack time-out
	(<-done).problem(t, 504, "WP25")
	e := *a.env
	e.online = b.URL("online")
	return &sandbox{env: &e}, term, d, first
}

// TestCloseAfterCancelOfAnotherNode: a close goes like a command. Node A
// ends a purchase its terminal (on node B) never acknowledged (WP25) and
// owes the cancel, which B is to send when A's wake-up reaches it; the
// ECR's close lands on B before that wake-up ran. B sends the owed cancel
// before the close: a terminal still running the purchase ends it first,
// so that it is in the batch the close asks for, not the next one
// (found by the simulation's soak as a MISSING_ON_TERMINAL difference).
func TestCloseAfterCancelOfAnotherNode(t *testing.T) {
	viaB, term, d, first := cancelHeldOnAnotherNode(t, "RAW-ORDER-3")
	done := make(chan reply, 1)
	go func() { done <- viaB.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, nil) }()
	cancelled := false
	for {
		env := d.next()
		if env.Type == protocol.TypeCancel && env.Ref == first.Ref {
			cancelled = true
		}
		if env.Type != protocol.TypeClose {
			continue
		}
		if !cancelled {
			t.Errorf("the close %s came before the owed cancel of %s", env.Ref, first.Ref)
		}
		// The terminal dropped the purchase it never acknowledged: an
		// empty batch, which the service's side matches.
		d.send(protocol.TypeBatch, "", "", env.Ref, protocol.Batch{Number: 1, Transactions: []protocol.BatchTransaction{}})
		if got := batchOf(t, <-done, 201); got.BatchID != env.Ref || got.State != instore.BatchClosed || !got.Matched {
			t.Errorf("close = %+v, want %s CLOSED and matched", got, env.Ref)
		}
		return
	}
}

// TestReconnectCancelBeforeCommandOfAnotherNode: a terminal reconnects to
// node B owing the cancel of a purchase that ended while it was away
// (WP36); node A takes the ECR's next purchase as soon as B holds the
// session, before B's hello sent what is owed, and wakes B for it. The
// wake-up sends the owed cancel first, then the command.
func TestReconnectCancelBeforeCommandOfAnotherNode(t *testing.T) {
	a, b, gate, advanceBy := twoNodes(t)
	const serial = "RAW-ORDER-2"
	term, secret := a.provision(t, serial)
	d := dialDevice(t, b.URL("terminal"), serial, secret)

	cmd := a.ackedPurchase(t, d, term, 5000)
	d.conn.Close()
	testwait.For(t, "the device is offline on both nodes", func() bool {
		return !b.Gateway.Online(serial) && !a.srv.Service.Gateway.Online(serial)
	})
	advanceBy(time.Second) // the deadline: WP36, a cancel owed
	a.wantEndedAtDeadline(t, cmd.Ref)

	// B's hello reads what is owed only once a second read (the wake-up
	// for the new purchase) has begun.
	gate.holdOwed.Store(true)
	done := sendWhen(t, func() bool { return b.Gateway.Online(serial) }, func() (reply, bool) {
		r := a.purchase(t, term, 6000)
		var p problem
		json.Unmarshal(r.body, &p)
		return r, r.resp.StatusCode != 409 || p.ErrorCode != "WP23" // WP23: A does not see B's session yet
	})
	d2 := dialDevice(t, b.URL("terminal"), serial, secret)
	wantCancelFirst(t, d2, cmd.Ref, done, "the reconnect")
}

// failingOwed fails OpenEffects while fail is set.
type failingOwed struct {
	instore.Store
	fail atomic.Bool
}

func (f *failingOwed) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	if f.fail.Load() {
		return nil, errors.New("the store is down")
	}
	return f.Store.OpenEffects(ctx, serial)
}

// TestCommandNotSentWhenOwedUnknown: when what a terminal is owed cannot
// be read, a new command is not sent (it might overtake an owed cancel):
// the purchase ends WP23 and the terminal gets only its cancel.
func TestCommandNotSentWhenOwedUnknown(t *testing.T) {
	var fo *failingOwed
	s := &sandbox{env: startWrapped(t, func(c *server.Config) { c.RateLimit = 0 }, func(st instore.Store) instore.Store {
		fo = &failingOwed{Store: st}
		return fo
	})}
	const serial = "RAW-OWED-ERR"
	term, d := s.rawTerminal(t, serial)
	d.owedNothing() // its hello's reads are done
	fo.fail.Store(true)
	p := s.purchase(t, term, 5000).problem(t, 409, "WP23")
	fo.fail.Store(false)
	if env := d.next(); env.Type != protocol.TypeCancel || env.Ref != p.OnlineAPIRefID {
		t.Fatalf("the terminal got %s of %s; want no command, only the cancel of %s", env.Type, env.Ref, p.OnlineAPIRefID)
	}
}

// slowOwed delays the read of what a device is owed, as a loaded store
// would, to widen the window between a terminal's hello and its owed
// messages.
type slowOwed struct {
	instore.Store
	slow atomic.Bool
}

func (s *slowOwed) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	if s.slow.Load() {
		time.Sleep(300 * time.Millisecond) // the slow store the test simulates, not a wait for the service
	}
	return s.Store.OpenEffects(ctx, serial)
}

// TestOwedCancelBeforeNewCommand: a terminal reconnecting with a
// transaction the server ended gets the owed cancel before any new
// command: until the hello's work is done the device counts as offline.
func TestOwedCancelBeforeNewCommand(t *testing.T) {
	var w *slowOwed
	ck, clock := newClock()
	e := startWrapped(t, func(c *server.Config) {
		clock(c)
		c.AckTimeout, c.TransactionDeadline, c.RateLimit = 5*time.Second, time.Second, 0
	}, func(st instore.Store) instore.Store { w = &slowOwed{Store: st}; return w })
	s := &sandbox{env: e}
	term, d := s.rawTerminal(t, "RAW-ORD")
	cmd := s.ackedPurchase(t, d, term, 5000)
	d.conn.Close()
	s.waitOffline(t, "RAW-ORD")
	advance(t, ck, time.Second) // the deadline
	s.wantEndedAtDeadline(t, cmd.Ref)
	w.slow.Store(true)
	// The ECR sends a purchase as soon as the terminal is ready for one.
	done := sendWhen(t, func() bool { return s.srv.Gateway.Ready("RAW-ORD") }, func() (reply, bool) {
		return s.purchase(t, term, 6000), true
	})
	d2 := s.redial(t, d)
	wantCancelFirst(t, d2, cmd.Ref, done, "the reconnect")
}

// TestFailedReversalLeavesAWayOut: a reversal that ended without paying
// back does not block the purchase for good. One the terminal reported
// TECHNICAL_ERROR for after the deadline (the report is kept) lets a
// refund through; one it never acknowledged (its outcome unknown: no
// refund yet) can be followed by a new reversal.
func TestFailedReversalLeavesAWayOut(t *testing.T) {
	for _, mode := range []string{"deadline, reported TECHNICAL_ERROR", "never acknowledged"} {
		t.Run(mode, func(t *testing.T) {
			ck, clock := newClock()
			s := rawEnv(t, clock)
			serialA, serialB := "REV-A", "REV-B"
			termA, secretA := s.provision(t, serialA)
			termB, secretB := s.provision(t, serialB)
			d := dialDevice(t, s.srv.URL("terminal"), serialA, secretA)
			db := dialDevice(t, s.srv.URL("terminal"), serialB, secretB)
			cmd := s.ackedPurchase(t, d, termA, 5000)
			d.result(cmd.Ref, 0, protocol.TypeConfirm)

			done := make(chan reply, 1)
			go func() {
				done <- s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": cmd.Ref}, nil)
			}()
			rev := d.expect(protocol.TypeReversal)
			refund := map[string]any{"terminalId": termB, "amount": 5000, "currency": "SEK", "originalOnlineAPIRefId": cmd.Ref}
			if mode == "never acknowledged" {
				advance(t, ck, time.Second) // the ack time-out
				(<-done).problem(t, 504, "WP25")
				d.confirm(d.expect(protocol.TypeCancel)) // ACK_TIMEOUT: dropped, nothing reported
				// The outcome is unknown to the service: no refund...
				s.post(t, "/in-store/api/v1/refund", refund, nil).problem(t, 409, "conflict")
				// ...but a new reversal, which settles it.
				go func() {
					done <- s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": cmd.Ref}, nil)
				}()
				rev2 := d.expect(protocol.TypeReversal)
				d.send(protocol.TypeAck, "", rev2.ID, rev2.Ref, nil)
				(<-done).tx(t, 201)
				d.result(rev2.Ref, 0, protocol.TypeConfirm)
				testwait.For(t, "the purchase REVERSED", func() bool {
					return s.transaction(t, cmd.Ref).StatusID == instore.StatusReversed
				})
				return
			}
			d.send(protocol.TypeAck, "", rev.ID, rev.Ref, nil)
			(<-done).tx(t, 201)
			advance(t, ck, time.Second)              // the deadline
			d.confirm(d.expect(protocol.TypeCancel)) // DEADLINE
			d.result(rev.Ref, instore.StatusTechnicalError, protocol.TypeConfirm)
			got := s.transaction(t, rev.Ref)
			if got.StatusID != instore.StatusTechnicalError || got.ErrorCode != instore.WP36 || got.Result == nil {
				t.Errorf("reversal after its TECHNICAL_ERROR report = status %d, error %v, result %v; want TECHNICAL_ERROR, WP36 kept, the report kept", got.StatusID, got.ErrorCode, got.Result != nil)
			}
			go func() { done <- s.post(t, "/in-store/api/v1/refund", refund, nil) }()
			rf := db.expect(protocol.TypeRefund)
			db.send(protocol.TypeAck, "", rf.ID, rf.Ref, nil)
			(<-done).tx(t, 201)
		})
	}
}

// wantEndedAtDeadline fails t unless the transaction ref reads
// TECHNICAL_ERROR (what the deadline leaves when the terminal is away).
func (s *sandbox) wantEndedAtDeadline(t *testing.T, ref string) {
	t.Helper()
	if got := s.transaction(t, ref); got.StatusID != instore.StatusTechnicalError {
		t.Fatalf("after the deadline: status %d, want TECHNICAL_ERROR", got.StatusID)
	}
}

// closed reports, without waiting, whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

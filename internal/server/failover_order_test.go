package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

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
	a, b, gate, advanceBy := twoNodes(t)
	const serial = "RAW-ORDER-1"
	term, secret := a.provision(t, serial)
	d := dialDevice(t, b.URL("terminal"), serial, secret)

	done := make(chan reply, 1)
	go func() { done <- a.purchase(t, term, 5000) }()
	first := d.expect(protocol.TypePurchase) // through B, woken by A
	// The terminal starts it; its ack is lost with a node. B's wake-ups
	// are held from now on: the cancel A owes reaches B only after.
	gate.holdWake.Store(true)
	advanceBy(5 * time.Second) // A's ack time-out
	(<-done).problem(t, 504, "WP25")

	// The ECR's next purchase, through B.
	viaB := *a.env
	viaB.online = b.URL("online")
	go func() { done <- (&sandbox{env: &viaB}).purchase(t, term, 6000) }()
	wantCancelFirst(t, d, first.Ref, done, "the WP25")
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

package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

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
			d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: 0})
			d.expect(protocol.TypeConfirm)

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
				d.send(protocol.TypeResult, "", "", rev2.Ref, protocol.Result{StatusID: 0})
				d.expect(protocol.TypeConfirm)
				testwait.For(t, "the purchase REVERSED", func() bool {
					return s.transaction(t, cmd.Ref).StatusID == instore.StatusReversed
				})
				return
			}
			d.send(protocol.TypeAck, "", rev.ID, rev.Ref, nil)
			(<-done).tx(t, 201)
			advance(t, ck, time.Second)              // the deadline
			d.confirm(d.expect(protocol.TypeCancel)) // DEADLINE
			d.send(protocol.TypeResult, "", "", rev.Ref, protocol.Result{StatusID: instore.StatusTechnicalError})
			d.expect(protocol.TypeConfirm)
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

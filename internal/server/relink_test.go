package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
)

// relinkOnCreate links the terminal ID terminalID to the device serial
// just before the next creation reaches the store (once armed), as a link
// racing the request commits between the service's read of the terminal
// and the creation.
type relinkOnCreate struct {
	instore.Store
	t                  *testing.T
	terminalID, serial string
	armed              atomic.Bool
}

func (r *relinkOnCreate) arm(terminalID, serial string) {
	r.terminalID, r.serial = terminalID, serial
	r.armed.Store(true)
}

func (r *relinkOnCreate) relink(ctx context.Context) {
	if r.armed.CompareAndSwap(true, false) {
		if _, _, err := r.Store.LinkTerminal(ctx, r.terminalID, r.serial, time.Now()); err != nil {
			r.t.Errorf("the racing link: %v", err)
		}
	}
}

func (r *relinkOnCreate) CreateTransaction(ctx context.Context, ch *instore.Change) error {
	r.relink(ctx)
	return r.Store.CreateTransaction(ctx, ch)
}

func (r *relinkOnCreate) CreateOnOriginal(ctx context.Context, ch *instore.Change) error {
	r.relink(ctx)
	return r.Store.CreateOnOriginal(ctx, ch)
}

// TestLinkRacingACreation: a link of the terminal ID to another device
// that commits between the service's read of the terminal and the
// creation of its transaction (found by the black-box review on
// PostgreSQL) does not send the command to the device the ID was linked
// to before. A purchase runs again on the ID's new link: its command goes
// to the new device, which approves it. A capture of a pre-auth the old
// device holds is refused as one made after the link is (409 conflict,
// instore.CheckHeldByDevice), and nothing is created. Both backends.
func TestLinkRacingACreation(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		r := &relinkOnCreate{t: t}
		s := &sandbox{env: startWrapped(t, func(c *server.Config) {
			store(c)
			c.RateLimit = 0
		}, func(st instore.Store) instore.Store { r.Store = st; return r })}
		a, old := s.rawTerminal(t, "RAW-RACE-OLD")
		_, repl := s.rawTerminal(t, "RAW-RACE-NEW")
		pre := s.rawPreAuth(t, old, a, 10000)

		r.arm(a, "RAW-RACE-NEW")
		cmd, done := s.startPurchase(t, repl, a, 2500)
		repl.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
		if got := (<-done).tx(t, 201); got.OnlineAPIRefID != cmd.Ref {
			t.Fatalf("the purchase answered %s; its command on the new device was %s", got.OnlineAPIRefID, cmd.Ref)
		}
		repl.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved})
		if got := s.final(t, cmd.Ref); got.StatusID != instore.StatusApproved {
			t.Fatalf("the purchase on the new device ended %d, want APPROVED", got.StatusID)
		}

		// a back on the old device, then moved again while a capture runs.
		_, _, err := s.srv.Store.LinkTerminal(context.Background(), a, "RAW-RACE-OLD", time.Now())
		must(t, err)
		before := s.listTotal(t)
		r.arm(a, "RAW-RACE-NEW")
		s.preAuthOp(t, "capture", pre.Ref, map[string]any{"amount": 10000}).problem(t, 409, "conflict")
		if after := s.listTotal(t); after != before {
			t.Errorf("the refused capture created %d transactions", after-before)
		}
		if got := s.authorization(t, pre.Ref); got.State != instore.AuthOpen {
			t.Errorf("the pre-auth after the refused capture: %+v, want OPEN", got)
		}
	})
}

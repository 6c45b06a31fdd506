package simulation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// Day closes (docs/terminal-protocol.md section 14). Each terminal keeps
// its open batch: every transaction it ended since its last close, with
// its reference, type, final status, amount (a sale's tip on top),
// currency and offline flag; a sale it reversed is marked REVERSED there.
// It answers a close with that batch and its number, starts the next one
// numbered one more, and keeps the answer until the service confirms it:
// resent after every hello, sometimes sent twice, and answered again to a
// close it answered already. Now and then (per seed) a terminal adds to
// its open batch a sale the service never saw (the sandbox's batch-extra),
// so that some closes show a MISSING_IN_SERVICE difference on purpose.
// ECRs close their terminal now and then, sometimes racing the close with
// a purchase on the same terminal, or with a second close.

// closes is the world's part of the closes: its own randomness (so that a
// seed's other choices stay as they were), and what the terminals answered.
type closes struct {
	rng    *rand.Rand
	every  time.Duration // how often an ECR closes its terminal, about
	pExtra float64       // how often a terminal adds a sale the service never saw, per close
	pSlow  float64       // how often a terminal answers a close past the time-out
	// answers: what each terminal answered, by serial and batch number;
	// extras: the references the terminals made up.
	answers map[string]map[int64]*batchAnswer
	extras  map[string]bool
	// reversedAfter: sales whose reversal reached their terminal after
	// it had answered the close of their batch.
	reversedAfter map[string]bool
	msgs          int
	// seen: what the checks saw of each close (close_check.go).
	seen map[string]*closeSeen
}

// batchAnswer is a terminal's answer to a close, kept until confirmed.
type batchAnswer struct {
	id, batchID string
	number      int64
	items       []instore.BatchItem
}

func (a *batchAnswer) msg() msg {
	return msg{kind: mBatch, id: a.id, ref: a.batchID, batch: a}
}

// batchBook is a terminal's open batch and its answers not confirmed yet.
type batchBook struct {
	number      int64 // the open batch's number
	items       []instore.BatchItem
	answered    map[string]*batchAnswer // by batchId
	unconfirmed []*batchAnswer
	extras      int
}

func newCloses(seed uint64) *closes {
	r := rand.New(rand.NewChaCha8(seedBytes(seed, "close")))
	c := &closes{rng: r, answers: map[string]map[int64]*batchAnswer{}, extras: map[string]bool{}, reversedAfter: map[string]bool{}, seen: map[string]*closeSeen{}}
	c.every = time.Duration(8+r.IntN(22)) * time.Second
	c.pExtra = []float64{0, 0.1, 0.3}[r.IntN(3)]
	c.pSlow = 0.05 + 0.15*r.Float64()
	return c
}

func (c *closes) String() string {
	return fmt.Sprintf("closes every %v extra %.2f slow %.2f", c.every, c.pExtra, c.pSlow)
}

// record adds t, just ended with its status, to the open batch: its
// amount as the card saw it; an approved reversal takes its sale's amount
// and marks the sale REVERSED.
func (d *device) record(t *dtx) {
	b := &d.book
	it := instore.BatchItem{Ref: t.ref, Type: t.kind, StatusID: t.status, Amount: t.amount, Currency: "EUR", Offline: t.offline}
	if t.kind == instore.TypePurchase || t.kind == instore.TypePreAuth {
		it.Amount += t.tipped
	}
	if t.kind == instore.TypeReversal && t.status == instore.StatusApproved {
		if o := b.find(t.original); o != nil {
			it.Amount = o.Amount
		}
		d.reversedInBatch(t.original)
	}
	if i := slices.IndexFunc(b.items, func(x instore.BatchItem) bool { return x.Ref == t.ref }); i >= 0 {
		b.items[i] = it
		return
	}
	b.items = append(b.items, it)
}

// reversedInBatch marks ref REVERSED in the open batch (the service's
// reversal, or the ECR's): a sale of an earlier batch stays as it was
// answered.
func (d *device) reversedInBatch(ref string) {
	if o := d.book.find(ref); o != nil && o.StatusID == instore.StatusApproved {
		o.StatusID = instore.StatusReversed
	} else if o == nil && d.w.ledger.auths[ref] > 0 {
		d.w.closes.reversedAfter[ref] = true
	}
}

func (b *batchBook) find(ref string) *instore.BatchItem {
	if i := slices.IndexFunc(b.items, func(x instore.BatchItem) bool { return x.Ref == ref }); i >= 0 {
		return &b.items[i]
	}
	return nil
}

// close answers the close batchID: with the open batch, which then starts
// anew, or with the same answer again for a close answered already. It
// answers after a while; now and then past the service's time-out.
func (d *device) close(batchID string) {
	w, c := d.w, d.w.closes
	took := time.Duration(c.rng.IntN(3000)) * time.Millisecond
	if !w.faults.calmed && c.rng.Float64() < c.pSlow {
		took = ackTimeout + time.Duration(c.rng.IntN(10000))*time.Millisecond
	}
	b := &d.book
	a := b.answered[batchID]
	if a == nil && d.cur != nil {
		// The service sends a close only to a terminal it counts idle,
		// after the cancels it owes it (internal/service/close.go).
		w.fail("a terminal is never sent a command while it runs one the service ended", "%s runs %s, sent the close %s", d.serial, d.cur.ref, batchID)
	}
	if a == nil {
		// Closed at once: what it ends from now on goes into the next
		// batch; the answer may take a while to go out.
		if b.number == 0 {
			b.number = 1
		}
		c.msgs++
		a = &batchAnswer{id: fmt.Sprintf("bmsg_%d", c.msgs), batchID: batchID, number: b.number, items: slices.Clone(b.items)}
		if a.items == nil {
			a.items = []instore.BatchItem{}
		}
		b.answered[batchID] = a
		if c.answers[d.serial] == nil {
			c.answers[d.serial] = map[int64]*batchAnswer{}
		}
		c.answers[d.serial][a.number] = a
		w.note("batch %s answers %s: number %d, %d transactions", d.serial, batchID, a.number, len(a.items))
		b.number++
		b.items = nil
	}
	w.sched.after(took, "batch "+d.serial, func() {
		if !slices.Contains(b.unconfirmed, a) {
			b.unconfirmed = append(b.unconfirmed, a)
		}
		d.send(a.msg())
		if !w.faults.calmed && c.rng.IntN(8) == 0 {
			d.send(a.msg()) // sent again before its confirm came
		}
	})
}

// batchConfirmed forgets the answer id the service confirmed.
func (d *device) batchConfirmed(id string) {
	d.book.unconfirmed = slices.DeleteFunc(d.book.unconfirmed, func(a *batchAnswer) bool { return a.id == id })
}

// addExtra adds to the open batch an approved sale the service never saw.
func (d *device) addExtra() {
	c := d.w.closes
	d.book.extras++
	ref := fmt.Sprintf("%s-X%d", d.serial, d.book.extras)
	c.extras[ref] = true
	d.book.items = append(d.book.items, instore.BatchItem{Ref: ref, Type: instore.TypePurchase, StatusID: instore.StatusApproved,
		Amount: int64(100 + c.rng.IntN(5000)), Currency: "EUR"})
	d.w.note("batch %s adds %s, a sale the service never saw", d.serial, ref)
}

// batch hands a terminal's batch to the service, confirmed once stored; one
// not stored closes the session (as the gateway does), and the terminal
// resends it after its next hello.
func (s *session) batch(m msg) bool {
	a := m.batch
	err := s.node.svc.TerminalBatch(context.Background(), s.dev.serial,
		instore.BatchReport{MessageID: a.id, BatchID: a.batchID, Number: a.number, Items: slices.Clone(a.items)})
	switch {
	case err == nil && s.open && s.node.up:
		s.toDevice(msg{kind: mResultConfirmed, id: a.id})
	case err != nil && s.node.up:
		s.cut()
		return false
	}
	return true
}

func (g gateway) SendClose(_ context.Context, serial, batchID string) error {
	return g.send(serial, msg{kind: mClose, id: batchID, ref: batchID})
}

// closeLoop is an ECR's closes: now and then it closes its terminal,
// sometimes with a purchase or a second close at the same moment; before
// a close its terminal may add a sale the service never saw.
func (e *ecr) closeLoop() {
	w, c := e.w, e.w.closes
	if w.quiet {
		return
	}
	defer w.sched.after(c.every/2+time.Duration(c.rng.Int64N(int64(c.every))), "close "+e.name, e.closeLoop)
	if d := w.linkedTo(e.terminalID); c.rng.Float64() < c.pExtra && d != nil {
		d.addExtra() // the device its terminal ID is linked to now (relink.go)
	}
	e.closeTerminal()
	switch c.rng.IntN(6) {
	case 0:
		w.note("race %s: a purchase beside the close", e.name)
		e.purchase()
	case 1:
		w.note("race %s: two closes", e.name)
		e.closeTerminal()
	}
}

// closeTerminal asks the service to close e's terminal. The ECR does not
// wait: the service answers WP25 while the close runs; what it became is
// the store's (the checks read it there).
func (e *ecr) closeTerminal() {
	e.call(&request{name: "close", method: http.MethodPost, path: "/terminal/" + e.terminalID + "/close"})
}

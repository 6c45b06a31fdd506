package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// ledger is the money as the card network saw it: what terminals
// authorised, refunded and reversed. It is the truth the service's
// records are checked against.
type ledger struct {
	w        *world
	auths    map[string]int    // purchase ref → approvals on terminals
	amount   map[string]int64  // purchase ref → the amount authorised
	cashback map[string]int64  // purchase ref → the cash handed out with it
	byKey    map[string]string // the ECR's Idempotency-Key (its ecrReference) → the purchase charged
	refunded map[string]int64  // purchase ref → refunded on terminals
	refunds  map[string]bool   // refund refs carried out (and not reversed)
	refundOf map[string]refund
	reversed map[string]bool // purchase refs reversed
	// Pre-auths (preauth_check.go): the refs among auths that are
	// PRE_AUTHs, and the INCREMENTs, CAPTUREs and VOIDs carried out on
	// them, by ref and by pre-auth.
	preauths map[string]bool
	ops      map[string]*cardOp
	holdOps  map[string][]*cardOp
	// offline: the purchases approved offline, by ref, and their
	// forwarding on the card network (offline_check.go).
	offline map[string]instore.ForwardingState
	// by: the device that authorised each purchase and pre-auth
	// (relink_check.go).
	by map[string]string
}

func (l *ledger) authorize(serial, ref, key string, amount, cashback int64) {
	if key != "" {
		if other := l.byKey[key]; other != "" {
			l.w.fail("one authorisation per purchase", "key %s charged twice: %s and %s", key, other, ref)
		}
		l.byKey[key] = ref
	}
	l.auths[ref]++
	l.amount[ref], l.cashback[ref], l.by[ref] = amount, cashback, serial
	l.w.note("ledger %s authorised %s %d", serial, ref, amount)
	if l.auths[ref] > 1 {
		l.w.fail("one authorisation per purchase", "%s authorised %d times", ref, l.auths[ref])
	}
}

func (l *ledger) refund(serial, orig, ref string, amount int64) {
	l.w.note("ledger %s refunded %s on %s %d", serial, ref, orig, amount)
	if l.refunds[ref] {
		l.w.fail("one refund per refund", "%s carried out twice", ref)
	}
	l.refunds[ref] = true
	l.refundOf[ref] = refund{orig, amount}
	l.refunded[orig] += amount
	l.money(orig)
}

type refund struct {
	orig   string
	amount int64
}

// reverse reverses ref on the card network; a second reversal of one
// authorisation is refused by the network and moves nothing.
func (l *ledger) reverse(serial, ref, why string) {
	if op := l.ops[ref]; op != nil {
		l.reverseOp(serial, op, why)
		return
	}
	if r, ok := l.refundOf[ref]; ok {
		// A refund the service had ended before the terminal approved
		// it: the reversal takes the money back.
		l.w.note("ledger %s reversed refund %s (%s)", serial, ref, why)
		delete(l.refundOf, ref)
		l.refunds[ref] = false
		l.refunded[r.orig] -= r.amount
		return
	}
	if l.auths[ref] == 0 || l.reversed[ref] {
		return
	}
	l.w.note("ledger %s reversed %s (%s)", serial, ref, why)
	l.reversed[ref] = true
	l.money(ref)
}

// money: what is paid back on a sale never exceeds it.
func (l *ledger) money(ref string) {
	if l.preauths[ref] {
		l.holdMoney(ref)
		return
	}
	back := l.refunded[ref]
	if l.reversed[ref] {
		back += l.amount[ref]
	}
	if l.auths[ref] == 0 && back > 0 || back > l.amount[ref] {
		l.w.fail("money back never exceeds a sale", "%s: %d paid back on a sale of %d", ref, back, l.amount[ref])
	}
	if refunded := l.refunded[ref]; refunded > l.amount[ref]-l.cashback[ref] {
		l.w.fail("money back never exceeds a sale", "%s: %d refunded to the card on a sale of %d with %d cashback", ref, refunded, l.amount[ref], l.cashback[ref])
	}
}

// check runs the invariants that hold after every step, against the
// store as it is now (read directly, outside any node).
func (w *world) check() {
	if w.writes == w.checkedWrites && !w.sched.now.After(w.nextDue) {
		return // nothing was written, and no deadline passed since the last check
	}
	w.nextDue = epoch.Add(1000 * time.Hour)
	w.checkedWrites = w.writes
	ctx := context.Background()
	ts, err := w.db.ListTransactions(ctx, instore.TransactionFilter{MerchantID: w.merchantID, Limit: 100000,
		From: epoch.Add(-time.Hour), To: epoch.Add(24 * time.Hour)})
	if err != nil {
		w.fail("store readable", "%v", err)
		return
	}
	byKey := map[string]string{}
	paid := map[string]int64{}
	byRef := map[string]*instore.Transaction{}
	for _, t := range ts {
		byRef[t.ID] = t
		if v := w.versions[t.ID]; t.Version < v {
			w.fail("versions only grow", "%s went from version %d to %d", t.ID, v, t.Version)
		}
		w.versions[t.ID] = t.Version
		if k := t.ECRReference; k != "" {
			if other := byKey[k]; other != "" {
				w.fail("one transaction per Idempotency-Key", "key %s has %s and %s", k, other, t.ID)
			}
			byKey[k] = t.ID
		}
		if t.StatusID == instore.StatusPending {
			due := w.finalBy(t)
			if due.Before(w.nextDue) {
				w.nextDue = due
			}
			if w.sched.now.After(due) {
				w.fail("every PENDING transaction final by its deadline plus grace", "%s still PENDING %v after %v", t.ID, w.sched.now.Sub(due), due)
			}
		}
		if t.Unconfirmed() && t.ConfirmDeadline.Add(w.tolerance(t)).Before(w.nextDue) {
			w.nextDue = t.ConfirmDeadline.Add(w.tolerance(t))
		}
		if t.Unconfirmed() && w.sched.now.After(t.ConfirmDeadline.Add(w.tolerance(t))) {
			w.fail("a sale confirmed or auto-reversed", "%s still awaits its confirmation %v after its window", t.ID, w.sched.now.Sub(*t.ConfirmDeadline))
		}
		if t.Type == instore.TypeRefund && t.StatusID == instore.StatusApproved {
			paid[t.OriginalID] += t.Amount
		}
	}
	for _, t := range ts {
		if t.Type != instore.TypePurchase {
			continue
		}
		back := paid[t.ID]
		if paid[t.ID] > t.TotalAmount()-t.CashbackAmount {
			w.fail("money back never exceeds a sale", "the store refunds %d on %s of %d with %d cashback", paid[t.ID], t.ID, t.TotalAmount(), t.CashbackAmount)
		}
		if t.StatusID == instore.StatusReversed {
			back += t.TotalAmount()
		}
		if back > t.TotalAmount() {
			w.fail("money back never exceeds a sale", "the store pays back %d on %s of %d", back, t.ID, t.TotalAmount())
		}
	}
	w.lastTxs = byRef
	w.checkSameDevice(ts, byRef)
	w.checkPreAuths(ts)
	w.checkForwarding(ts, byRef)
	w.checkCloses(ts)
	if len(ts) == 0 && len(w.keyRef) > 0 {
		w.fail("the checks see the store", "the ECRs were answered about %d transactions, the listing shows none", len(w.keyRef))
	}
}

// finalBy is when a PENDING transaction must be final: its ack time-out or
// deadline, plus the grace a node's death and restart may take.
func (w *world) finalBy(t *instore.Transaction) time.Time {
	due := t.CreatedAt.Add(ackTimeout)
	if t.Acknowledged() && t.DeadlineAt != nil {
		due = *t.DeadlineAt
	}
	return due.Add(w.tolerance(t))
}

// tolerance is how late a timer of t may end it: at once (its node's
// timer) when no node crashed since t was created, else within the grace
// a restart and a sweep take.
func (w *world) tolerance(t *instore.Transaction) time.Duration {
	if w.lastCrash.Before(t.CreatedAt) {
		return 2 * time.Second
	}
	return grace
}

// settled checks, once the world is quiet (no faults, every node up,
// every device online, every deadline past), that nothing is left
// undone and that the terminals, the service and the events agree.
func (w *world) settled() {
	ctx := context.Background()
	w.writes++
	w.check()
	for _, d := range w.devices {
		if d.cur != nil {
			w.fail("no terminal left busy", "%s still runs %s", d.serial, d.cur.ref)
		}
		for _, r := range d.unconfirmed {
			w.fail("every result the terminal reported is stored", "%s still resends its result of %s", d.serial, r.ref)
		}
		es, err := w.db.OpenEffects(ctx, d.serial)
		if err != nil {
			w.fail("store readable", "%v", err)
		}
		for _, e := range es {
			w.fail("every owed effect carried out or made moot", "%s still owes %s %s of %s", d.serial, e.Kind, e.ID, e.Ref)
		}
	}
	for _, ref := range sortedKeys(w.lastTxs) {
		t := w.lastTxs[ref]
		if t.StatusID == instore.StatusPending {
			w.fail("every PENDING transaction final by its deadline plus grace", "%s PENDING at quiescence", ref)
		}
		w.agree(t)
	}
	w.checkExpired()
	w.settledRelinks(ctx)
	w.settledForwarding()
	w.settledCloses(ctx)
	w.checkEvents(ctx)
	w.checkWebhooks(ctx)
}

// agree compares one transaction with the ledger.
func (w *world) agree(t *instore.Transaction) {
	l := w.ledger
	switch t.Type {
	case instore.TypePurchase, instore.TypePreAuth:
		charged := l.auths[t.ID] > 0 && !l.reversed[t.ID]
		if charged != (t.StatusID == instore.StatusApproved) {
			w.fail("the terminals' and the service's views agree", "%s is %d in the service; charged on the card: %v", t.ID, t.StatusID, charged)
		}
		if charged && l.amount[t.ID] != t.TotalAmount() {
			w.fail("the terminals' and the service's views agree", "%s: the card was charged %d, the service says %d", t.ID, l.amount[t.ID], t.TotalAmount())
		}
		if t.StatusID == instore.StatusReversed && !l.reversed[t.ID] {
			w.fail("the terminals' and the service's views agree", "%s is REVERSED in the service, not on the card", t.ID)
		}
		if t.ConfirmWithin > 0 && t.ConfirmState == instore.ConfirmPending && t.StatusID == instore.StatusApproved {
			w.fail("a sale confirmed or auto-reversed", "%s still awaits its confirmation", t.ID)
		}
		if t.Type == instore.TypePreAuth {
			w.agreeHold(t)
		}
	case instore.TypeIncrement, instore.TypeCapture, instore.TypeVoid:
		// A VOID approved late keeps the status the service gave it and
		// released the hold all the same (lateVoid).
		// So does one approved late on a pre-auth that lapsed meanwhile
		// (voidAfterLapse).
		if op := l.ops[t.ID]; (op != nil && !op.reversed) != (t.StatusID == instore.StatusApproved || w.lateVoid(t)) &&
			!(op != nil && !op.reversed && w.voidAfterLapse(t)) {
			w.fail("the terminals' and the service's views agree", "%s %s is %d in the service; carried out on the card: %v", t.Type, t.ID, t.StatusID, op != nil && !op.reversed)
		}
	case instore.TypeRefund:
		if l.refunds[t.ID] != (t.StatusID == instore.StatusApproved) {
			w.fail("the terminals' and the service's views agree", "refund %s is %d in the service; carried out: %v", t.ID, t.StatusID, l.refunds[t.ID])
		}
	}
}

// merchantEvents numbers the events committed and returns the merchant's
// numbered events, in order; false (a failure noted) if the store could
// not be read.
func (w *world) merchantEvents(ctx context.Context) ([]instore.StoredEvent, bool) {
	if _, err := w.db.SequenceEvents(ctx, 1<<20); err != nil {
		w.fail("store readable", "%v", err)
		return nil, false
	}
	evs, err := w.db.ListEvents(ctx, instore.EventFilter{MerchantID: w.merchantID, Limit: 1 << 20})
	if err != nil {
		w.fail("store readable", "%v", err)
		return nil, false
	}
	return evs, true
}

// checkEvents: every event numbered once, in number order (numbers have
// gaps: a timeline entry integrators are not told of takes one); and
// each transaction's timeline whole (versions 1 to its version, each
// entry starting from the status the one before left), its events
// exactly its entries that tell integrators (service.TransactionEventType),
// each at its entry's version and status, and a sale never both confirmed
// and auto-reversed.
func (w *world) checkEvents(ctx context.Context) {
	evs, ok := w.merchantEvents(ctx)
	if !ok {
		return
	}
	told := map[string][]string{} // ref → "version type status" of its events, in order
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			w.fail("events in number order", "event %d follows %d", e.Seq, evs[i-1].Seq)
		}
		var d struct {
			Ref     string `json:"onlineAPIRefId"`
			Version int64  `json:"version"`
			Status  string `json:"status"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.Ref == "" {
			continue
		}
		told[d.Ref] = append(told[d.Ref], fmt.Sprintf("%d %s %s", d.Version, e.Type, d.Status))
	}
	for _, ref := range sortedKeys(w.lastTxs) {
		w.checkTimeline(ctx, w.lastTxs[ref], told[ref])
	}
}

// checkTimeline checks one transaction's timeline against its state and
// its events.
func (w *world) checkTimeline(ctx context.Context, t *instore.Transaction, told []string) {
	tl, err := w.db.TransactionEvents(ctx, t.ID)
	if err != nil {
		w.fail("store readable", "%v", err)
		return
	}
	var want []string
	kinds := map[instore.TimelineKind]bool{}
	for i, e := range tl {
		kinds[e.Kind] = true
		if i > 0 && (e.Version <= tl[i-1].Version || e.StatusBefore != tl[i-1].StatusAfter) {
			w.fail("the timeline is whole", "%s: entry %d (v%d %s→%s) after v%d %s", t.ID, i, e.Version, e.StatusBefore, e.StatusAfter, tl[i-1].Version, tl[i-1].StatusAfter)
		}
		if typ := service.TransactionEventType(e); typ != "" {
			want = append(want, fmt.Sprintf("%d %s %s", e.Version, typ, e.StatusAfter))
		}
	}
	if n := len(tl); n == 0 || tl[n-1].Version != t.Version {
		w.fail("the timeline is whole", "%s is at version %d, its timeline has %d entries", t.ID, t.Version, n)
	}
	if !slices.Equal(want, told) {
		w.fail("events once each, in commit order, equal to the timeline", "%s: timeline says %q, events %q", t.ID, want, told)
	}
	if kinds[instore.EventConfirmed] && kinds[instore.EventAutoReversed] {
		w.fail("a sale confirmed or auto-reversed, never both", "%s was confirmed and auto-reversed", t.ID)
	}
	if w.confirmed[t.ID] && kinds[instore.EventAutoReversed] {
		w.fail("a sale confirmed or auto-reversed, never both", "%s: the ECR's confirm was answered 2xx, then it was auto-reversed", t.ID)
	}
	if t.Type == instore.TypePreAuth {
		w.checkAuthTimeline(t, tl, told)
	}
	w.checkForwardTimeline(t, tl, told)
}

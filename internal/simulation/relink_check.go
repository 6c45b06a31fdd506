package simulation

import (
	"context"
	"time"

	"github.com/instore-dev/instore"
)

// The invariants of relinks (relink.go): on the devices as commands
// arrive, in the store after every step, and at quiescence.
const (
	invLinkedDevice = "a command goes only to the device its terminal ID is linked to"
	invSameDevice   = "a reversal or pre-auth operation is made on its original's device"
	invLapse        = "a pre-auth whose terminal ID was relinked ends EXPIRED by the lapse, in time"
	invLinks        = "the world's links are the store's"
)

// checkCommand: a command that reaches d is for the terminal ID d was
// linked to when it was sent, and names d as its device; a REVERSAL, or
// an INCREMENT, CAPTURE or VOID of a pre-auth, reaches the device that
// authorised its original on the card (any other holds neither the sale
// nor the authorisation).
func (d *device) checkCommand(tx *instore.Transaction, linked string) {
	w := d.w
	if tx.TerminalID != linked || tx.SerialNumber != d.serial {
		w.fail(invLinkedDevice, "%s got the %s %s of terminal ID %s (sent to %s); it was linked to %q when the command was sent",
			d.serial, tx.Type, tx.ID, tx.TerminalID, tx.SerialNumber, linked)
	}
	if tx.Type != instore.TypeReversal && !isHoldOp(tx.Type) {
		return
	}
	if by := w.ledger.by[tx.OriginalID]; by != "" && by != d.serial {
		w.fail(invSameDevice, "%s got the %s %s of %s, which %s authorised", d.serial, tx.Type, tx.ID, tx.OriginalID, by)
	}
}

// checkSameDevice: in the store, a REVERSAL, INCREMENT, CAPTURE or VOID
// is made on the device that made its original (byRef: every
// transaction), whatever happened to the links since.
func (w *world) checkSameDevice(ts []*instore.Transaction, byRef map[string]*instore.Transaction) {
	for _, t := range ts {
		if t.Type != instore.TypeReversal && !isHoldOp(t.Type) {
			continue
		}
		if o := byRef[t.OriginalID]; o != nil && t.SerialNumber != o.SerialNumber {
			w.fail(invSameDevice, "%s %s (status %d) is made on %q; its original %s on %q", t.Type, t.ID, t.StatusID, t.SerialNumber, o.ID, o.SerialNumber)
		}
	}
}

// sawLapse takes the pre-auth p (with kids, the transactions naming it),
// EXPIRED without a VOID approved: the service's lapse
// (lifecycle.EventAuthLapsed). Seen first at the step that wrote it (one
// write a step), it must have been decided while its terminal ID is
// linked to another device than the one that authorised it, or to none
// (mid-swap: the device is reached through its terminal ID only), at or after
// its expiry, with nothing of it in flight, and no later than a sweep
// after it was due (lapseDue). It reports whether p is a lapse (a failure
// noted otherwise).
func (w *world) sawLapse(p *instore.Transaction, kids []*instore.Transaction) bool {
	r := w.relinks
	if r.lapsed[p.ID] {
		return true
	}
	r.lapsed[p.ID] = true
	now, linked := w.sched.now, r.links[p.TerminalID]
	w.note("lapsed %s of %s on %s: its terminal ID linked to %q since %v", p.ID, p.TerminalID, p.SerialNumber, linked, r.since[p.TerminalID].Sub(epoch))
	switch due := w.lapseDue(p, kids); {
	case linked == p.SerialNumber:
		w.fail(invLapse, "%s ended EXPIRED without a void while its terminal ID %s is linked to %q, and %s authorised it", p.ID, p.TerminalID, linked, p.SerialNumber)
	case now.Before(p.Authorization.ExpiresAt):
		w.fail(invLapse, "%s lapsed %v before its expiry", p.ID, p.Authorization.ExpiresAt.Sub(now))
	case now.After(due):
		w.fail(invLapse, "%s lapsed %v after it was due at %v", p.ID, now.Sub(due), due.Sub(epoch))
	}
	for _, k := range kids {
		if k.StatusID == instore.StatusPending {
			w.fail(invLapse, "%s lapsed while its %s %s is in flight", p.ID, k.Type, k.ID)
		}
	}
	return true
}

// lapseDue is by when the pre-auth p, its terminal ID linked to another
// device or to none, must have lapsed: a sweep after the latest of its
// expiry, the link (or unlink) of its terminal ID, and the end of what of
// it was in flight; plus the timers' tolerance. A lapse does not wait
// for the retry of an expiry VOID that ended without an approval.
func (w *world) lapseDue(p *instore.Transaction, kids []*instore.Transaction) time.Time {
	at := later(p.Authorization.ExpiresAt, w.relinks.since[p.TerminalID])
	for _, k := range kids {
		if k.CompletedAt != nil {
			at = later(at, *k.CompletedAt)
		}
	}
	return at.Add(sweepEvery + w.tolerance(p))
}

// checkRelinkedOpen: the OPEN pre-auth p (kids: the transactions naming
// it), whose terminal ID is linked now to another device than the one
// that authorised it, or to none, is not past its lapse's due time (lapseDue); the
// checks run again by then even if nothing is written.
func (w *world) checkRelinkedOpen(p *instore.Transaction, kids []*instore.Transaction) {
	r := w.relinks
	if r.links[p.TerminalID] == p.SerialNumber {
		return
	}
	due := w.lapseDue(p, kids)
	if due.Before(w.nextDue) {
		w.nextDue = due
	}
	if w.sched.now.After(due) {
		w.fail(invLapse, "%s is OPEN %v after its expiry, %v after its lapse was due; its terminal ID %s is linked to %s since %v, %s authorised it", p.ID,
			w.sched.now.Sub(p.Authorization.ExpiresAt), w.sched.now.Sub(due), p.TerminalID, r.links[p.TerminalID], r.since[p.TerminalID].Sub(epoch), p.SerialNumber)
	}
}

// settledRelinks checks at quiescence that the world's links are the
// store's (the checks after every step found no pre-auth OPEN past its
// lapse's due time, and checkAuthTimeline finds each lapse's
// AUTHORIZATION entry by the TIMER and its event).
func (w *world) settledRelinks(ctx context.Context) {
	r := w.relinks
	for _, e := range w.ecrs {
		t, err := w.db.Terminal(ctx, e.terminalID)
		if err != nil {
			w.fail("store readable", "%v", err)
			return
		}
		if t.SerialNumber != r.links[e.terminalID] {
			w.fail(invLinks, "%s is linked to %q in the store, to %q in the world", e.terminalID, t.SerialNumber, r.links[e.terminalID])
		}
	}
	if r.every > 0 {
		w.note("relinks: %d done, %d pre-auths lapsed, %d creations refused on a relink", r.done, len(r.lapsed), r.relinked)
	}
}

// voidAfterLapse: k is a VOID the service had ended whose approval came
// after its pre-auth lapsed (LATE_RESULT: nothing left OPEN to move). The
// old device released the hold on the card; the books show the pre-auth
// EXPIRED by its lapse all the same, and nothing captured.
func (w *world) voidAfterLapse(k *instore.Transaction) bool {
	return k.Type == instore.TypeVoid && w.relinks.lapsed[k.OriginalID] && k.ResultMessageID != "" && w.hasEntry(k.ID, instore.EventLateResult)
}

// lapseEntries counts the AUTHORIZATION entries of the timeline tl made
// by the TIMER: a lapse's (an expiry VOID's approval is the terminal's).
func lapseEntries(tl []instore.TransactionEvent) int {
	n := 0
	for _, e := range tl {
		if e.Kind == instore.EventAuthorization && e.Actor == instore.ActorTimer {
			n++
		}
	}
	return n
}

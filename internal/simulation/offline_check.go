package simulation

import (
	"strings"

	"github.com/instore-dev/instore"
)

// The invariants of offline approvals, on the card network (the ledger),
// in the store after every step, and at quiescence.
const (
	invNeverLost   = "every offline approval forwarded or still queued, never lost"
	invForwardOnce = "a forward applied once"
	invNotPaid     = "no money back from a sale not paid"
)

// queued records an offline approval on the card network: charged on the
// card (authorize), its money not settled yet.
func (l *ledger) queued(serial, ref string) {
	l.w.note("ledger %s queued %s offline", serial, ref)
	l.offline[ref] = instore.ForwardQueued
}

// forwarded records the issuer's answer to a forwarded offline approval:
// settled (the merchant is paid), or declined (never settled).
func (l *ledger) forwarded(serial, ref string, declined bool) {
	st := instore.ForwardForwarded
	if declined {
		st = instore.ForwardDeclined
	}
	l.w.note("ledger %s forwarded %s %s", serial, ref, st)
	if l.offline[ref] != instore.ForwardQueued {
		l.w.fail(invForwardOnce, "%s forwarded by the terminal while %q", ref, l.offline[ref])
	}
	l.offline[ref] = st
}

// paidBack: a refund or reversal t carried out on a terminal pays back a
// sale whose money was settled, never one approved offline and not
// forwarded, or declined when it was.
func (l *ledger) paidBack(t *dtx) {
	if st, ok := l.offline[t.original]; ok && st != instore.ForwardForwarded {
		l.w.fail(invNotPaid, "%s %s carried out on %s, forwarding %s on the card network", t.kind, t.ref, t.original, st)
	}
}

// checkForwarding checks, after every step, the offline approvals in the
// store (byRef: every transaction): each is one a terminal made, its
// forwarding as the terminal reported it once it is not QUEUED, and no
// refund or reversal names one that is not FORWARDED (one created while it
// was QUEUED is seen at the step that created it).
func (w *world) checkForwarding(ts []*instore.Transaction, byRef map[string]*instore.Transaction) {
	for _, t := range ts {
		if f := t.Forwarding; f != nil {
			st, ok := w.ledger.offline[t.ID]
			switch {
			case !ok:
				w.fail(invNeverLost, "%s has the forwarding %s; no terminal approved it offline", t.ID, f.State)
			case t.Result == nil || !t.Result.Offline:
				w.fail(invNeverLost, "%s has the forwarding %s without an offline result", t.ID, f.State)
			case f.State != instore.ForwardQueued && f.State != st:
				w.fail(invForwardOnce, "%s is %s in the store, %s on the card network", t.ID, f.State, st)
			}
		}
		if t.Type != instore.TypeRefund && t.Type != instore.TypeReversal {
			continue
		}
		if o := byRef[t.OriginalID]; o != nil && o.Forwarding != nil && o.Forwarding.State != instore.ForwardForwarded {
			w.fail(invNotPaid, "%s %s (status %d) of %s, whose forwarding is %s", t.Type, t.ID, t.StatusID, o.ID, o.Forwarding.State)
		}
	}
}

// settledForwarding checks at quiescence that every offline approval a
// terminal made is stored APPROVED (or REVERSED, agree) with its offline
// result, its forwarding the terminal's: FORWARDED or DECLINED once
// reported, QUEUED only while the terminal still holds it; and that no
// forwarded report is left to resend.
func (w *world) settledForwarding() {
	for _, d := range w.devices {
		for _, r := range d.net.reports {
			w.fail(invNeverLost, "%s still resends its forwarded report of %s", d.serial, r.ref)
		}
	}
	for _, ref := range sortedKeys(w.ledger.offline) {
		st, t := w.ledger.offline[ref], w.lastTxs[ref]
		switch {
		case t == nil:
			w.fail(invNeverLost, "%s approved offline, not in the store", ref)
		case t.Result == nil || !t.Result.Offline || t.Forwarding == nil:
			w.fail(invNeverLost, "%s approved offline, stored in status %d with the result %+v and the forwarding %+v", ref, t.StatusID, t.Result, t.Forwarding)
		case t.Forwarding.State != st:
			w.fail(invNeverLost, "%s is %s on the card network, %s in the store", ref, st, t.Forwarding.State)
		}
	}
}

// checkForwardTimeline: an offline approval the terminal reported has
// exactly one FORWARDED or FORWARD_DECLINED entry, of the outcome
// reported, and one matching event (told: t's events); any other
// transaction none.
func (w *world) checkForwardTimeline(t *instore.Transaction, tl []instore.TransactionEvent, told []string) {
	want := map[instore.ForwardingState]instore.TimelineKind{instore.ForwardForwarded: instore.EventForwarded,
		instore.ForwardDeclined: instore.EventForwardDeclined}[w.ledger.offline[t.ID]]
	var entries []instore.TimelineKind
	for _, e := range tl {
		if e.Kind == instore.EventForwarded || e.Kind == instore.EventForwardDeclined {
			entries = append(entries, e.Kind)
		}
	}
	events := 0
	for _, e := range told {
		if strings.Contains(e, " "+string(instore.EventTransactionForwarded)+" ") ||
			strings.Contains(e, " "+string(instore.EventTransactionForwardDeclined)+" ") {
			events++
		}
	}
	n := 0
	if want != "" {
		n = 1
	}
	if len(entries) != n || n == 1 && entries[0] != want || events != n {
		w.fail(invForwardOnce, "%s: the terminal reported %q; the timeline has %q, %d forwarding events", t.ID, want, entries, events)
	}
}

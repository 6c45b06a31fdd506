package simulation

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// Offline approvals (store and forward, docs/terminal-protocol.md section
// 13). Each terminal has a card network that goes down and comes back as
// the seed says (faults.netEvery). While it is down the terminal keeps its
// session, but reaches no issuer: a purchase it would approve is approved
// offline when its total is at or below the floor limit and its offline
// queue has room (the result says offline; the approval is queued); with
// the queue full it ends OFFLINE_QUEUE_IS_FULL, above the floor limit (and
// anything but a purchase, which needs the issuer) TERMINAL_IS_OFFLINE.
// When the network comes back the terminal forwards its queue in order:
// the issuer accepts each or declines it (the merchant is not paid), and
// the terminal reports each with a forwarded message, resent after every
// hello until the service confirms it, sometimes twice.

// cardNetwork is a terminal's card network: down or not, its offline queue
// (oldest first) and its forwarded reports not confirmed yet.
type cardNetwork struct {
	down    bool
	queue   []*dtx
	reports []*forwardReport
}

// forwardReport is a forwarded message kept until confirmed.
type forwardReport struct {
	id, ref  string
	declined bool
	at       time.Time
}

func (r *forwardReport) msg() msg {
	return msg{kind: mForwarded, id: r.id, ref: r.ref, declined: r.declined, at: r.at}
}

// planOutages starts d's card network's outages, if the seed has any.
func (d *device) planOutages() {
	if at, ok := d.w.faults.nextOutage(); ok {
		d.w.sched.after(at, "cardnet down "+d.serial, d.networkDown)
	}
}

func (d *device) networkDown() {
	f := d.w.faults
	if f.calmed {
		return
	}
	d.net.down = true
	d.w.note("cardnet down %s", d.serial)
	d.w.sched.after(f.outage(), "cardnet up "+d.serial, d.networkUp)
}

// networkUp brings d's card network back: its queue is forwarded in order,
// each approval reported.
func (d *device) networkUp() {
	w, f := d.w, d.w.faults
	if !d.net.down {
		return
	}
	d.net.down = false
	w.note("cardnet up %s, forwarding %d", d.serial, len(d.net.queue))
	for _, t := range d.net.queue {
		declined := f.netRng.Float64() < f.pFwdDecline
		w.forwards++
		r := &forwardReport{id: fmt.Sprintf("fwd_%d", w.forwards), ref: t.ref, declined: declined, at: w.sched.now}
		w.ledger.forwarded(d.serial, t.ref, declined)
		d.net.reports = append(d.net.reports, r)
		d.send(r.msg())
		if !f.calmed && f.netRng.Float64() < f.pFwdTwice {
			d.send(r.msg()) // sent again before its confirm came
		}
	}
	d.net.queue = nil
	d.planOutages()
}

// offline is the card network's say on the outcome status of t: with the
// network up, or an outcome that is not an approval, status stays.
func (d *device) offline(t *dtx, status instore.TransactionStatus) instore.TransactionStatus {
	f := d.w.faults
	switch {
	case !d.net.down || status != instore.StatusApproved:
		return status
	case t.kind != instore.TypePurchase || t.amount+t.tipped > f.floorLimit:
		status = instore.StatusTerminalIsOffline
	case len(d.net.queue) >= f.queueSize:
		status = instore.StatusOfflineQueueIsFull
	default:
		t.offline = true
		d.net.queue = append(d.net.queue, t)
		return status
	}
	t.tipped = 0
	return status
}

// forwardConfirmed forgets the forwarded report id the service confirmed.
func (d *device) forwardConfirmed(id string) {
	d.net.reports = slices.DeleteFunc(d.net.reports, func(r *forwardReport) bool { return r.id == id })
}

// forwarded hands a forwarded report to the service, confirmed once
// applied (the gateway's confirm); one not stored is not confirmed, and
// the terminal resends it after its next hello.
func (s *session) forwarded(m msg) {
	err := s.node.svc.TerminalForwarded(context.Background(), s.dev.serial,
		instore.ForwardReport{MessageID: m.id, Ref: m.ref, Declined: m.declined, ForwardedAt: m.at})
	if err == nil && s.open && s.node.up {
		s.toDevice(msg{kind: mResultConfirmed, id: m.id})
	}
}

// offlineMove is an ECR's move on a sale it was told was approved
// offline: ask how its forwarding stands, refund it (the service must
// refuse while it is QUEUED or DECLINED), or reverse it.
func (e *ecr) offlineMove(s *sale) {
	r := e.w.ecrRng
	e.w.note("offline move %s on %s (%s)", e.name, s.ref, s.forwarding)
	switch x := r.IntN(10); {
	case x < 3:
		e.call(&request{name: "poll", method: http.MethodGet, path: "/transaction/" + s.ref, sale: s})
	case x < 8:
		e.refund(s, 1+r.Int64N(max(s.amount-s.cashback, 1)))
	default:
		e.call(e.post("reversal", "/reversal", true, map[string]any{"onlineAPIRefId": s.ref},
			&sale{kind: instore.TypeReversal, amount: s.amount, status: instore.StatusPending}))
	}
}

// offlineSales are the approved sales the ECRs were told were approved
// offline.
func (w *world) offlineSales() []*sale {
	var out []*sale
	for _, o := range w.ecrs {
		for _, s := range o.sales {
			if s.offline && s.status == instore.StatusApproved {
				out = append(out, s)
			}
		}
	}
	return out
}

// toldForwarding takes what an ECR was just told of s's forwarding: a
// final state, once told, never changes.
func (w *world) toldForwarding(s *sale, a *answer) {
	if a.Result != nil && a.Result.Offline {
		s.offline = true
	}
	if a.Forwarding == nil {
		return
	}
	st := a.Forwarding.State
	if prev := w.toldFwd[s.ref]; prev != "" && prev != instore.ForwardQueued && prev != st {
		w.fail(invForwardOnce, "%s: an ECR was told its forwarding is %s, then %s", s.ref, prev, st)
	}
	w.toldFwd[s.ref], s.forwarding = st, st
}

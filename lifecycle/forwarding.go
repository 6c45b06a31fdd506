package lifecycle

import (
	"errors"
	"time"

	"github.com/instore-dev/instore"
)

// The forwarding of an offline approval (instore.Forwarding) moves only
// through NextForwarding:
//
//	none       --QUEUE------>  QUEUED (an APPROVED purchase result with offline: true)
//	QUEUED     --FORWARDED-->  FORWARDED, forwardedAt (the issuer accepted it)
//	QUEUED     --DECLINED--->  DECLINED, forwardedAt (the issuer declined it: the merchant was not paid)
//
// Every other (state, event) pair changes nothing: a report on a
// transaction that was not approved offline is ignored, a second report
// (a resend, or one that contradicts the first) leaves the first outcome.
// The status of the transaction never moves with it.

// ForwardEvent is what happens to an offline approval's forwarding.
type ForwardEvent string

// Forwarding events.
const (
	ForwardQueue     ForwardEvent = "QUEUE"     // the terminal approved it offline and queued it
	ForwardForwarded ForwardEvent = "FORWARDED" // the terminal forwarded it; the issuer accepted it
	ForwardDeclined  ForwardEvent = "DECLINED"  // the terminal forwarded it; the issuer declined it
)

// ForwardEvents lists every forwarding event.
var ForwardEvents = []ForwardEvent{ForwardQueue, ForwardForwarded, ForwardDeclined}

// NextForwarding applies ev to the forwarding f (nil: the transaction was
// not approved offline) at at (for FORWARDED and DECLINED, when the
// terminal forwarded it). ok is false when ev changes nothing; f is never
// changed.
func NextForwarding(f *instore.Forwarding, ev ForwardEvent, at time.Time) (next *instore.Forwarding, ok bool) {
	if f == nil {
		if ev != ForwardQueue {
			return nil, false
		}
		return &instore.Forwarding{State: instore.ForwardQueued}, true
	}
	if f.State != instore.ForwardQueued {
		return f, false
	}
	switch ev {
	case ForwardForwarded:
		return &instore.Forwarding{State: instore.ForwardForwarded, ForwardedAt: ptr(at)}, true
	case ForwardDeclined:
		return &instore.Forwarding{State: instore.ForwardDeclined, ForwardedAt: ptr(at)}, true
	}
	return f, false
}

// offlineApproval reports whether a terminal's result res approves t
// offline: an APPROVED result of a PURCHASE that says so. The flag on any
// other result (a refund, a pre-authorisation: they need the issuer) is
// not taken (the Service logs it).
func offlineApproval(t instore.Transaction, res *instore.TerminalResult) bool {
	return res.Result.Offline && res.StatusID == instore.StatusApproved && t.Type == instore.TypePurchase
}

// forwarded applies a terminal's forwarding report (e.Forward) to t: its
// forwarding moves by NextForwarding, with its timeline entry FORWARDED or
// FORWARD_DECLINED (actor TERMINAL), the status unchanged. A report on a
// transaction with no forwarding, or one already forwarded, changes
// nothing: the terminal resends its report until it is confirmed, and it
// is applied once.
func forwarded(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	before := t
	var st Step
	rep := e.Forward
	if rep == nil {
		st.Refused = errNoForwardReport
		return before, st
	}
	ev, kind := ForwardForwarded, instore.EventForwarded
	if rep.Declined {
		ev, kind = ForwardDeclined, instore.EventForwardDeclined
	}
	f, ok := NextForwarding(t.Forwarding, ev, rep.ForwardedAt)
	if !ok {
		return before, st
	}
	t.Forwarding = f
	t, st = changed(before, t, e, r, st, kind)
	st.Event.Detail = "forwarded at " + rep.ForwardedAt.UTC().Format(time.RFC3339)
	if rep.Declined {
		st.Event.Detail += "; the issuer declined it: the merchant was not paid"
	} else {
		st.Event.Detail += "; the issuer accepted it"
	}
	return t, st
}

// errNoForwardReport refuses a forwarding event without its report.
var errNoForwardReport = errors.New("a forwarding event must carry the terminal's report")

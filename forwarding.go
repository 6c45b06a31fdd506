package instore

import "time"

// Offline approvals (store and forward). A terminal whose card network is
// down may approve a purchase at or below its floor limit without the
// issuer and keep the approval in its offline queue; its result then has
// Result.Offline, and the transaction a Forwarding in state
// ForwardQueued. When the network returns the terminal forwards the
// queue and reports each outcome (protocol message forwarded, resent until
// the service confirms it): ForwardForwarded (the issuer accepted it, the
// merchant is paid) or ForwardDeclined (the issuer refused it: the
// customer left with the goods, but the merchant was not paid). The status
// stays APPROVED either way. The state moves only through
// lifecycle.NextForwarding.

// ForwardingState is the forwarding state of an offline approval.
type ForwardingState string

// Forwarding states.
const (
	ForwardQueued    ForwardingState = "QUEUED"
	ForwardForwarded ForwardingState = "FORWARDED"
	ForwardDeclined  ForwardingState = "DECLINED"
)

// ForwardingStates lists every forwarding state (GET /transactions
// ?forwarding=).
var ForwardingStates = []ForwardingState{ForwardQueued, ForwardForwarded, ForwardDeclined}

// Forwarding is the forwarding of an offline approval (nil on every other
// transaction). ForwardedAt is when the terminal forwarded it, as the
// terminal reported it (nil while QUEUED).
type Forwarding struct {
	State       ForwardingState `json:"state"`
	ForwardedAt *time.Time      `json:"forwardedAt"`
}

// Timeline kinds of forwarding (timeline.go).
const (
	// EventForwarded: the terminal forwarded an offline approval and the
	// issuer accepted it (Detail: when).
	EventForwarded TimelineKind = "FORWARDED"
	// EventForwardDeclined: the terminal forwarded an offline approval and
	// the issuer declined it: the merchant was not paid.
	EventForwardDeclined TimelineKind = "FORWARD_DECLINED"
)

// Event types of forwarding (events.go); data: the transaction.
const (
	EventTransactionForwarded       EventType = "transaction.forwarded"
	EventTransactionForwardDeclined EventType = "transaction.forward_declined"
)

// ForwardReport is what a terminal reports about forwarding one offline
// approval (protocol message forwarded).
type ForwardReport struct {
	// MessageID is the terminal's id of the message; a resent report
	// carries the same id.
	MessageID string
	// Ref is the transaction.
	Ref string
	// Declined: the issuer declined it.
	Declined bool
	// ForwardedAt is when the terminal forwarded it.
	ForwardedAt time.Time
}

// ForwardObserver is implemented by an Observer that also counts the
// offline approvals the issuer declined when they were forwarded (the
// Service tells it once per transaction, after the commit).
type ForwardObserver interface {
	ForwardDeclined(t *Transaction)
}

// Queued reports whether t is an offline approval not forwarded yet.
func (t *Transaction) Queued() bool {
	return t.Forwarding != nil && t.Forwarding.State == ForwardQueued
}

// checkForwarding is CheckOnOriginal's rule of an offline approval: money
// is paid back only on a sale the merchant was paid for. A sale the issuer
// declined when it was forwarded paid the merchant nothing; one still
// QUEUED on its terminal may yet be declined, and a refund paid now would
// then give the cardholder money they were never charged. Both refuse a
// refund (409 conflict) and a reversal (409 not-reversible); once
// FORWARDED it is a sale like any other.
func checkForwarding(orig *Transaction, t *Transaction) error {
	f := orig.Forwarding
	if f == nil || f.State == ForwardForwarded {
		return nil
	}
	code, verb := EConflict, "refunded"
	if t.Type == TypeReversal {
		code, verb = ENotReversible, "reversed"
	}
	if f.State == ForwardDeclined {
		return Errorf(code, "The purchase was approved offline and the issuer declined it when the terminal forwarded it: the merchant was not paid, so it cannot be %s.", verb)
	}
	return Errorf(code, "The purchase was approved offline and is still queued on its terminal (forwarding QUEUED): the issuer may yet decline it, so it cannot be %s until it is FORWARDED.", verb)
}

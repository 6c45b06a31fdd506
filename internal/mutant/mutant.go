// Package mutant names the small, plausible bugs the deterministic
// simulation must catch (internal/simulation, TestMutants). Each is a
// check in the real code, `if mutant.On(mutant.X)`, that switches the bug
// on. Only a test switches one on (Set); in production none is, and a
// check costs one atomic load.
package mutant

import "sync/atomic"

// Name is a mutant.
type Name string

// The mutants, each a bug that once existed or easily could.
const (
	// RefundLimitOutsideLock checks the money rule against a read made
	// before the database transaction that creates the refund or
	// reversal, not inside it.
	RefundLimitOutsideLock Name = "refund-limit-outside-lock"
	// RefundAboveAmount forgets the amount limit of refunds.
	RefundAboveAmount Name = "refund-above-amount"
	// ReversalBesideRefund lets a purchase with a refund be reversed.
	ReversalBesideRefund Name = "reversal-beside-refund"
	// IdempotencyNotTied creates a transaction without tying the
	// request's Idempotency-Key to it.
	IdempotencyNotTied Name = "idempotency-not-tied"
	// OwedNotResentOnHello forgets, on a device's hello, what it is owed.
	OwedNotResentOnHello Name = "owed-not-resent-on-hello"
	// NoDeadlineAfterAck arms no deadline when the terminal acknowledges.
	NoDeadlineAfterAck Name = "no-deadline-after-ack"
	// AckTimeoutNotArmed arms no ack time-out when a transaction is
	// created (the sweep still ends it, late).
	AckTimeoutNotArmed Name = "ack-timeout-not-armed"
	// UnconfirmedNotRecovered neither re-arms nor sweeps the confirmation
	// deadline of an unconfirmed sale after a start.
	UnconfirmedNotRecovered Name = "unconfirmed-not-recovered"
	// EventsOutOfOrder lists a page of events newest first (the numbers
	// are taken at insert, in commit order: the order a reader must keep).
	EventsOutOfOrder Name = "events-out-of-order"
	// LateApprovalNotReversed keeps an approval the service had ended
	// without reversing it on the terminal.
	LateApprovalNotReversed Name = "late-approval-not-reversed"
	// EffectEndedOnSend forgets an owed message once sent, not once the
	// device confirmed it.
	EffectEndedOnSend Name = "effect-ended-on-send"
	// CashbackRefundable lets the cashback of a sale be refunded too.
	CashbackRefundable Name = "cashback-refundable"
	// PendingRefundsNotCounted counts only APPROVED refunds against a
	// sale's amount, not those still PENDING.
	PendingRefundsNotCounted Name = "pending-refunds-not-counted"
	// CaptureToleranceSkipped lets a capture take more than the authorised
	// amount and the capture tolerance (the tolerance read as unlimited).
	CaptureToleranceSkipped Name = "capture-tolerance-skipped"
	// VoidAfterCapture lets a pre-auth whose authorisation ended (CAPTURED,
	// VOIDED, EXPIRED) be voided.
	VoidAfterCapture Name = "void-after-capture"
	// ExpiryNotRecovered neither re-arms nor sweeps the expiry of the OPEN
	// pre-auths after a start.
	ExpiryNotRecovered Name = "expiry-not-recovered"
	// PreAuthRefundsAboveCaptured limits the refunds of a pre-auth by its
	// authorised amount, not its captured amount.
	PreAuthRefundsAboveCaptured Name = "preauth-refunds-above-captured"
	// QueuedRefundable lets an offline approval still QUEUED on its
	// terminal be refunded (the forwarding rule of the money rule skipped).
	QueuedRefundable Name = "queued-refundable"
	// ForwardAppliedTwice applies a terminal's forwarded report again when
	// it is resent (the once-check skipped).
	ForwardAppliedTwice Name = "forward-applied-twice"
	// BatchAppliedTwice applies a terminal's batch again when it is resent
	// to a close it CLOSED already (the once-check skipped).
	BatchAppliedTwice Name = "batch-applied-twice"
	// CloseWindowNotMoved opens every close's window at its terminal ID's
	// creation, not at the end of its latest CLOSED batch.
	CloseWindowNotMoved Name = "close-window-not-moved"
	// CloseBesideTransaction lets the store create a close while a
	// transaction of its terminal ID is PENDING.
	CloseBesideTransaction Name = "close-beside-transaction"
)

// All is every mutant.
var All = []Name{RefundLimitOutsideLock, RefundAboveAmount, ReversalBesideRefund, IdempotencyNotTied,
	OwedNotResentOnHello, NoDeadlineAfterAck, AckTimeoutNotArmed, UnconfirmedNotRecovered, EventsOutOfOrder,
	LateApprovalNotReversed, EffectEndedOnSend, CashbackRefundable, PendingRefundsNotCounted,
	CaptureToleranceSkipped, VoidAfterCapture, ExpiryNotRecovered, PreAuthRefundsAboveCaptured,
	QueuedRefundable, ForwardAppliedTwice, BatchAppliedTwice, CloseWindowNotMoved, CloseBesideTransaction}

var on atomic.Pointer[Name]

// On reports whether the mutant n is switched on.
func On(n Name) bool {
	p := on.Load()
	return p != nil && *p == n
}

// Set switches n on (and any other off) until restore is called. Tests
// only; one mutant at a time in a process.
func Set(n Name) (restore func()) {
	if !on.CompareAndSwap(nil, &n) {
		panic("mutant: " + string(*on.Load()) + " is on already; one mutant at a time")
	}
	return func() { on.Store(nil) }
}

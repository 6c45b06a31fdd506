package instore

import (
	"fmt"
	"time"
)

// ErrRefundExceeded is wrapped by the error of a refund that would take the
// refunds of a purchase past its amount.
var ErrRefundExceeded = fmt.Errorf("refunds exceed the original amount")

// CheckOnOriginal is the one rule of money paid back on a purchase: it
// decides whether t, a new REFUND or REVERSAL of the purchase orig, may be
// created, given the other refunds and reversals of orig (others, as
// stored). Stores call it inside the database transaction that locks orig
// and inserts t (Store.CreateOnOriginal), so two requests racing on one
// purchase are decided one after the other; the Service calls it before,
// with others nil, only to answer in the contract's order.
//
// The rule: the APPROVED and PENDING refunds of a purchase plus a reversal
// of it never exceed what its card was charged (totalAmount: the amount and
// the tip), and the refunds never exceed its totalAmount less its cashback
// (the cash the customer took is not paid back to the card as well; the
// tip is). So only an APPROVED purchase takes either;
// a reversal is refused while any refund of the purchase is APPROVED or
// PENDING; a refund is refused while a reversal of it is PENDING or
// APPROVED, or ended TECHNICAL_ERROR without a result from the terminal
// (its outcome is unknown: the terminal may still report it approved); and
// a refund is refused past what is left of the amount.
//
// A sale awaiting the ECR's confirmation (confirmWithinSeconds) takes
// neither: its confirmation window ends in a reversal of its own unless the
// ECR confirms it, and a refund or reversal beside that reversal would pay
// back twice. The ECR confirms it first (then refunds or reverses it), or
// lets the window pass.
//
// A refund that ended TECHNICAL_ERROR without a result does not block a
// reversal: if the terminal reports it approved late, the service reverses
// it on the terminal (TerminalResult), so it pays nothing back in the end.
func CheckOnOriginal(orig *Transaction, others []*Transaction, t *Transaction) error {
	if err := checkForwarding(orig, t); err != nil {
		return err // an offline approval not forwarded, or declined (forwarding.go)
	}
	switch t.Type {
	case TypeRefund:
		if orig.Type == TypePreAuth {
			return checkRefundOfPreAuth(orig, others, t)
		}
		if orig.Type != TypePurchase || orig.StatusID != StatusApproved {
			return Errorf(EConflict, "Only an APPROVED purchase can be refunded; the original is a %s in status %d.", orig.Type, orig.StatusID)
		}
		if orig.Unconfirmed() {
			return Errorf(EConflict, "The purchase awaits confirmation (confirmWithinSeconds); confirm it before refunding it.")
		}
		for _, o := range others {
			if o.Type == TypeReversal && reversalMayPayBack(o) {
				e := Errorf(EConflict, "The purchase is being reversed (reversal %s); it cannot be refunded as well.", o.ID)
				e.OnlineAPIRefID = o.ID
				return e
			}
		}
		// The cashback was cash in the customer's hand: only the goods'
		// part (and the tip) is refundable, or card and cash would both
		// pay it back.
		if left := orig.TotalAmount() - orig.CashbackAmount - Refunded(others); t.Amount > left {
			msg := fmt.Sprintf("exceeds what is left to refund of the original (%d)", left)
			if orig.CashbackAmount > 0 {
				msg = fmt.Sprintf("exceeds what is left to refund of the original (%d; its cashback of %d is not refundable)", left, orig.CashbackAmount)
			}
			return refundExceeded(msg)
		}
		return nil
	case TypeReversal:
		switch {
		case orig.Type == TypePreAuth:
			return Errorf(ENotReversible, "A pre-authorisation is never reversed: void it (POST /void), or refund its capture.")
		case orig.Type != TypePurchase:
			return Errorf(ENotReversible, "Only a purchase can be reversed; this is a %s.", orig.Type)
		case orig.StatusID == StatusReversed:
			return Errorf(ENotReversible, "The purchase is already reversed.")
		case orig.StatusID != StatusApproved:
			return Errorf(ENotReversible, "Only an APPROVED purchase can be reversed; this one ended in status %d.", orig.StatusID)
		case orig.Unconfirmed():
			return Errorf(ENotReversible, "The purchase awaits confirmation (confirmWithinSeconds); confirm it before reversing it, or leave it unconfirmed and it is reversed when its window ends.")
		}
		for _, o := range others {
			switch {
			case o.Type == TypeRefund && countsAsRefunded(o):
				e := Errorf(ENotReversible, "The purchase has a refund that is approved or pending (%s); refund what is left instead of reversing it.", o.ID)
				e.OnlineAPIRefID = o.ID
				return e
			case o.Type == TypeReversal && (o.StatusID == StatusPending || o.StatusID == StatusApproved):
				e := Errorf(ENotReversible, "The purchase is being reversed already (reversal %s).", o.ID)
				e.OnlineAPIRefID = o.ID
				return e
			}
		}
		return nil
	}
	return fmt.Errorf("check on original: a %s does not refer to an original", t.Type)
}

// MaxNewerChecked bounds how many transactions of the original's terminal,
// newest first, CheckReversalLatest is given (NewerOnTerminal).
const MaxNewerChecked = 100

// CheckReversalLatest is the rule that only the latest transaction of a
// terminal can be reversed: it refuses a REVERSAL of orig when newer holds
// a transaction of orig's terminal created after it (later, or at the same
// time with a greater id) other than a reversal of orig. Earlier reversals
// of orig aside: one that failed, or ended without a known outcome, can be
// followed by another (two approved reversals void one authorisation
// once; CheckOnOriginal refuses one while another is PENDING or
// APPROVED). newer are the transactions of orig's merchant and terminal
// created at or after it (NewerOnTerminal), in any order; orig itself may
// be among them. Stores call it inside the database transaction that locks
// orig and inserts the reversal (Store.CreateOnOriginal), after
// CheckOnOriginal; the Service calls it before, only to answer in the
// contract's order.
func CheckReversalLatest(orig *Transaction, newer []*Transaction) error {
	for _, n := range newer {
		switch {
		case n.ID == orig.ID, n.Type == TypeReversal && n.OriginalID == orig.ID:
		case n.CreatedAt.After(orig.CreatedAt), n.CreatedAt.Equal(orig.CreatedAt) && n.ID > orig.ID:
			return Errorf(ENotReversible, "Only the latest transaction of a terminal can be reversed; a newer one exists on this terminal. Refund it instead.")
		}
	}
	return nil
}

// CheckHeldByDevice refuses a transaction without a card on orig (a
// REVERSAL; an INCREMENT, CAPTURE or VOID of a pre-auth) when orig's
// terminal ID is now linked to another device than the one that made it
// (serial, the device linked now): only that device holds what the
// command acts on (the sale it reverses, the authorisation), and another
// would answer TECHNICAL_ERROR. A pre-auth's hold then lapses at the
// card issuer; a sale is refunded instead. The Service calls it with the
// terminal ID's link, once the ID is the merchant's and linked.
func CheckHeldByDevice(orig *Transaction, serial string) error {
	if orig.SerialNumber == "" || orig.SerialNumber == serial {
		return nil
	}
	if orig.Type == TypePreAuth {
		return Errorf(EConflict, "The pre-authorisation is held by the device that authorised it, and its terminal ID is now linked to another device: it can no longer be incremented, captured or voided; its hold lapses at the card issuer.")
	}
	return Errorf(ENotReversible, "The sale was made on the device its terminal ID was linked to then; the ID is now linked to another device, which cannot reverse it. Refund it instead.")
}

// NewerOnTerminal is the filter of the transactions CheckReversalLatest
// reads for orig: its merchant's on its terminal, from its creation on,
// newest first, at most MaxNewerChecked.
func NewerOnTerminal(orig *Transaction, until time.Time) TransactionFilter {
	return TransactionFilter{MerchantID: orig.MerchantID, From: orig.CreatedAt, To: until,
		TransactionSelection: TransactionSelection{TerminalID: orig.TerminalID}, Limit: MaxNewerChecked}
}

// Refunded sums the refunds among others that take from their original's
// amount: APPROVED and PENDING ones.
func Refunded(others []*Transaction) int64 {
	var sum int64
	for _, o := range others {
		if o.Type == TypeRefund && countsAsRefunded(o) {
			sum += o.Amount
		}
	}
	return sum
}

func countsAsRefunded(t *Transaction) bool {
	return t.StatusID == StatusApproved || t.StatusID == StatusPending
}

// reversalMayPayBack reports whether the reversal r has paid the purchase
// back or still may: PENDING, APPROVED, or ended TECHNICAL_ERROR by the
// service (WP25, WP36) with no result from the terminal yet.
func reversalMayPayBack(r *Transaction) bool {
	switch r.StatusID {
	case StatusPending, StatusApproved:
		return true
	case StatusTechnicalError:
		return r.ResultMessageID == ""
	}
	return false
}

// checkRefundOfPreAuth is CheckOnOriginal's rule of a refund of the
// PRE_AUTH pre: only a CAPTURED one takes refunds, and they never exceed
// its capturedAmount.
func checkRefundOfPreAuth(pre *Transaction, others []*Transaction, t *Transaction) error {
	if pre.Authorization == nil || pre.Authorization.State != AuthCaptured {
		return Errorf(EConflict, "Only a CAPTURED pre-authorisation can be refunded; void an open one instead.")
	}
	if left := pre.Authorization.CapturedAmount - Refunded(others); t.Amount > left {
		return refundExceeded(fmt.Sprintf("exceeds what is left to refund of the captured amount (%d)", left))
	}
	return nil
}

// refundExceeded is the validation error of a refund past what is left,
// msg saying how much.
func refundExceeded(msg string) *Error {
	return &Error{Code: EValidation, Detail: "The request is not valid; see errors.", Err: ErrRefundExceeded,
		Fields: []FieldError{{Field: "/amount", Message: msg}}}
}

package instore

import "time"

// What the service owes a terminal device outside the database is an
// Effect (internal/service/owed.go carries them out): a cancel (the ECR's, DEADLINE, ACK_TIMEOUT), the reversal of a
// late approval, a print. Each is written in the database transaction of
// the change that makes it owed (the transaction's expiry, the cashier's
// cancel request, the late approval turned REVERSED, the result with
// printReceipt and its receipt print job, a print job), so that no crash
// between the change and the send can lose it. It is sent after the
// commit, sent again after every hello of its device, and done when the
// device confirms it (`confirm` with `re` = its id, which is the message
// id of every send), when what it concerns ends (a result for the
// transaction, a final status of the print job), or when it is older than
// EffectTTL (the sweep drops it with a log line), except a reversal, which
// gives money back and stays owed until the device confirms it. docs/decisions.md, owed
// messages; docs/terminal-protocol.md, section 7.
//
// A command (purchase, refund, the ECR's reversal) needs no effect: its
// PENDING transaction is the record, and one not acknowledged yet is sent
// again after a hello (sendOwed) until its ack timeout ends it.

// EffectKind is the kind of an Effect.
type EffectKind string

// Kinds of Effect.
const (
	EffectCancel   EffectKind = "CANCEL"
	EffectReversal EffectKind = "REVERSAL"
	EffectPrint    EffectKind = "PRINT"
)

// EffectOutcome is the outcome of a done Effect.
type EffectOutcome string

// Outcomes of a done Effect.
const (
	// EffectConfirmed: the device confirmed the message.
	EffectConfirmed EffectOutcome = "CONFIRMED"
	// EffectMoot: what it concerns ended: the terminal's result for the
	// transaction arrived, or the print job has its final status.
	EffectMoot EffectOutcome = "MOOT"
	// EffectExpired: dropped by the sweep, older than EffectTTL.
	EffectExpired EffectOutcome = "EXPIRED"
)

// DefaultEffectTTL bounds how long an effect stays owed: a device that
// stays away longer, or never confirms, is no longer sent it.
const DefaultEffectTTL = 24 * time.Hour

// DefaultSweep is how often RunSweep looks for print jobs past their time-out
// and effects past their bound.
const DefaultSweep = 30 * time.Second

// Effect is a message the service owes a terminal device until the device
// confirms it or it becomes moot.
type Effect struct {
	// ID is "eff_" and 32 hex digits, the first 12 the creation time in
	// milliseconds; it is also the message id of every send of the effect.
	ID   string
	Kind EffectKind
	// SerialNumber is the device it is owed to.
	SerialNumber string
	// Ref is the onlineAPIRefId of the transaction (cancel, reversal) or
	// the printId of the print job (print).
	Ref string
	// Reason is the cancel's reason (CancelByECR, CancelDeadline,
	// CancelAckTimeout) or the reversal's (ReversalLateApproval); empty
	// for a print.
	Reason    string
	CreatedAt time.Time
	// DoneAt and Outcome are set together once the effect is done.
	DoneAt  *time.Time
	Outcome EffectOutcome
}

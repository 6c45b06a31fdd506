package instore

import (
	"context"
	"time"
)

// A transaction's timeline: every event applied to it, appended in the
// database transaction that applies it (the store writes a Change's
// Events with its transaction: change.go),
// so the timeline never disagrees with the state. Read with
// GET /in-store/api/v1/transaction/{onlineAPIRefId}/events.

// TimelineKind is the kind of a timeline event (TransactionEvent.Kind).
type TimelineKind string

// Kinds of timeline events.
const (
	EventCreated         TimelineKind = "CREATED"          // the ECR's request stored it (PENDING, SENT)
	EventSendFailed      TimelineKind = "SEND_FAILED"      // the terminal's session ended while the command was sent (WP23)
	EventAcknowledged    TimelineKind = "ACKNOWLEDGED"     // the terminal acknowledged the command; the deadline starts
	EventProgress        TimelineKind = "PROGRESS"         // the terminal reached a stage (Detail: the stage)
	EventResult          TimelineKind = "RESULT"           // the terminal's final outcome (Detail: the status)
	EventCancelRequested TimelineKind = "CANCEL_REQUESTED" // the ECR asked to cancel; the terminal is told
	EventAckTimeout      TimelineKind = "ACK_TIMEOUT"      // no ack within the ack timeout (WP25)
	EventDeadline        TimelineKind = "DEADLINE"         // no result by the deadline (WP36)
	EventLateApproval    TimelineKind = "LATE_APPROVAL"    // an approval after the service ended it: reversed on the terminal
	EventTipRefused      TimelineKind = "TIP_REFUSED"      // an approval whose tip breaks the tip rules (CheckTipAmount): stored, reversed on the terminal
	EventLateResult      TimelineKind = "LATE_RESULT"      // another outcome after the service ended it: kept, status stands
	EventReversed        TimelineKind = "REVERSED"         // (of a purchase) a REVERSAL of it was approved (Detail: its ref)
	EventConfirmed       TimelineKind = "CONFIRMED"        // the ECR confirmed an APPROVED sale (confirmWithinSeconds)
	EventAutoReversed    TimelineKind = "AUTO_REVERSED"    // the confirmation window passed: reversed on the terminal
	EventAuthorization   TimelineKind = "AUTHORIZATION"    // (of a pre-auth) an INCREMENT, CAPTURE or VOID of it was approved (Detail: which, the new state), or it lapsed at its expiry (actor TIMER: no device holds it)
)

// Actor is who caused a timeline event.
type Actor string

// Actors of timeline events.
const (
	ActorECR      Actor = "ECR"
	ActorTerminal Actor = "TERMINAL"
	ActorTimer    Actor = "TIMER"
	ActorOperator Actor = "OPERATOR"
)

// TransactionEvent is one entry of a transaction's timeline. Version is
// the transaction's version after the event (so events sort by it and a
// transaction has at most one event per version); StatusBefore and
// StatusAfter are transactionStatuses codes. Detail is short and holds no
// card data, credential or terminal ID beyond what the transaction shows.
type TransactionEvent struct {
	Version      int64        `json:"version"`
	At           time.Time    `json:"at"`
	Kind         TimelineKind `json:"kind"`
	Actor        Actor        `json:"actor"`
	StatusBefore string       `json:"statusBefore"`
	StatusAfter  string       `json:"statusAfter"`
	Detail       string       `json:"detail,omitempty"`
	// Outbox is the integrator event the store writes with this one
	// (events.go; nil: none), set by the Service just before the write.
	Outbox *OutboxEvent `json:"-"`
}

// TimelineStore keeps timelines. Every write of a transaction
// (CreateTransaction, CreateOnOriginal, Commit) inserts its Change's Events
// in the same database transaction.
type TimelineStore interface {
	// TransactionEvents returns the timeline of ref, oldest first (empty,
	// not ErrNotFound, for a transaction without events).
	TransactionEvents(ctx context.Context, ref string) ([]TransactionEvent, error)
}

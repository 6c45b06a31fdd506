package instore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Events for integrators (docs/events.md): every change an integrator
// cares about is an event, written in the database transaction of the
// change (an outbox), numbered at insert and told in commit order by the
// sequencer (SequenceEvents), then streamed (GET /events), listed
// and delivered to webhooks (internal/webhook). An event's data is the
// resource as the API showed it right after the change.

// EventType is the type of an event for integrators (OutboxEvent.Type):
// what a webhook or a stream filters by.
type EventType string

// Event types.
const (
	EventTransactionCreated      EventType = "transaction.created"
	EventTransactionAcknowledged EventType = "transaction.acknowledged"
	EventTransactionProgress     EventType = "transaction.progress"
	EventTransactionFinal        EventType = "transaction.final"
	EventTransactionConfirmed    EventType = "transaction.confirmed"
	EventTransactionAutoReversed EventType = "transaction.auto_reversed"
	// EventTransactionAuthorization: a pre-auth's authorisation changed
	// (an INCREMENT, CAPTURE or VOID of it was approved); data: the pre-auth.
	EventTransactionAuthorization EventType = "transaction.authorization"
	EventTerminalOnline           EventType = "terminal.online"
	EventTerminalOffline          EventType = "terminal.offline"
	EventTerminalLinked           EventType = "terminal.linked"
	EventTerminalUnlinked         EventType = "terminal.unlinked"
	EventPrintFinal               EventType = "print.final"
	EventUpdateStatus             EventType = "update.status"
	// EventBatchClosed: a terminal answered a close (batch.go); data: the
	// batch.
	EventBatchClosed EventType = "batch.closed"
)

// EventTypes lists every event type, in the order the docs list them.
var EventTypes = []EventType{
	EventTransactionCreated, EventTransactionAcknowledged, EventTransactionProgress, EventTransactionFinal,
	EventTransactionConfirmed, EventTransactionAutoReversed, EventTransactionAuthorization,
	EventTransactionForwarded, EventTransactionForwardDeclined,
	EventTerminalOnline, EventTerminalOffline, EventTerminalLinked, EventTerminalUnlinked,
	EventPrintFinal, EventUpdateStatus, EventBatchClosed,
}

// EventTypeList is EventTypes separated by commas, as messages list them.
func EventTypeList() string { return JoinEventTypes(EventTypes, ", ") }

// JoinEventTypes is strings.Join for event types.
func JoinEventTypes(types []EventType, sep string) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	return strings.Join(names, sep)
}

// DefaultEventRetention is how long events are kept (at least 30 days,
// as the contract promises).
const DefaultEventRetention = 30 * 24 * time.Hour

// MaxEventPage bounds a page of GET /events (and its default).
const MaxEventPage = 500

// OutboxEvent is an event as written with its change, before it is
// numbered.
type OutboxEvent struct {
	MerchantID string
	// TerminalID is the terminal it concerns ("" for none): the stream's
	// terminalId filter.
	TerminalID string
	Type       EventType
	At         time.Time
	// Data is the resource as the API shows it (JSON).
	Data []byte
}

// StoredEvent is a numbered event.
type StoredEvent struct {
	Seq int64
	OutboxEvent
}

// EventWire is an event as the API shows it: in a webhook's body, a
// stream's message and a page of GET /events.
type EventWire struct {
	ID        string          `json:"id"`
	Type      EventType       `json:"type"`
	CreatedAt string          `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// Wire returns the event as the API shows it.
func (e *StoredEvent) Wire() EventWire {
	return EventWire{ID: EventID(e.Seq), Type: e.Type, CreatedAt: e.At.UTC().Format(MicroRFC3339), Data: e.Data}
}

// MicroRFC3339 is RFC 3339 with microseconds, as events date themselves.
const MicroRFC3339 = "2006-01-02T15:04:05.000000Z07:00"

// EventID is the id of the event numbered seq: evt_ and 16 digits, so
// that a later event's id sorts after an earlier one's.
func EventID(seq int64) string { return fmt.Sprintf("evt_%016d", seq) }

// ParseEventID returns the number of an event id: evt_ and 1-19 decimal
// digits (EventID writes 16, more past 10^16), or the digits alone, as
// ?after= may give them; no sign, space or other character.
func ParseEventID(id string) (int64, bool) {
	return ParseDigits(strings.TrimPrefix(id, "evt_"))
}

// ParseDigits parses a non-negative integer as the API writes one in a
// query or an id: decimal digits only (no sign, no space), within int64.
func ParseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// EventFilter selects events of one merchant after a number.
type EventFilter struct {
	MerchantID string
	After      int64
	Types      []EventType // empty: all
	TerminalID string      // "": all
	Limit      int
}

// EventStore keeps the outbox and the numbered events.
type EventStore interface {
	// AppendEvents writes events that describe no stored change of their
	// own (a terminal's session began or ended).
	AppendEvents(ctx context.Context, evs []OutboxEvent) error
	// SequenceEvents tells the events committed since its last call: it
	// moves the store's told horizon (the highest event number readers
	// may show) up to what has committed and is on disk, and returns how
	// many merchants' events it told. Numbers are taken at insert, in
	// commit order below the horizon; a store that numbered them here
	// would number at most limit (the SQL store ignores it). Webhook
	// deliveries are made from the told events when the dispatcher
	// claims (ClaimDeliveries), not here.
	SequenceEvents(ctx context.Context, limit int) (int, error)
	// ListEvents returns the numbered events of f, oldest first (every
	// merchant's when f.MerchantID is "": the node's event feed).
	ListEvents(ctx context.Context, f EventFilter) ([]StoredEvent, error)
	// LastEventSeq returns the number of a merchant's latest event (0:
	// none); of every merchant's for "".
	LastEventSeq(ctx context.Context, merchantID string) (int64, error)
	// ExpireEvents deletes the events (and their ended deliveries) dated
	// before before.
	ExpireEvents(ctx context.Context, before time.Time) (int, error)
}

package instore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Events for integrators (docs/events.md): every change an integrator
// cares about is an event, written in the database transaction of the
// change (an outbox), numbered after its commit by the sequencer
// (SequenceEvents) in commit order, then streamed (GET /events), listed
// and delivered to webhooks (internal/webhook). An event's data is the
// resource as the API showed it right after the change.

// Event types.
const (
	EventTransactionCreated      = "transaction.created"
	EventTransactionAcknowledged = "transaction.acknowledged"
	EventTransactionProgress     = "transaction.progress"
	EventTransactionFinal        = "transaction.final"
	EventTransactionConfirmed    = "transaction.confirmed"
	EventTransactionAutoReversed = "transaction.auto_reversed"
	EventTerminalOnline          = "terminal.online"
	EventTerminalOffline         = "terminal.offline"
	EventTerminalLinked          = "terminal.linked"
	EventTerminalUnlinked        = "terminal.unlinked"
	EventPrintFinal              = "print.final"
	EventUpdateStatus            = "update.status"
)

// EventTypes lists every event type, in the order the docs list them.
var EventTypes = []string{
	EventTransactionCreated, EventTransactionAcknowledged, EventTransactionProgress, EventTransactionFinal,
	EventTransactionConfirmed, EventTransactionAutoReversed,
	EventTerminalOnline, EventTerminalOffline, EventTerminalLinked, EventTerminalUnlinked,
	EventPrintFinal, EventUpdateStatus,
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
	Type       string
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
	Type      string          `json:"type"`
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

// ParseEventID returns the number of an event id (or of a bare number, as
// ?after= may give it).
func ParseEventID(id string) (int64, bool) {
	s := strings.TrimPrefix(id, "evt_")
	if s == "" || len(s) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// EventFilter selects events of one merchant after a number.
type EventFilter struct {
	MerchantID string
	After      int64
	Types      []string // empty: all
	TerminalID string   // "": all
	Limit      int
}

// EventStore keeps the outbox and the numbered events.
type EventStore interface {
	// AppendEvents writes events that describe no stored change of their
	// own (a terminal's session began or ended).
	AppendEvents(ctx context.Context, evs []OutboxEvent) error
	// SequenceEvents numbers up to limit committed, unnumbered events in
	// the order they committed, fans each out to the webhooks of its
	// merchant that want its type (deliveries), and returns how many it
	// numbered. One runs at a time across every node.
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

type outboxKey struct{}

// WithOutbox returns ctx carrying events the next store write made with it
// inserts in its database transaction (the writes that are no
// transaction's: a link, an unlink, a print job's end, an update's
// status).
func WithOutbox(ctx context.Context, evs ...OutboxEvent) context.Context {
	return context.WithValue(ctx, outboxKey{}, evs)
}

// OutboxOf returns the events WithOutbox put in ctx.
func OutboxOf(ctx context.Context) []OutboxEvent {
	evs, _ := ctx.Value(outboxKey{}).([]OutboxEvent)
	return evs
}

// transactionEventType is the event type of a timeline event ("" when
// integrators are not told of it).
func transactionEventType(e TransactionEvent) string {
	switch e.Kind {
	case EventCreated:
		return EventTransactionCreated
	case EventAcknowledged:
		return EventTransactionAcknowledged
	case EventProgress:
		return EventTransactionProgress
	case EventConfirmed:
		return EventTransactionConfirmed
	case EventAutoReversed:
		return EventTransactionAutoReversed
	case EventLateResult:
		// The terminal's own outcome of a transaction the service had
		// ended: the status stands, but the final transaction now has a
		// result (it settles that no money was taken).
		return EventTransactionFinal
	}
	if e.StatusAfter != e.StatusBefore && e.StatusAfter != "PENDING" && e.StatusAfter != "" {
		return EventTransactionFinal // every final status, and a later one (REVERSED)
	}
	return ""
}

// stamp gives t's pending timeline events their integrator event: t as
// the API shows it at that event's version.
func (s *Service) stamp(t *Transaction) {
	for i := range t.Events {
		e := &t.Events[i]
		typ := transactionEventType(*e)
		if typ == "" {
			continue
		}
		cp := *t
		cp.Version, cp.Events = e.Version, nil
		e.Outbox = &OutboxEvent{MerchantID: t.MerchantID, TerminalID: t.TerminalID, Type: typ, At: e.At,
			Data: mustJSON(s.Metadata.TransactionWire(&cp))}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("instore: encode event data: %v", err))
	}
	return b
}

// events is the Service's side of the sequencer: a poke after each commit
// that wrote events, and a broadcast after each numbering.
type events struct {
	mu      sync.Mutex
	poke    chan struct{}
	changed chan struct{}
	hooks   []func()
}

func (ev *events) init() {
	ev.mu.Lock()
	if ev.poke == nil {
		ev.poke, ev.changed = make(chan struct{}, 1), make(chan struct{})
	}
	ev.mu.Unlock()
}

// eventsWritten tells the sequencer a commit wrote events.
func (s *Service) eventsWritten() {
	s.ev.init()
	select {
	case s.ev.poke <- struct{}{}:
	default:
	}
}

// EventsChanged returns a channel closed at the next numbering of events
// (here or, told by internal/cluster, on another node).
func (s *Service) EventsChanged() <-chan struct{} {
	s.ev.init()
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	return s.ev.changed
}

// EventsSequenced wakes the readers of events: new ones are numbered.
func (s *Service) EventsSequenced() {
	s.feed.markStale()
	s.ev.init()
	s.ev.mu.Lock()
	close(s.ev.changed)
	s.ev.changed = make(chan struct{})
	s.ev.mu.Unlock()
}

// OnEventsSequenced registers f to be called after this node numbered
// events (internal/cluster tells the other nodes).
func (s *Service) OnEventsSequenced(f func()) {
	s.ev.mu.Lock()
	s.ev.hooks = append(s.ev.hooks, f)
	s.ev.mu.Unlock()
}

// RunSequencer numbers events until ctx ends: after each commit that wrote
// some, and every interval (what another node wrote, a poke lost in a
// crash). internal/server runs it.
func (s *Service) RunSequencer(ctx context.Context, interval time.Duration) {
	s.ev.init()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ev.poke:
		case <-tick.C:
		}
		for {
			n, err := s.Store.SequenceEvents(ctx, 1000)
			if err != nil {
				if ctx.Err() == nil {
					s.log().Warn("sequence events", "error", err)
				}
				break
			}
			if n == 0 {
				break
			}
			s.EventsSequenced()
			s.ev.mu.Lock()
			hooks := slices.Clone(s.ev.hooks)
			s.ev.mu.Unlock()
			for _, f := range hooks {
				f()
			}
			if n < 1000 {
				break
			}
		}
	}
}

// ListEvents returns the principal's merchant's events after f.After
// (validated by the caller), oldest first.
func (s *Service) ListEvents(ctx context.Context, p *Principal, f EventFilter) ([]EventWire, error) {
	if p.MerchantID == "" {
		return nil, Errorf(EForbidden, "Events belong to a merchant; use a merchant's credentials.")
	}
	f.MerchantID = p.MerchantID
	if f.Limit <= 0 || f.Limit > MaxEventPage {
		f.Limit = MaxEventPage
	}
	evs, err := s.Store.ListEvents(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := make([]EventWire, len(evs))
	for i := range evs {
		out[i] = evs[i].Wire()
	}
	return out, nil
}

// LastEvent returns the number of the principal's merchant's latest event:
// where a stream without a cursor starts.
func (s *Service) LastEvent(ctx context.Context, p *Principal) (int64, error) {
	if p.MerchantID == "" {
		return 0, Errorf(EForbidden, "Events belong to a merchant; use a merchant's credentials.")
	}
	n, err := s.Store.LastEventSeq(ctx, p.MerchantID)
	if err != nil {
		return 0, fmt.Errorf("last event: %w", err)
	}
	return n, nil
}

// CheckEventCursor refuses a cursor (after, given in field: the after
// parameter or Last-Event-ID) beyond the newest numbered event: no event
// has ever had that number, so a page after it would be empty and a stream
// would wait in silence (a cursor of another installation, or of a
// database restored from an older backup). The newest number is read from
// the store, which every node numbers in: an event another node numbered
// just now is in it. A cursor at or below the node's feed needs no read.
func (s *Service) CheckEventCursor(ctx context.Context, p *Principal, after int64, field string) error {
	if p.MerchantID == "" {
		return Errorf(EForbidden, "Events belong to a merchant; use a merchant's credentials.")
	}
	s.feed.mu.Lock()
	known := s.feed.init && after <= s.feed.last
	s.feed.mu.Unlock()
	if known {
		return nil
	}
	top, err := s.Store.LastEventSeq(ctx, "")
	if err != nil {
		return fmt.Errorf("last event: %w", err)
	}
	if after <= top {
		return nil
	}
	mine, err := s.Store.LastEventSeq(ctx, p.MerchantID)
	if err != nil {
		return fmt.Errorf("last event: %w", err)
	}
	msg := fmt.Sprintf("must not be beyond the newest event; your newest is %s: resume after it, or leave the cursor out to start from now", EventID(mine))
	if mine == 0 {
		msg = "must not be beyond the newest event; you have none yet: leave the cursor out to start from now"
	}
	return &Error{Code: EValidation, Detail: fmt.Sprintf("The cursor %s is beyond the newest event: no event has that id.", EventID(after)),
		Fields: []FieldError{{Field: field, Message: msg}}}
}

// recordEvent appends an event that is no stored change's (a terminal's
// session); a failure is logged: the session goes on.
func (s *Service) recordEvent(ctx context.Context, ev OutboxEvent) {
	if err := s.Store.AppendEvents(context.WithoutCancel(ctx), []OutboxEvent{ev}); err != nil {
		s.log().Warn("record event", "type", ev.Type, "error", err)
		return
	}
	s.eventsWritten()
}

// terminalEvent is the event typ of the terminal ID t, as the API shows it
// after the change (online overrides the gateway's view: the session is
// just starting or ending). ok is false for a terminal ID of no merchant.
func (s *Service) terminalEvent(ctx context.Context, t *Terminal, typ string, online *bool) (OutboxEvent, bool) {
	if t == nil || t.MerchantID == "" {
		return OutboxEvent{}, false
	}
	v, err := s.view(ctx, t)
	if err != nil {
		s.log().Warn("event data", "type", typ, "error", err)
		return OutboxEvent{}, false
	}
	if online != nil {
		v.Online = *online
	}
	return OutboxEvent{MerchantID: t.MerchantID, TerminalID: t.TerminalID, Type: typ, At: s.now(), Data: mustJSON(v)}, true
}

// deviceEventCtx returns ctx carrying the terminal.online or
// terminal.offline event of the device serial (unchanged when it is not
// linked to a merchant's terminal ID).
func (s *Service) deviceEventCtx(ctx context.Context, serial, typ string, online bool) (context.Context, bool) {
	t, err := s.Store.TerminalBySerial(ctx, serial)
	if err != nil {
		return ctx, false
	}
	ev, ok := s.terminalEvent(ctx, t, typ, &online)
	if !ok {
		return ctx, false
	}
	return WithOutbox(ctx, ev), true
}

// updateEventCtx returns ctx carrying the update.status event of u (as it
// reads after the change) for the store write that makes the change, for
// merchantID, the merchant of its terminal ID ("": looked up; ctx is
// returned unchanged for a terminal ID of no merchant).
func (s *Service) updateEventCtx(ctx context.Context, u *Update, merchantID string) context.Context {
	if merchantID == "" {
		t, err := s.Store.Terminal(ctx, u.TerminalID)
		if err != nil || t.MerchantID == "" {
			return ctx
		}
		merchantID = t.MerchantID
	}
	return WithOutbox(ctx, OutboxEvent{MerchantID: merchantID, TerminalID: u.TerminalID, Type: EventUpdateStatus,
		At: u.UpdatedAt, Data: mustJSON(u.Wire())})
}

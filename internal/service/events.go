package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/instore-dev/instore"
)

// TransactionEventType is the event type of a timeline event ("" when
// integrators are not told of it): the event each entry is written with,
// and what the deterministic simulation checks the events against.
func TransactionEventType(e instore.TransactionEvent) instore.EventType {
	if t, ok := timelineEventTypes[e.Kind]; ok {
		return t
	}
	if e.StatusAfter != e.StatusBefore && e.StatusAfter != "PENDING" && e.StatusAfter != "" {
		return instore.EventTransactionFinal // every final status, and a later one (REVERSED)
	}
	return ""
}

// timelineEventTypes are the event types of the timeline entries told of
// whatever their statuses.
var timelineEventTypes = map[instore.TimelineKind]instore.EventType{
	instore.EventCreated:         instore.EventTransactionCreated,
	instore.EventAcknowledged:    instore.EventTransactionAcknowledged,
	instore.EventProgress:        instore.EventTransactionProgress,
	instore.EventConfirmed:       instore.EventTransactionConfirmed,
	instore.EventAutoReversed:    instore.EventTransactionAutoReversed,
	instore.EventAuthorization:   instore.EventTransactionAuthorization,
	instore.EventForwarded:       instore.EventTransactionForwarded,
	instore.EventForwardDeclined: instore.EventTransactionForwardDeclined,
	// The terminal's own outcome of a transaction the service had ended:
	// the status stands, but the final transaction now has a result (it
	// settles that no money was taken).
	instore.EventLateResult: instore.EventTransactionFinal,
}

// stamp gives the timeline entries of ch (and of its pair) their
// integrator event: the transaction as the API shows it at that entry's
// version.
func (s *Service) stamp(ch *instore.Change) {
	if ch.Pair != nil {
		s.stamp(ch.Pair)
	}
	t := ch.T
	for i := range ch.Events {
		e := &ch.Events[i]
		typ := TransactionEventType(*e)
		if typ == "" {
			continue
		}
		cp := *t
		cp.Version = e.Version
		e.Outbox = &instore.OutboxEvent{MerchantID: t.MerchantID, TerminalID: t.TerminalID, Type: typ, At: e.At,
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
	// peerTold is when another node last told a horizon above this one's
	// (EventsToldElsewhere): RunSequencer leaves the move to it a while.
	peerTold time.Time
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

// toldHorizon is a store whose told horizon (sqlstore, horizon.go) holds
// for every node of the database: one node's move may be told to the
// others.
type toldHorizon interface {
	Told() int64
	Tell(n int64)
}

// EventsTold returns the store's told horizon, 0 when it keeps none that
// another node may use: what internal/cluster tells the other nodes.
func (s *Service) EventsTold() int64 {
	if h, ok := s.Store.(toldHorizon); ok {
		return h.Told()
	}
	return 0
}

// EventsToldElsewhere is another node's move of the horizon to n (0: not
// known): this node's readers show the events up to it at once, without a
// read of the lock table of their own (EventsSequenced).
func (s *Service) EventsToldElsewhere(n int64) {
	if h, ok := s.Store.(toldHorizon); ok && n > h.Told() {
		h.Tell(n)
		s.ev.mu.Lock()
		s.ev.peerTold = time.Now()
		s.ev.mu.Unlock()
	}
	s.EventsSequenced()
}

// OnEventsSequenced registers f to be called after this node numbered
// events (internal/cluster tells the other nodes).
func (s *Service) OnEventsSequenced(f func()) {
	s.ev.mu.Lock()
	s.ev.hooks = append(s.ev.hooks, f)
	s.ev.mu.Unlock()
}

// sequenceGather is the least time between two of a node's moves of its
// horizon: the commits that wrote events meanwhile are told by one move.
// On PostgreSQL a move reads the lock table, which every event writer of
// every node takes a lock of (sqlstore, horizon.go); a move after every
// commit made about 290 of those reads a second (docs/benchmarks.md,
// "Several nodes, one horizon").
const sequenceGather = 25 * time.Millisecond

// sequenceOwn is how long a node that wrote events leaves the move of the
// horizon to the others while they tell it moves (one node at a time reads
// the lock table): the horizon is the database's, and a move another node
// makes after this node's commit tells its events too. Past it, the node
// moves it itself, so its events are told within it even if no other node
// moves.
const sequenceOwn = 100 * time.Millisecond

// RunSequencer numbers events until ctx ends: after the commits that wrote
// some (gathered: at most one move each sequenceGather; left to another
// node while it tells moves, up to sequenceOwn), and every
// interval on the service's Clock (what another node wrote, a poke lost
// in a crash). internal/server runs it.
func (s *Service) RunSequencer(ctx context.Context, interval time.Duration) {
	s.ev.init()
	var owed <-chan time.Time // this node wrote events not yet told by itself
	lastOwn := time.Now()
	for first := true; ; first = false {
		if !first {
			// Real time, not the Clock: it spaces reads of the database.
			gather := time.NewTimer(sequenceGather)
			select {
			case <-ctx.Done():
				gather.Stop()
				return
			case <-gather.C:
			}
		}
		tick, stop := After(s.clock(), interval)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-s.ev.poke:
			if owed == nil {
				owed = time.After(time.Until(lastOwn.Add(sequenceOwn)))
			}
			if s.peerMoving() {
				stop()
				continue
			}
		case <-owed:
		case <-tick:
		}
		stop()
		owed, lastOwn = nil, time.Now()
		if err := s.SequenceEvents(ctx); err != nil && ctx.Err() == nil {
			s.log().Warn("sequence events", "error", err)
		}
	}
}

// peerMoving reports whether another node told a move of the horizon
// within the last sequenceGather (RunSequencer, sequenceOwn).
func (s *Service) peerMoving() bool {
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	return time.Since(s.ev.peerTold) < sequenceGather
}

// SequenceEvents numbers every committed, unnumbered event in commit
// order, 1000 at a time, and wakes their readers and the hooks
// (OnEventsSequenced) after each batch: RunSequencer's work, once.
func (s *Service) SequenceEvents(ctx context.Context) error {
	for {
		n, err := s.Store.SequenceEvents(ctx, 1000)
		if err != nil || n == 0 {
			return err
		}
		s.EventsSequenced()
		s.ev.mu.Lock()
		hooks := slices.Clone(s.ev.hooks)
		s.ev.mu.Unlock()
		for _, f := range hooks {
			f()
		}
		if n < 1000 {
			return nil
		}
	}
}

// ListEvents returns the principal's merchant's events after f.After
// (validated by the caller), oldest first.
func (s *Service) ListEvents(ctx context.Context, p *instore.Principal, f instore.EventFilter) ([]instore.EventWire, error) {
	if p.MerchantID == "" {
		return nil, instore.Errorf(instore.EForbidden, "Events belong to a merchant; use a merchant's credentials.")
	}
	f.MerchantID = p.MerchantID
	if f.Limit <= 0 || f.Limit > instore.MaxEventPage {
		f.Limit = instore.MaxEventPage
	}
	evs, err := s.Store.ListEvents(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := make([]instore.EventWire, len(evs))
	for i := range evs {
		out[i] = evs[i].Wire()
	}
	return out, nil
}

// LastEvent returns the number of the principal's merchant's latest event:
// where a stream without a cursor starts.
func (s *Service) LastEvent(ctx context.Context, p *instore.Principal) (int64, error) {
	if p.MerchantID == "" {
		return 0, instore.Errorf(instore.EForbidden, "Events belong to a merchant; use a merchant's credentials.")
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
func (s *Service) CheckEventCursor(ctx context.Context, p *instore.Principal, after int64, field string) error {
	if p.MerchantID == "" {
		return instore.Errorf(instore.EForbidden, "Events belong to a merchant; use a merchant's credentials.")
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
	if after > top {
		// Told by another node a moment ago: this node's horizon may not
		// have passed it yet (sqlstore, horizon.go).
		if _, err := s.Store.SequenceEvents(ctx, 0); err != nil {
			return fmt.Errorf("last event: %w", err)
		}
		if top, err = s.Store.LastEventSeq(ctx, ""); err != nil {
			return fmt.Errorf("last event: %w", err)
		}
	}
	if after <= top {
		return nil
	}
	mine, err := s.Store.LastEventSeq(ctx, p.MerchantID)
	if err != nil {
		return fmt.Errorf("last event: %w", err)
	}
	msg := fmt.Sprintf("must not be beyond the newest event; your newest is %s: resume after it, or leave the cursor out to start from now", instore.EventID(mine))
	if mine == 0 {
		msg = "must not be beyond the newest event; you have none yet: leave the cursor out to start from now"
	}
	return &instore.Error{Code: instore.EValidation, Detail: fmt.Sprintf("The cursor %s is beyond the newest event: no event has that id.", instore.EventID(after)),
		Fields: []instore.FieldError{{Field: field, Message: msg}}}
}

// recordEvent appends an event that is no stored change's (a terminal's
// session); a failure is logged: the session goes on.
func (s *Service) recordEvent(ctx context.Context, ev instore.OutboxEvent) {
	if err := s.Store.AppendEvents(context.WithoutCancel(ctx), []instore.OutboxEvent{ev}); err != nil {
		s.log().Warn("record event", "type", ev.Type, "error", err)
		return
	}
	s.eventsWritten()
}

// terminalEvent is the event typ of the terminal ID t, as the API shows it
// after the change (online overrides the gateway's view). ok is false for
// a terminal ID of no merchant.
func (s *Service) terminalEvent(ctx context.Context, t *instore.Terminal, typ instore.EventType, online *bool) (instore.OutboxEvent, bool) {
	if t == nil || t.MerchantID == "" {
		return instore.OutboxEvent{}, false
	}
	v, err := s.viewRead(ctx, t)
	if err != nil {
		s.log().Warn("event data", "type", typ, "error", err)
		return instore.OutboxEvent{}, false
	}
	if online != nil {
		v.Online = *online
	}
	return s.terminalEventOf(t, typ, v), true
}

// terminalEventOf is the event typ of the terminal ID t showing v.
func (s *Service) terminalEventOf(t *instore.Terminal, typ instore.EventType, v *instore.TerminalView) instore.OutboxEvent {
	return instore.OutboxEvent{MerchantID: t.MerchantID, TerminalID: t.TerminalID, Type: typ, At: s.now(), Data: mustJSON(v)}
}

// sessionEvent returns the terminal.online or terminal.offline event
// (typ) of a device's session as DeviceSessions read it: its terminal ID
// as the API shows it with the session just started (online) or ended;
// none when the terminal ID is no merchant's.
func (s *Service) sessionEvent(ds *instore.DeviceSession, typ instore.EventType, online bool) []instore.OutboxEvent {
	if ds.Terminal.MerchantID == "" {
		return nil
	}
	v := s.viewOf(ds.Terminal, ds.Device, ds.ActiveID, ds.Update, ds.BatchID != "")
	v.Online = online
	return []instore.OutboxEvent{s.terminalEventOf(ds.Terminal, typ, v)}
}

// updateEvent returns the update.status event of u (as it reads after the
// change) for the store write that makes the change, for merchantID, the
// merchant of its terminal ID ("": looked up; none for a terminal ID of no
// merchant).
func (s *Service) updateEvent(ctx context.Context, u *instore.Update, merchantID string) []instore.OutboxEvent {
	if merchantID == "" {
		t, err := s.Store.Terminal(ctx, u.TerminalID)
		if err != nil || t.MerchantID == "" {
			return nil
		}
		merchantID = t.MerchantID
	}
	return []instore.OutboxEvent{{MerchantID: merchantID, TerminalID: u.TerminalID, Type: instore.EventUpdateStatus,
		At: u.UpdatedAt, Data: mustJSON(u.Wire())}}
}

package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/instore-dev/instore"
)

// The event streams of a node share one feed: the window of the latest
// numbered events of every merchant, read from the store once per
// numbering (not once per stream) and each encoded once as its stream
// message (Service.EncodeEvent: the HTTP adapter's server-sent message),
// which every stream that wants it writes as it is.
// A stream whose position is older than the window (a replay after
// Last-Event-ID) reads the store itself until it reaches the window.
//
// The window is whole: it holds every numbered event in (first, last], in
// order. Numbers are given in commit order (SequenceEvents), so reading
// "after last" never skips an event that commits later with a lower
// number, and a stream that takes from it the events after its position
// gets them with no gap and no repeat.

// feedSize bounds the window (events of all merchants).
var feedSize = 4096

// StreamMessage is one event of a stream, encoded: Seq its number, Text
// the event as Service.EncodeEvent wrote it (the server-sent message: id:,
// event:, data: and the blank line).
type StreamMessage struct {
	Seq  int64
	Text []byte
}

type feedEvent struct {
	seq                    int64
	merchantID, terminalID string
	typ                    instore.EventType
	text                   []byte
}

type feed struct {
	mu sync.Mutex
	// init: first and last were read; stale: events may have been
	// numbered since the last read.
	init, stale bool
	first, last int64
	events      []feedEvent
}

// markStale says events were numbered (here or on another node).
func (f *feed) markStale() {
	f.mu.Lock()
	f.stale = true
	f.mu.Unlock()
}

// refreshFeed reads the events numbered after the window into it (all of
// them, in pages) when it may be stale; f.mu is held.
func (s *Service) refreshFeed(ctx context.Context, f *feed) error {
	if !f.init {
		top, err := s.Store.LastEventSeq(ctx, "")
		if err != nil {
			return err
		}
		f.first, f.last, f.init = top, top, true
		f.stale = true // what was numbered while it was read
	}
	if !f.stale {
		return nil
	}
	f.stale = false
	// Far behind (no stream read the feed for a while): the window starts
	// again just below the top instead of reading everything missed while
	// every stream waits; streams older than it replay from the store.
	top, err := s.Store.LastEventSeq(ctx, "")
	if err != nil {
		f.stale = true
		return err
	}
	if top-f.last > int64(feedSize) {
		f.events = f.events[:0]
		f.first, f.last = top-int64(feedSize), top-int64(feedSize)
	}
	for {
		evs, err := s.Store.ListEvents(ctx, instore.EventFilter{After: f.last, Limit: instore.MaxEventPage})
		if err != nil {
			f.stale = true
			return err
		}
		for i := range evs {
			e := &evs[i]
			f.events = append(f.events, feedEvent{seq: e.Seq, merchantID: e.MerchantID, typ: e.Type,
				terminalID: e.TerminalID, text: s.encodeEvent(e)})
			f.last = e.Seq
		}
		if over := len(f.events) - feedSize; over > 0 {
			f.first = f.events[over-1].seq
			f.events = slices.Delete(f.events, 0, over)
		}
		if len(evs) < instore.MaxEventPage {
			return nil
		}
	}
}

// StreamEvents returns the next messages of the principal's stream of
// filter f (f.After: its position), at most MaxEventPage, oldest first,
// and the stream's new position: the number up to which it has now been
// given every event of its filter (past the last message when the rest
// were other merchants' or filtered out). They come from this node's feed
// when it covers the position, else from the store (a replay). recheck
// reads the store for new numbers even without a wake-up (EventsChanged),
// in case one was lost.
func (s *Service) StreamEvents(ctx context.Context, p *instore.Principal, f instore.EventFilter, recheck bool) ([]StreamMessage, int64, error) {
	if p.MerchantID == "" {
		return nil, 0, instore.Errorf(instore.EForbidden, "Events belong to a merchant; use a merchant's credentials.")
	}
	f.MerchantID = p.MerchantID
	if f.Limit <= 0 || f.Limit > instore.MaxEventPage {
		f.Limit = instore.MaxEventPage
	}
	fd := &s.feed
	fd.mu.Lock()
	if recheck {
		fd.stale = true
	}
	if err := s.refreshFeed(ctx, fd); err != nil {
		fd.mu.Unlock()
		return nil, f.After, fmt.Errorf("event feed: %w", err)
	}
	if f.After >= fd.first {
		var out []StreamMessage
		pos := f.After
		i, _ := slices.BinarySearchFunc(fd.events, f.After+1, func(e feedEvent, seq int64) int {
			return cmp.Compare(e.seq, seq)
		})
		for ; i < len(fd.events) && len(out) < f.Limit; i++ {
			e := &fd.events[i]
			pos = e.seq
			if e.merchantID != f.MerchantID || f.TerminalID != "" && e.terminalID != f.TerminalID ||
				len(f.Types) > 0 && !slices.Contains(f.Types, e.typ) {
				continue
			}
			out = append(out, StreamMessage{Seq: e.seq, Text: e.text})
		}
		if i == len(fd.events) {
			pos = max(pos, fd.last)
		}
		fd.mu.Unlock()
		return out, pos, nil
	}
	// Older than the window: a replay from the store. Everything numbered
	// up to the window's last was committed before this read, so a page
	// that is not full brings the stream up to there.
	seen := fd.last
	fd.mu.Unlock()
	evs, err := s.Store.ListEvents(ctx, f)
	if err != nil {
		return nil, f.After, fmt.Errorf("list events: %w", err)
	}
	out := make([]StreamMessage, len(evs))
	pos := f.After
	for i := range evs {
		out[i] = StreamMessage{Seq: evs[i].Seq, Text: s.encodeEvent(&evs[i])}
		pos = evs[i].Seq
	}
	if len(evs) < f.Limit {
		pos = max(pos, seen)
	}
	return out, pos, nil
}

// encodeEvent is e as a stream writes it: EncodeEvent, or its JSON
// (EventWire) when none is set.
func (s *Service) encodeEvent(e *instore.StoredEvent) []byte {
	if s.EncodeEvent != nil {
		return s.EncodeEvent(e)
	}
	return mustJSON(e.Wire())
}

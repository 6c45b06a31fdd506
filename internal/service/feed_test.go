package service_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/onlineapi"
	"github.com/instore-dev/instore/internal/service"
)

// TestStreamEventsFromTheFeed: streams of two merchants, with and without
// filters, from positions inside and before the node's window of events,
// while events are numbered in batches and the window (10 events here)
// drops the oldest: each stream gets exactly the store's list of its
// events, in order, once each, every message encoded as the API shows the
// event; a stream of a quiet merchant moves its position with the window
// instead of reading the store each time.
func TestStreamEventsFromTheFeed(t *testing.T) {
	defer service.SetFeedSize(10)()
	f := newFixture(t, "FULL", "SN-FEED")
	f.svc.EncodeEvent = onlineapi.EncodeStreamMessage
	ctx := context.Background()
	a := &instore.Principal{MerchantID: f.merchant}
	b := &instore.Principal{MerchantID: "mer_other"}
	appendN := func(n int, at int) {
		t.Helper()
		var evs []instore.OutboxEvent
		for i := range n {
			m, typ, term := f.merchant, instore.EventTerminalOnline, "10000001"
			if (at+i)%3 == 0 {
				m = "mer_other"
			}
			if (at+i)%2 == 0 {
				typ, term = instore.EventTerminalOffline, "10000002"
			}
			evs = append(evs, instore.OutboxEvent{MerchantID: m, Type: typ, TerminalID: term, At: time.Now(),
				Data: []byte(fmt.Sprintf(`{"i": %d}`, at+i))})
		}
		if err := f.st.AppendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.SequenceEvents(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		f.svc.EventsSequenced()
	}
	type stream struct {
		p    *instore.Principal
		f    instore.EventFilter
		got  []int64
		name string
	}
	appendN(4, 0) // before the window starts
	streams := []*stream{
		{p: a, name: "a from the start"},
		{p: b, name: "b from the start"},
		{p: a, f: instore.EventFilter{Types: []instore.EventType{instore.EventTerminalOffline}}, name: "a offline"},
		{p: a, f: instore.EventFilter{TerminalID: "10000001"}, name: "a terminal"},
	}
	pull := func(s *stream) {
		t.Helper()
		for {
			msgs, pos, err := f.svc.StreamEvents(ctx, s.p, s.f, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				s.got = append(s.got, m.Seq)
				id := instore.EventID(m.Seq)
				if !bytes.HasPrefix(m.Text, []byte("id: "+id+"\nevent: ")) || !bytes.HasSuffix(m.Text, []byte("}\n\n")) ||
					!bytes.Contains(m.Text, []byte(`"id":"`+id+`"`)) {
					t.Fatalf("%s: message %q", s.name, m.Text)
				}
			}
			if pos < s.f.After || len(msgs) > 0 && pos < msgs[len(msgs)-1].Seq {
				t.Fatalf("%s: position %d after %d", s.name, pos, s.f.After)
			}
			s.f.After = pos
			if len(msgs) == 0 {
				return
			}
		}
	}
	for round := range 8 {
		appendN(3+round*2, 100*(round+1)) // 3..17 events: some batches overflow the window
		for i, s := range streams {
			if (round+i)%3 != 2 { // some streams fall behind the window for a while
				pull(s)
			}
		}
	}
	for _, s := range streams {
		pull(s)
		f0 := s.f
		f0.After, f0.Limit = 0, 1000
		f0.MerchantID = s.p.MerchantID
		want, err := f.st.ListEvents(ctx, f0)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, e := range want {
			seqs = append(seqs, e.Seq)
		}
		if !slices.Equal(s.got, seqs) {
			t.Errorf("%s: %v, want %v", s.name, s.got, seqs)
		}
	}
	// A quiet merchant's stream moves with the window.
	q := &stream{p: &instore.Principal{MerchantID: "mer_quiet"}, name: "quiet"}
	pull(q)
	last, _ := f.st.LastEventSeq(ctx, "")
	if q.f.After != last || len(q.got) != 0 {
		t.Errorf("quiet stream at %d with %v, want at %d with nothing", q.f.After, q.got, last)
	}
}

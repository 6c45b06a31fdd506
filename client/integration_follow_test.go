package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// eventsOf pages through the events of q until the transaction ref has
// its transaction.final event (the sequencer numbers events just after
// their commit), and returns ref's events.
func eventsOf(t *testing.T, c *client.Client, q client.EventQuery, ref string) []client.Event {
	t.Helper()
	var out []client.Event
	testwait.For(t, "the transaction.final event of "+ref, func() bool {
		page, err := c.Events(t.Context(), q)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if len(page.Events) > q.Limit && q.Limit > 0 {
			t.Fatalf("Events with limit %d gave %d", q.Limit, len(page.Events))
		}
		for _, ev := range page.Events {
			if !strings.HasPrefix(string(ev.Type), "transaction.") {
				continue
			}
			tx, err := ev.Transaction()
			if err != nil {
				t.Fatalf("event %s: %v", ev.ID, err)
			}
			if tx.OnlineAPIRefID == ref {
				out = append(out, ev)
				if ev.Type == instore.EventTransactionFinal {
					return true
				}
			}
		}
		if page.NextCursor != "" {
			q.After = page.NextCursor
		}
		return false
	})
	return out
}

// checkPurchaseEvents checks the events of an approved purchase:
// transaction.created first, transaction.final (APPROVED) last, in
// increasing id order, each once, the data at increasing versions.
func checkPurchaseEvents(t *testing.T, ref string, evs []client.Event) {
	t.Helper()
	var types []instore.EventType
	var version int64
	for i, ev := range evs {
		types = append(types, ev.Type)
		if i > 0 && ev.ID <= evs[i-1].ID {
			t.Errorf("event %s after %s: ids do not increase", ev.ID, evs[i-1].ID)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.CreatedAt); err != nil {
			t.Errorf("event %s createdAt %q: %v", ev.ID, ev.CreatedAt, err)
		}
		tx, err := ev.Transaction()
		if err != nil {
			t.Fatalf("event %s: %v", ev.ID, err)
		}
		if tx.Version <= version {
			t.Errorf("event %s (%s) shows version %d after %d", ev.ID, ev.Type, tx.Version, version)
		}
		version = tx.Version
		if ev.Type == instore.EventTransactionFinal && !tx.Approved() {
			t.Errorf("transaction.final of %s shows %s, want APPROVED", ref, tx.Status)
		}
	}
	if len(types) < 3 || types[0] != instore.EventTransactionCreated || types[len(types)-1] != instore.EventTransactionFinal ||
		!slices.Contains(types, instore.EventTransactionAcknowledged) {
		t.Errorf("events of %s = %v, want transaction.created, transaction.acknowledged ... transaction.final", ref, types)
	}
}

// cutStream cuts the first event stream it carries in the middle of its
// third message, as a broken connection does.
type cutStream struct {
	mu    sync.Mutex
	cut   bool
	reqs  []*http.Request
	inner http.RoundTripper
}

func (c *cutStream) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.inner.RoundTrip(r)
	if err != nil || r.Header.Get("Accept") != "text/event-stream" {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
	if !c.cut {
		c.cut = true
		resp.Body = &cutBody{rc: resp.Body}
	}
	return resp, nil
}

type cutBody struct {
	rc   io.ReadCloser
	seen []byte
	sent int
	done bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	for {
		if b.done {
			if b.sent == len(b.seen) {
				return 0, errors.New("connection reset by peer")
			}
			n := copy(p, b.seen[b.sent:])
			b.sent += n
			return n, nil
		}
		if b.sent < len(b.seen) {
			n := copy(p, b.seen[b.sent:])
			b.sent += n
			return n, nil
		}
		buf := make([]byte, 4096)
		n, err := b.rc.Read(buf)
		b.seen = append(b.seen, buf[:n]...)
		// The third message is cut after its id line and half its data.
		if i := nthIndex(string(b.seen), "id: evt_", 3); i >= 0 {
			if j := strings.Index(string(b.seen[i:]), "data: "); j >= 0 {
				b.seen, b.done = b.seen[:i+j+20], true
				continue
			}
		}
		if err != nil {
			return 0, err
		}
	}
}

func (b *cutBody) Close() error { return b.rc.Close() }

func nthIndex(s, sub string, n int) int {
	at := -1
	for range n {
		i := strings.Index(s[at+1:], sub)
		if i < 0 {
			return -1
		}
		at += 1 + i
	}
	return at
}

// TestIntegrationFollowEvents follows a purchase's events on the stream of
// the real service, through a stream broken in the middle of a message:
// the client resumes with Last-Event-ID and yields every event once.
func TestIntegrationFollowEvents(t *testing.T) {
	e := startDemo(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := e.terms[0]
	// The stream is no JSON answer the validating transport could read
	// whole: this client goes over the wire as it is.
	cut := &cutStream{inner: http.DefaultTransport}
	c := e.newClient(t, func(cfg *client.Config) { cfg.HTTPClient = &http.Client{Transport: cut} })

	// Where the events are now: the stream starts after it.
	var cursor string
	for {
		page := mustOK[*client.EventPage](t, "Events")(e.c.Events(ctx, client.EventQuery{After: cursor}))
		if len(page.Events) == 0 {
			break
		}
		cursor = page.NextCursor
	}
	type got struct {
		ev  client.Event
		err error
	}
	evs := make(chan got)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer close(evs)
		for ev, err := range c.FollowEvents(fctx, client.EventQuery{Types: []instore.EventType{
			instore.EventTransactionCreated, instore.EventTransactionAcknowledged, instore.EventTransactionProgress, instore.EventTransactionFinal,
		}, TerminalID: t0, After: cursor}) {
			select {
			case evs <- got{ev, err}:
			case <-fctx.Done():
				return
			}
		}
	}()
	tx := payFinal(t, e.c, client.PurchaseParams{TerminalID: t0, Amount: 1250, Currency: "SEK"})
	var mine []client.Event
	seen := map[string]bool{}
	for g := range evs {
		if g.err != nil {
			t.Fatalf("FollowEvents: %v", g.err)
		}
		if seen[g.ev.ID] {
			t.Errorf("event %s yielded twice", g.ev.ID)
		}
		seen[g.ev.ID] = true
		if tx2, err := g.ev.Transaction(); err != nil || tx2.OnlineAPIRefID != tx.OnlineAPIRefID {
			t.Fatalf("event %s (%s): %v, not of %s", g.ev.ID, g.ev.Type, err, tx.OnlineAPIRefID)
		}
		mine = append(mine, g.ev)
		if g.ev.Type == instore.EventTransactionFinal {
			break
		}
	}
	stop()
	checkPurchaseEvents(t, tx.OnlineAPIRefID, mine)
	// The same events as the pages show.
	paged := eventsOf(t, e.c, client.EventQuery{TerminalID: t0, After: cursor}, tx.OnlineAPIRefID)
	if len(paged) != len(mine) {
		t.Errorf("followed %d events, the pages show %d", len(mine), len(paged))
	}
	for i := range min(len(paged), len(mine)) {
		if paged[i].ID != mine[i].ID || string(paged[i].Data) != string(mine[i].Data) {
			t.Errorf("event %d: followed %s %s, paged %s %s", i, mine[i].ID, mine[i].Type, paged[i].ID, paged[i].Type)
		}
	}
	cut.mu.Lock()
	defer cut.mu.Unlock()
	if len(cut.reqs) < 2 || len(mine) < 3 {
		t.Fatalf("stream connections = %d, events %d; want the cut stream resumed", len(cut.reqs), len(mine))
	}
	if got := cut.reqs[1].Header.Get("Last-Event-ID"); got != mine[1].ID {
		t.Errorf("resumed with Last-Event-ID %q, want %q (the last whole message before the cut)", got, mine[1].ID)
	}
}

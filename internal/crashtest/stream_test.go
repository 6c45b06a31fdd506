package crashtest

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/instore-dev/instore/client"
)

// streamFollower reads the merchant's event stream (GET /events as
// server-sent events) through every kill and restart of the server, as an
// integrator's back office does: from the first event on, reconnecting
// with Last-Event-ID (the last event it was dispatched whole) whenever the
// stream breaks. It keeps every id it was given, repeats included.
type streamFollower struct {
	mu         sync.Mutex
	ids        []string
	reconnects int
	done       chan struct{}
}

func (e *crashEnv) follow(ctx context.Context) *streamFollower {
	f := &streamFollower{done: make(chan struct{})}
	hc := &http.Client{}
	go func() {
		defer close(f.done)
		last := "evt_0000000000000000"
		for ctx.Err() == nil {
			req, err := e.ecr.api.Request(ctx, "GET", "/in-store/api/v1/events", nil, map[string]string{"Accept": "text/event-stream", "Last-Event-ID": last})
			if err != nil {
				return
			}
			resp, err := hc.Do(req)
			if err == nil && resp.StatusCode == http.StatusOK {
				sr := client.NewEventStreamReader(resp.Body)
				for {
					m, err := sr.Next()
					if err != nil {
						break
					}
					if m.ID == "" {
						continue
					}
					// Dispatched whole: now it counts, and the stream
					// resumes after it.
					f.mu.Lock()
					f.ids = append(f.ids, m.ID)
					f.mu.Unlock()
					last = m.ID
				}
			}
			if resp != nil {
				resp.Body.Close()
			}
			f.mu.Lock()
			f.reconnects++
			f.mu.Unlock()
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	return f
}

// eventIDs are the ids of every event the JSON pages list, in order.
func (e *crashEnv) eventIDs(ctx context.Context) []string {
	var ids []string
	for _, ev := range e.listEvents(ctx, "") {
		ids = append(ids, ev.ID)
	}
	return ids
}

// checkStream compares what the follower was given with the events the
// JSON pages list: the same ids, in the same order, none missing, none
// twice, although the server was killed under it.
func (e *crashEnv) checkStream(ctx context.Context, f *streamFollower, stop context.CancelFunc) {
	t := e.t
	list := e.eventIDs(ctx)
	// The stream may be a moment behind the pages.
	for start := time.Now(); ; sleep(ctx, 50*time.Millisecond) {
		f.mu.Lock()
		n := len(f.ids)
		f.mu.Unlock()
		if n >= len(list) || time.Since(start) > 15*time.Second {
			break
		}
	}
	stop()
	<-f.done
	// An event committed after the pages were read (a session's end or
	// start, a sweep) may have reached the stream before it stopped: the
	// stream must be the pages listed now, up to its last event, and at
	// least what they listed before.
	if now := e.eventIDs(ctx); len(now) >= len(f.ids) && len(f.ids) >= len(list) {
		list = now[:len(f.ids)]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.ids, list) {
		missing, twice := 0, 0
		seen := map[string]int{}
		for _, id := range f.ids {
			seen[id]++
			if seen[id] == 2 {
				twice++
			}
		}
		for _, id := range list {
			if seen[id] == 0 {
				missing++
			}
		}
		t.Errorf("%s: the stream followed through the kills gave %d events (%d missing, %d twice), the pages list %d",
			e.backend(), len(f.ids), missing, twice, len(list))
		return
	}
	t.Logf("%s: the stream followed through the kills (%d reconnects) gave the %d events the pages list, in order, once each",
		e.backend(), f.reconnects, len(list))
}

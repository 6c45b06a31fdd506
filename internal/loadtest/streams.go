package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/instore-dev/instore/client"
)

// followers are M followers of the event stream, started live at each
// window of the side with consumers and stopped at its end; each checks
// that its events come in order without a repeat.
type followers struct {
	e      *env
	n      int
	client *http.Client

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	events  atomic.Int64
	errors  atomic.Int64
	bad     atomic.Int64 // out of order or repeated within a connection
	lastErr atomic.Pointer[string]
}

func (e *env) newFollowers(n int) *followers {
	return &followers{e: e, n: n, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n + 1}}}
}

// start connects the followers and returns once each has its answer's
// headers (it is live).
func (f *followers) start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	ready := make(chan error, f.n)
	for range f.n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow(ctx, ready)
		}()
	}
	for range f.n {
		if err := <-ready; err != nil {
			f.stop()
			return err
		}
	}
	return nil
}

func (f *followers) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.cancel = nil
}

func (f *followers) follow(ctx context.Context, ready chan<- error) {
	req, err := http.NewRequestWithContext(ctx, "GET", f.e.srv.online+"/in-store/api/v1/events/stream", nil)
	if err != nil {
		ready <- err
		return
	}
	f.e.authorize(req.Header)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.client.Do(req)
	if err != nil {
		ready <- fmt.Errorf("event stream: %w", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		ready <- fmt.Errorf("event stream: HTTP %d %s", resp.StatusCode, b)
		return
	}
	ready <- nil
	last := ""
	err = readSSE(resp.Body, func(id, _ string, _ []byte) {
		if id <= last {
			f.bad.Add(1)
		}
		last = id
		f.events.Add(1)
	})
	if err != nil && ctx.Err() == nil {
		f.errors.Add(1)
		msg := err.Error()
		f.lastErr.Store(&msg)
	}
}

// readSSE reads server-sent events with the SDK's reader until the
// stream ends, calling fn with each message's id, event and data.
func readSSE(r io.Reader, fn func(id, event string, data []byte)) error {
	sr := client.NewEventStreamReader(r)
	for {
		m, err := sr.Next()
		if err == io.EOF {
			return io.ErrUnexpectedEOF // the service never ends a stream
		}
		if err != nil {
			return err
		}
		if m.HasData {
			fn(m.ID, m.Event, []byte(m.Data))
		}
	}
}

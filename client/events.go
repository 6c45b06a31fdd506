package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// Event is an event for integrators as the service shows it in a page of
// GET /in-store/api/v1/events, a message of the event stream and a
// webhook's body (instore.EventWire): its id (evt_ and 16 digits, sorting
// in commit order), type (instore.EventTransactionFinal...), createdAt
// and data, the resource as the API showed it right after the change.
// Transaction, Terminal and PrintJob decode the data.
type Event struct {
	instore.EventWire
}

// Transaction decodes the data of a transaction.* event.
func (e Event) Transaction() (*Transaction, error) {
	return decodeAs[Transaction](e, "transaction.")
}

// Terminal decodes the data of a terminal.* event: the terminal ID as the
// Online API shows it after the change.
func (e Event) Terminal() (*Terminal, error) {
	return decodeAs[Terminal](e, "terminal.")
}

// PrintJob decodes the data of a print.* event (print.final).
func (e Event) PrintJob() (*PrintJob, error) {
	return decodeAs[PrintJob](e, "print.")
}

// Decode decodes the event's data into v, whatever its type (for
// update.status, or a type newer than this SDK).
func (e Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("client: event %s (%s) has no data", e.ID, e.Type)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("client: event %s (%s): decode data: %w", e.ID, e.Type, err)
	}
	return nil
}

func (e Event) decode(prefix string, v any) error {
	if !strings.HasPrefix(string(e.Type), prefix) {
		return fmt.Errorf("client: event %s is a %s event, not a %s* one", e.ID, e.Type, prefix)
	}
	return e.Decode(v)
}

// decodeAs is decode of an event whose data is one T.
func decodeAs[T any](e Event, prefix string) (*T, error) {
	var v T
	if err := e.decode(prefix, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// EventQuery selects events for Events and FollowEvents. Zero members are
// not sent.
type EventQuery struct {
	// Types are the event types wanted (instore.EventTransactionFinal...);
	// none: every type.
	Types []instore.EventType
	// TerminalID keeps the events of one terminal ID.
	TerminalID string
	// After is an event id: only later events. For Events, a page's
	// NextCursor; for FollowEvents, where the stream starts (without it,
	// at the events numbered from now on).
	After string
	// Limit is Events's page size, 1 to 500 (default 100);
	// FollowEvents ignores it.
	Limit int
}

func (q EventQuery) query(page bool) url.Values {
	v := url.Values{}
	if len(q.Types) > 0 {
		v.Set("types", instore.JoinEventTypes(q.Types, ","))
	}
	if q.TerminalID != "" {
		v.Set("terminalId", q.TerminalID)
	}
	if page {
		if q.After != "" {
			v.Set("after", q.After)
		}
		if q.Limit != 0 {
			v.Set("limit", strconv.Itoa(q.Limit))
		}
	}
	return v
}

// EventPage is one page of events, oldest first.
type EventPage struct {
	Events []Event `json:"events"`
	// NextCursor is the After of the next page: the id of the page's last
	// event, or the query's After when the page is empty; "" when the
	// page is empty and no After was given. Unlike a transaction listing
	// it is never "the end": events keep coming, so poll with it.
	NextCursor string `json:"nextCursor"`
}

// Events returns one page of the merchant's events after q.After, oldest
// first (GET /in-store/api/v1/events). Continue with q.After =
// page.NextCursor; FollowEvents receives them as they happen instead.
// Events are kept at least 30 days. Errors: validation, WP03, forbidden
// (credentials of no merchant).
func (c *Client) Events(ctx context.Context, q EventQuery, opts ...CallOption) (*EventPage, error) {
	var page EventPage
	if err := c.get(ctx, Prefix+"/events", Prefix+"/events", q.query(true), &page, opts); err != nil {
		return nil, err
	}
	if page.Events == nil {
		page.Events = []Event{}
	}
	return &page, nil
}

// streamIdle is how long a stream may stay silent before the client takes
// it for broken and reconnects: the service sends a comment line every 15
// seconds.
var streamIdle = 45 * time.Second

// FollowEvents receives the merchant's events as they happen, over the
// server-sent event stream of GET /in-store/api/v1/events/stream, oldest first:
// from q.After when given (the events since, then live), else from now
// on. Without q.After the cursor is the first event yielded: a stream
// that breaks before any event arrives resumes from the new connection's
// now. Pass After (a cursor the program stored, or a page's NextCursor)
// to follow with no gap across restarts of the program too.
//
// When the stream breaks (a network error, the service restarting, no
// data for 45 seconds, a 5xx or 429 answer) it reconnects on its own
// after a backoff (the service's retry advice, doubling with each failure
// in a row up to MaxRetryDelay, with jitter), resuming with Last-Event-ID
// after the last event it yielded: no event is lost and none is yielded
// twice. Reconnections show in Config.Logger; they are not yielded.
//
// It yields an error, and ends, only when following cannot go on: ctx
// ended (the error wraps ctx's cause), or the service refused the request
// (a 4xx problem such as validation or forbidden, an answer that is not
// an event stream, an event that does not decode). Breaking out of the
// loop closes the stream.
//
//	for ev, err := range c.FollowEvents(ctx, client.EventQuery{Types: []instore.EventType{instore.EventTransactionFinal}}) {
//		if err != nil {
//			return err
//		}
//		tx, err := ev.Transaction()
//		...
//	}
//
// Config.Timeout does not bound the stream, but an http.Client Timeout
// (Config.HTTPClient) does: leave it zero for a client that follows
// events.
func (c *Client) FollowEvents(ctx context.Context, q EventQuery) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		f := follower{c: c, q: q, last: q.After, lastSeq: -1}
		if q.After != "" {
			n, ok := instore.ParseEventID(q.After)
			if !ok {
				yield(Event{}, fmt.Errorf("client: follow events: after %q is not an event id (evt_ and its digits, or its number)", q.After))
				return
			}
			f.lastSeq = n
		}
		failures := 0
		for {
			got, err := f.connect(ctx, yield)
			if errors.Is(err, errStopped) {
				return
			}
			if ctx.Err() != nil {
				yield(Event{}, fmt.Errorf("client: follow events: %w", context.Cause(ctx)))
				return
			}
			var e *Error
			var ca *UnknownCAError // no retry trusts the CA: say so at once
			if errors.As(err, &e) && !e.retryable() || errors.Is(err, errNotStream) || errors.Is(err, errBadEvent) || errors.As(err, &ca) {
				yield(Event{}, err)
				return
			}
			if got {
				failures = 0
			}
			failures++
			delay := f.backoff(failures)
			if errors.As(err, &e) && e.RetryAfter > delay {
				delay = min(e.RetryAfter, MaxRetryAfter)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Event{}, fmt.Errorf("client: follow events: %w", context.Cause(ctx)))
				return
			case <-t.C:
			}
		}
	}
}

var (
	errStopped   = errors.New("stopped by the caller")
	errNotStream = errors.New("the answer is not an event stream")
	errBadEvent  = errors.New("bad event")
)

// follower is the state of FollowEvents across its connections.
type follower struct {
	c *Client
	q EventQuery
	// last is the id of the last event yielded (the cursor), lastSeq its
	// number (-1: none).
	last    string
	lastSeq int64
	// retry is the service's reconnection advice (0: none).
	retry    time.Duration
	reauthed bool
}

// backoff is the delay before reconnection n (1-based) of a run of
// failures: from the service's retry advice (else Config.RetryDelay),
// doubling, capped at MaxRetryDelay, with equal jitter.
func (f *follower) backoff(n int) time.Duration {
	base := f.retry
	if base <= 0 {
		base = f.c.retryDelay
	}
	d := base << min(n-1, 16)
	if d > MaxRetryDelay || d <= 0 {
		d = MaxRetryDelay
	}
	return d/2 + rand.N(d/2+1)
}

// connect opens one stream and yields its events until it ends. got
// reports whether the connection was a stream that delivered something
// (a message or a ping), which resets the backoff. errStopped: the caller
// stopped.
func (f *follower) connect(ctx context.Context, yield func(Event, error) bool) (got bool, err error) {
	c := f.c
	cl := call{s: c.online, method: http.MethodGet, path: Prefix + "/events/stream", route: Prefix + "/events/stream"}
	if cl.s == nil {
		return false, fmt.Errorf("client: GET %s: no Online API base URL configured: %w", cl.route, errNotStream)
	}
	tok, err := cl.s.tokens.token(ctx, c, cl.s)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := cl.s.base + cl.path
	if qs := f.q.query(false).Encode(); qs != "" {
		u += "?" + qs
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("client: GET %s: %w: %w", cl.route, err, errNotStream)
	}
	h := req.Header
	h.Set("Accept", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("User-Agent", c.userAgent)
	h.Set("Authorization", "Bearer "+tok)
	h.Set("Ocp-Apim-Subscription-Key", cl.s.key)
	if f.last != "" {
		h.Set("Last-Event-ID", f.last)
	}
	// The connection must answer within the attempt timeout; after that
	// the stream is bounded by its silence only.
	idle := time.AfterFunc(c.timeout, cancel)
	defer idle.Stop()
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		err = withCAHint(err)
		c.log(ctx, cl, 0, time.Since(start), "", 1, err)
		return false, fmt.Errorf("client: GET %s: %w", cl.route, err)
	}
	defer resp.Body.Close()
	c.log(ctx, cl, resp.StatusCode, time.Since(start), resp.Header.Get("X-Request-Id"), 1, nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		e := newError(cl, resp, b, c.now())
		if e.StatusCode == http.StatusUnauthorized && !f.reauthed && cl.s.tokens.renewable() {
			// The cached token may have been revoked: fetch a new one
			// once, as do does.
			f.reauthed = true
			cl.s.tokens.invalidate()
			resp.Body.Close()
			idle.Stop()
			return f.connect(ctx, yield)
		}
		return false, e
	}
	f.reauthed = false
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, fmt.Errorf("client: GET %s: %w (Content-Type %q)", cl.route, errNotStream, resp.Header.Get("Content-Type"))
	}
	idle.Reset(streamIdle)
	p := newSSEParser(resp.Body)
	for {
		m, err := p.next(func() { idle.Reset(streamIdle); got = true })
		if p.retry > 0 {
			f.retry = p.retry
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the service never ends a stream
			}
			return got, fmt.Errorf("client: GET %s: stream: %w", cl.route, err)
		}
		if !m.hasData {
			// An id without data moves the cursor only.
			if seq, ok := instore.ParseEventID(m.id); ok && seq > f.lastSeq {
				f.last, f.lastSeq = m.id, seq
			}
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			return got, fmt.Errorf("client: GET %s: message %s: %w: %w", cl.route, m.id, errBadEvent, err)
		}
		if ev.ID == "" {
			ev.ID = m.id
		}
		if ev.Type == "" {
			ev.Type = instore.EventType(m.event)
		}
		seq, ok := instore.ParseEventID(ev.ID)
		if !ok {
			return got, fmt.Errorf("client: GET %s: %w: id %q is not an event id", cl.route, errBadEvent, ev.ID)
		}
		if seq <= f.lastSeq {
			continue // already yielded: never twice
		}
		f.last, f.lastSeq = ev.ID, seq
		if !yield(ev, nil) {
			return got, errStopped
		}
	}
}

package onlineapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// streamPing is how often a quiet stream sends a comment line, so that
// proxies keep it open; streamRecheck how often it reads the store anyway
// (a wake-up lost with a node).
const (
	streamPing    = 15 * time.Second
	streamRecheck = 5 * time.Second
)

// eventQuery is GET /events's query: the filter and where to start.
type eventQuery struct {
	f        instore.EventFilter
	hasAfter bool
	// afterField names where the cursor came from: after or Last-Event-ID.
	afterField string
}

func parseEventQuery(r *http.Request) (*eventQuery, error) {
	q := r.URL.Query()
	if errs := repeated(q, "types", "terminalId", "after", "limit"); errs != nil {
		return nil, httpapi.Validation(errs...)
	}
	var eq eventQuery
	var errs []instore.FieldError
	if v := q.Get("types"); v != "" {
		for _, s := range strings.Split(v, ",") {
			t := instore.EventType(strings.TrimSpace(s))
			if !slices.Contains(instore.EventTypes, t) {
				errs = append(errs, instore.FieldError{Field: "types", Message: "must be event types separated by commas: " + instore.EventTypeList()})
				break
			}
			if !slices.Contains(eq.f.Types, t) {
				eq.f.Types = append(eq.f.Types, t)
			}
		}
	}
	if v := q.Get("terminalId"); v != "" {
		if len(v) != 8 || strings.Trim(v, "0123456789") != "" {
			errs = append(errs, instore.FieldError{Field: "terminalId", Message: "must be a terminal ID: 8 digits"})
		}
		eq.f.TerminalID = v
	}
	after, field := q.Get("after"), "after"
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		after, field = h, "Last-Event-ID"
	}
	if after != "" {
		n, ok := instore.ParseEventID(after)
		if !ok {
			errs = append(errs, instore.FieldError{Field: field, Message: "must be an event id (evt_ and its digits, as an event's id is written, at most 9223372036854775807) or its number"})
		}
		eq.f.After, eq.hasAfter, eq.afterField = n, true, field
	}
	eq.f.Limit = 100
	if v := q.Get("limit"); v != "" {
		n, err := atoi(v)
		if err != nil || n < 1 || n > instore.MaxEventPage {
			errs = append(errs, instore.FieldError{Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", instore.MaxEventPage)})
		}
		eq.f.Limit = int(n)
	}
	if errs != nil {
		return nil, httpapi.Validation(errs...)
	}
	return &eq, nil
}

// eventQueryAt is the query of GET /events or /events/stream, its cursor
// checked against the newest event.
func (h *handlers) eventQueryAt(r *http.Request, p *instore.Principal) (*eventQuery, error) {
	eq, err := parseEventQuery(r)
	if err != nil {
		return nil, err
	}
	if eq.hasAfter {
		if err := h.svc.CheckEventCursor(r.Context(), p, eq.f.After, eq.afterField); err != nil {
			return nil, err
		}
	}
	return eq, nil
}

// eventStream answers GET /events/stream: the stream, whatever Accept
// says (the OpenAPI document gives the stream its own operation, so that a
// generated client types GET /events as the JSON page).
func (h *handlers) eventStream(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	eq, err := h.eventQueryAt(r, p)
	if err != nil {
		return err
	}
	return h.stream(w, r, p, eq)
}

// events answers GET /events: a page of the merchant's events as JSON, or,
// with Accept: text/event-stream, the stream (server-sent events; what a
// browser's EventSource asks for), as /events/stream.
func (h *handlers) events(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	eq, err := h.eventQueryAt(r, p)
	if err != nil {
		return err
	}
	if wantsStream(r) {
		return h.stream(w, r, p, eq)
	}
	evs, err := h.svc.ListEvents(r.Context(), p, eq.f)
	if err != nil {
		return err
	}
	var next *string
	if len(evs) > 0 {
		next = &evs[len(evs)-1].ID
	} else if eq.hasAfter {
		id := instore.EventID(eq.f.After)
		next = &id
	}
	return writeJSON(w, http.StatusOK, struct {
		Events     []instore.EventWire `json:"events"`
		NextCursor *string             `json:"nextCursor"`
	}{evs, next})
}

// wantsStream tells a request for the stream.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// stream sends the merchant's events as server-sent events: those after
// the cursor first (Last-Event-ID or ?after=; without either, from now),
// then each as it is numbered, with no gap and no repeat: events are read
// from the store in the order of their numbers, after the last one sent.
func (h *handlers) stream(w http.ResponseWriter, r *http.Request, p *instore.Principal, eq *eventQuery) error {
	ctx := r.Context()
	f := eq.f
	f.Limit = instore.MaxEventPage
	if !eq.hasAfter {
		last, err := h.svc.LastEvent(ctx, p)
		if err != nil {
			return err
		}
		f.After = last
	}
	release, err := h.streams.open(w, p)
	if err != nil {
		return err
	}
	defer release()
	// Authorised and valid: from here on it is a stream.
	httpapi.Waiting(w, httpapi.WaitStream)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: h.streams.limits.WriteTimeout}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Every write has its own deadline (streamWriter), in place of the
	// server's write timeout, which a stream outlives.
	if sw.write([]byte("retry: 2000\n\n")) != nil {
		return nil
	}
	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	recheck := time.NewTicker(streamRecheck)
	defer recheck.Stop()
	recheckNow := false
	for {
		changed := h.svc.EventsChanged()
		msgs, pos, err := h.svc.StreamEvents(ctx, p, f, recheckNow)
		if err != nil {
			return nil // the client reconnects with Last-Event-ID
		}
		recheckNow = false
		if err := sw.send(msgs); err != nil {
			return nil
		}
		f.After = pos
		if len(msgs) == f.Limit {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-recheck.C:
			recheckNow = true
		case <-ping.C:
			if sw.write([]byte(": ping\n\n")) != nil {
				return nil
			}
		}
	}
}

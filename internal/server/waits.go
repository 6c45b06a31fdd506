package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
)

// Every wait an Online API request can make ends before the time-outs of
// the server that answers it, or its answer would be lost: the client sees
// the connection close with no reply (and Go's client silently sends the
// request again). The waits are a status request's long-poll
// (instore.MaxWait), an operation's wait for its terminal (PostWait) and a
// retry's wait for the first request with its Idempotency-Key
// (IdempotencyWait). The Online API's write time-out is derived from them
// (OnlineWriteTimeout), the default shutdown time-out too
// (DefaultShutdownTimeout), and the command refuses a shutdown time-out that
// does not cover them.

// WaitMargin is what a request gets beyond the longest wait it can make, to
// write to the store and send its answer.
const WaitMargin = 10 * time.Second

// DefaultWriteTimeout is the write time-out of the HTTP listeners that do
// not wait, and the least the Online API's is.
const DefaultWriteTimeout = 90 * time.Second

// longPoll is the longest a status request holds (GET /transaction?wait=).
const longPoll = time.Duration(instore.MaxWait) * time.Second

// PostWait is the longest an operation waits for its terminal before it
// answers: a purchase, refund or reversal for the acknowledgement (the ack
// time-out and a second), a print for the terminal's answer (the print
// time-out).
func (c Config) PostWait() time.Duration {
	ack := c.AckTimeout
	if ack <= 0 {
		ack = service.DefaultAckTimeout
	}
	printing := c.PrintTimeout
	if printing <= 0 {
		printing = service.DefaultPrintTimeout
	}
	return max(ack+time.Second, printing)
}

// idempotencyWait is the configured IdempotencyWait or its default.
func (c Config) idempotencyWait() time.Duration {
	if c.IdempotencyWait > 0 {
		return c.IdempotencyWait
	}
	return httpapi.DefaultIdempotencyWait
}

// LongestRequest is the longest an Online API request can wait before it
// answers: a status request's long-poll, or a retry with an
// Idempotency-Key, which waits up to IdempotencyWait for the first request
// and, should that one's record be gone meanwhile, runs the operation
// itself (PostWait).
func (c Config) LongestRequest() time.Duration {
	return max(longPoll, c.idempotencyWait()+c.PostWait())
}

// OnlineWriteTimeout is the Online API listener's write time-out:
// WriteTimeout, raised to LongestRequest plus WaitMargin. (The read
// time-out needs no such room: net/http lifts the read deadline once the
// body is read, before the handler waits.)
func (c Config) OnlineWriteTimeout() time.Duration {
	base := c.WriteTimeout
	if base <= 0 {
		base = DefaultWriteTimeout
	}
	return max(base, c.LongestRequest()+WaitMargin)
}

// DefaultShutdownTimeout is the shutdown time-out when none is set: an
// operation in flight at shutdown gets its longest wait for the terminal
// plus WaitMargin, so that its answer (a purchase's 201) is sent and its
// Idempotency-Key record completed rather than left running.
func (c Config) DefaultShutdownTimeout() time.Duration { return c.PostWait() + WaitMargin }

// drainGrace is how long a waiting request is let run after it started
// before the drain ends its wait: long enough for its reads, which a
// cancelled context would fail (a 500 instead of the state).
const drainGrace = time.Second

// drainer ends the waits of the Online API's status requests (?wait=) and
// console streams when the server shuts down: they answer what they have,
// as when their wait runs out, instead of holding the shutdown for up to a
// minute or being cut by its time-out with no answer. Operations (POST) are
// left to finish: their answers carry a payment's outcome.
type drainer struct {
	next  http.Handler
	drain context.Context
}

func (d *drainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !waits(r) {
		d.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(d.drain, func() {
		if early := time.Until(start.Add(drainGrace)); early > 0 {
			t := time.NewTimer(early)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		cancel()
	})
	defer stop()
	d.next.ServeHTTP(w, r.WithContext(ctx))
}

// waits tells the GET requests that may hold: a status request with wait,
// the console's event stream.
func waits(r *http.Request) bool {
	return strings.Contains(r.URL.RawQuery, "wait=") || r.URL.Path == "/console/events" ||
		r.URL.Path == "/in-store/api/v1/events"
}

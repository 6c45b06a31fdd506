package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/ids"
)

// Idempotency limits.
const (
	// IdempotencyTTL is how long a key is remembered.
	IdempotencyTTL = 24 * time.Hour
	// DefaultIdempotencyWait bounds how long a retry waits for the first
	// request by default.
	DefaultIdempotencyWait = 30 * time.Second
)

// replayedHeaders are the response headers kept with a record and replayed.
var replayedHeaders = []string{"Content-Type", "Location", "X-Request-Id"}

// Idempotency implements Idempotency-Key on POST operations: scope
// merchant, 24 h; the same key and body replay the first response with
// Idempotent-Replayed: true; another body answers 422. Records are in the
// store and survive restarts.
//
// A request that creates a transaction ties its record to it in the
// creation's database transaction (instore.IdempotencyClaim). A retry
// whose record is tied answers about that transaction at once (its state
// once acknowledged, or the problem the first request got), whether the
// first request still runs or died with its process, and never creates a
// second one. A retry whose record is running and untied waits for the
// first request while it runs here; when it does not (its process died
// before it created anything) the retry runs again under a new attempt,
// and the old attempt could no longer tie anything to the record.
type Idempotency struct {
	API   *API
	Store instore.IdempotencyStore
	// Scope returns the scope of a principal's keys (nil: its merchant, as
	// the Online API has it; the Access API scopes them by customer).
	// Records are stored under it in the merchant id's place.
	Scope  func(p *instore.Principal) string
	Logger *slog.Logger
	// Clock dates the records (nil: the wall clock, wallclock.Clock).
	Clock instore.Clock
	// Wait bounds how long a retry waits for the first request (default
	// DefaultIdempotencyWait).
	Wait time.Duration
	// Holders, when set, names this process in its attempts and tells
	// whether another process that holds an attempt is alive (several
	// nodes on one database: internal/cluster). Without it, an attempt
	// not running in this process is taken for abandoned.
	Holders Holders

	mu      sync.Mutex
	running map[string]int           // merchant+key+attempt -> requests of that attempt running here
	waiters map[string]chan struct{} // merchant+key -> closed when an attempt ends here
}

// Holders are the processes that may hold an attempt.
type Holders interface {
	// Self names this process; no "@" in it.
	Self() string
	// Alive reports whether the process named holder is alive.
	Alive(ctx context.Context, holder string) bool
}

// holderOf is the process named in an attempt ("att_...@node"), or "".
func holderOf(attempt string) string {
	if i := strings.LastIndexByte(attempt, '@'); i >= 0 {
		return attempt[i+1:]
	}
	return ""
}

// abandoned reports whether the attempt, not running in this process, was
// abandoned: its process is not alive (or unknown: one node).
func (m *Idempotency) abandoned(ctx context.Context, attempt string) bool {
	if m.Holders == nil {
		return true
	}
	h := holderOf(attempt)
	return h == "" || h == m.Holders.Self() || !m.Holders.Alive(ctx, h)
}

func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Wrap applies idempotency to an authenticated POST handler.
func (m *Idempotency) Wrap(h AuthedFunc) AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		keys, ok := r.Header["Idempotency-Key"]
		if !ok {
			return h(w, r, p)
		}
		scope := p.MerchantID
		if m.Scope != nil {
			scope = m.Scope(p)
		}
		key := keys[0]
		if len(keys) != 1 || !validIdempotencyKey(key) {
			return Validation(instore.FieldError{Field: "Idempotency-Key", Message: "must be one header of 1-255 printable ASCII characters"})
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return Errorf413(mbe.Limit)
			}
			return instore.Errorf(instore.EValidation, "The request body could not be read.")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), body...))
		rec := &instore.IdempotencyRecord{
			MerchantID: scope, Key: key, Method: r.Method, Path: r.URL.EscapedPath(), // ASCII: a store's text takes it
			RequestHash: sum[:], CreatedAt: m.now().UTC().Truncate(time.Microsecond),
			Attempt: ids.New("att"),
		}
		if m.Holders != nil {
			rec.Attempt += "@" + m.Holders.Self()
		}
		// Running here from before its record exists, so that a retry never
		// takes it for abandoned.
		own := &instore.IdempotencyClaim{MerchantID: scope, Key: key, Attempt: rec.Attempt}
		m.enter(own)
		defer m.leave(own)
		ctx := r.Context()
		wait := m.Wait
		if wait <= 0 {
			wait = DefaultIdempotencyWait
		}
		deadline := time.Now().Add(wait)
		for {
			existing, err := m.Store.BeginIdempotency(ctx, rec)
			if err != nil {
				return fmt.Errorf("idempotency: %w", err)
			}
			if existing == nil {
				return m.run(w, r, p, h, own)
			}
			switch {
			case rec.CreatedAt.Sub(existing.CreatedAt) > IdempotencyTTL:
				// Expired: the key is free again.
				if _, err := m.Store.ExpireIdempotency(ctx, rec.CreatedAt.Add(-IdempotencyTTL)); err != nil {
					return fmt.Errorf("idempotency: %w", err)
				}
				continue
			case !bytes.Equal(existing.RequestHash, rec.RequestHash):
				return instore.Errorf(instore.EIdempotencyConflict, "This Idempotency-Key was used with a different request; use a new key for a new request.")
			case existing.StatusCode != 0:
				return replay(w, existing)
			case existing.TransactionID != "":
				// The first request created a transaction: answer about it,
				// whether that request still runs or died.
				return m.run(w, r, p, h, &instore.IdempotencyClaim{MerchantID: scope, Key: key,
					Attempt: existing.Attempt, Resume: existing.TransactionID})
			case !m.runsHere(scope, key, existing.Attempt) && m.abandoned(ctx, existing.Attempt):
				// Abandoned before it created anything: its process died
				// (one node: every running record of another process is
				// one; with several nodes the holder's heartbeat decides),
				// or it ended without storing an answer. Run again; the old
				// attempt can no longer tie a transaction to the key.
				if err := m.Store.DeleteIdempotency(ctx, scope, key, existing.Attempt); err != nil && !errors.Is(err, instore.ErrNotFound) {
					return fmt.Errorf("idempotency: %w", err)
				}
				continue
			}
			// The first request runs here (or on another live node) and has
			// created nothing yet: wait for it, within what the server's
			// write timeout allows.
			if time.Now().After(deadline) {
				return instore.Errorf(instore.EConflict, "A request with this Idempotency-Key is still running; retry later.")
			}
			if err := m.wait(ctx, scope, key); err != nil {
				return instore.Errorf(instore.EConflict, "A request with this Idempotency-Key is still running; retry later.")
			}
		}
	}
}

// run runs the handler for the request holding the record of c, and keeps
// its answer if the request started something: a retry must see the same
// answer (a WP25 included), never a second attempt at the payment.
//
// Kept: a 2xx answer (the operation was done), and any answer of a request
// whose record is tied to the transaction it created (WP25, WP23 after the
// creation). Not kept, the record removed so that a retry runs again: a
// refusal before anything started (validation, WP01, WP09, WP16, WP22,
// WP23, WP30, ...: the retry after the terminal comes back online is not a
// replay of 409 WP23 for 24 h), as Stripe does. Not kept either, whatever
// the record: a 500 or 503 (the service failed, not the request), and an
// answer whose client went away before it was given; a tied record then
// stays running, for a retry to answer about its transaction.
func (m *Idempotency) run(w http.ResponseWriter, r *http.Request, p *instore.Principal, h AuthedFunc, c *instore.IdempotencyClaim) error {
	if c.Resume != "" {
		// Not the first run: an answer about what the first one created.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	cw := &captureWriter{ResponseWriter: w}
	err := h(cw, r.WithContext(context.WithValue(r.Context(), claimKey{}, c)), p)
	if err != nil {
		m.API.Error(cw, r, err)
	}
	status := cw.status
	if status == 0 {
		status = http.StatusOK
	}
	ctx := context.WithoutCancel(r.Context())
	failed := status == http.StatusInternalServerError || status == http.StatusServiceUnavailable || r.Context().Err() != nil
	if failed || status >= 300 && c.Resume == "" {
		// Removed unless it is tied to a transaction (the store refuses
		// then, atomically): a refusal of a request that started nothing.
		derr := m.Store.DeleteIdempotency(ctx, c.MerchantID, c.Key, c.Attempt)
		switch {
		case derr == nil || failed:
			return nil
		case !errors.Is(derr, instore.ErrNotFound):
			m.Logger.Error("release idempotency record", "error", derr)
			return nil
		}
		// Tied: the answer of the transaction the request created is kept.
	}
	hdr := map[string]string{}
	for _, k := range replayedHeaders {
		if v := w.Header().Get(k); v != "" {
			hdr[k] = v
		}
	}
	cerr := m.Store.CompleteIdempotency(ctx, c.MerchantID, c.Key, c.Attempt, status, hdr, cw.body.Bytes())
	if cerr != nil && !errors.Is(cerr, instore.ErrConflict) && !errors.Is(cerr, instore.ErrNotFound) {
		// ErrConflict: a concurrent retry answered first, the same way;
		// ErrNotFound: another attempt took the key over.
		m.Logger.Error("store idempotent response", "error", cerr)
	}
	return nil
}

// now is the time of day that dates records, Clock's.
func (m *Idempotency) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// runsHere reports whether attempt of merchant+key runs in this process.
func (m *Idempotency) runsHere(merchantID, key, attempt string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[merchantID+"\x00"+key+"\x00"+attempt] > 0
}

func (m *Idempotency) enter(c *instore.IdempotencyClaim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == nil {
		m.running = map[string]int{}
	}
	m.running[c.MerchantID+"\x00"+c.Key+"\x00"+c.Attempt]++
}

// leave forgets a running attempt and wakes the requests waiting on its key.
func (m *Idempotency) leave(c *instore.IdempotencyClaim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := c.MerchantID + "\x00" + c.Key + "\x00" + c.Attempt
	if m.running[a]--; m.running[a] <= 0 {
		delete(m.running, a)
	}
	k := c.MerchantID + "\x00" + c.Key
	if ch := m.waiters[k]; ch != nil {
		close(ch)
		delete(m.waiters, k)
	}
}

func replay(w http.ResponseWriter, rec *instore.IdempotencyRecord) error {
	h := w.Header()
	for k, v := range rec.Header {
		h.Set(k, v)
	}
	h.Set("Idempotent-Replayed", "true")
	h.Set("Content-Length", strconv.Itoa(len(rec.Body)))
	w.WriteHeader(rec.StatusCode)
	w.Write(rec.Body)
	return nil
}

// wait blocks until the request holding merchant+key completes here, or a
// short interval passes (the holder may run on another node), or ctx ends.
func (m *Idempotency) wait(ctx context.Context, merchantID, key string) error {
	m.mu.Lock()
	if m.waiters == nil {
		m.waiters = map[string]chan struct{}{}
	}
	k := merchantID + "\x00" + key
	ch := m.waiters[k]
	if ch == nil {
		ch = make(chan struct{})
		m.waiters[k] = ch
	}
	m.mu.Unlock()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// captureWriter passes a response through and keeps its status and body.
type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type claimKey struct{}

// Claim returns the idempotency record the Idempotency middleware holds
// for r (nil: the request has no Idempotency-Key): a handler that creates
// a transaction passes it to the Service, which ties the transaction to it
// in the creation's database transaction, or answers a retry about the
// transaction it is tied to (Resume).
func Claim(r *http.Request) *instore.IdempotencyClaim {
	c, _ := r.Context().Value(claimKey{}).(*instore.IdempotencyClaim)
	return c
}

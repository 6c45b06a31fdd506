package onlineapi

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
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// Idempotency limits.
const (
	// IdempotencyTTL is how long a key is remembered.
	IdempotencyTTL = 24 * time.Hour
	// idempotencyAbandoned is the age after which a record still marked
	// running belongs to a request that died with its process: no request
	// runs that long, so a retry may take the key over.
	idempotencyAbandoned = 5 * time.Minute
	// DefaultIdempotencyWait bounds how long a retry waits for the first
	// request by default.
	DefaultIdempotencyWait = 30 * time.Second
)

// replayedHeaders are the response headers kept with a record and replayed.
var replayedHeaders = []string{"Content-Type", "Location", "X-Request-Id"}

// Idempotency implements Idempotency-Key on POST operations: scope
// merchant, 24 h; the same key and body replay the first response with
// Idempotent-Replayed: true; another body answers 422; a retry while the
// first request runs waits for it, so a retried purchase never charges
// twice. Records survive restarts (they are in the store).
type Idempotency struct {
	API    *httpapi.API
	Store  instore.IdempotencyStore
	Logger *slog.Logger
	Now    func() time.Time
	// Wait bounds how long a retry waits for the first request (default
	// DefaultIdempotencyWait).
	Wait time.Duration

	mu      sync.Mutex
	waiters map[string]chan struct{} // merchant+key -> closed when completed here
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
func (m *Idempotency) Wrap(h httpapi.AuthedFunc) httpapi.AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		keys, ok := r.Header["Idempotency-Key"]
		if !ok {
			return h(w, r, p)
		}
		key := keys[0]
		if len(keys) != 1 || !validIdempotencyKey(key) {
			return httpapi.Validation(instore.FieldError{Field: "Idempotency-Key", Message: "must be one header of 1-255 printable ASCII characters"})
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return httpapi.Errorf413(mbe.Limit)
			}
			return instore.Errorf(instore.EValidation, "The request body could not be read.")
		}
		sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), body...))
		rec := &instore.IdempotencyRecord{
			MerchantID: p.MerchantID, Key: key, Method: r.Method, Path: r.URL.Path,
			RequestHash: sum[:], CreatedAt: m.Now().UTC().Truncate(time.Microsecond),
		}
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
				r.Body = io.NopCloser(bytes.NewReader(body))
				return m.first(w, r, p, h, rec)
			}
			age := rec.CreatedAt.Sub(existing.CreatedAt)
			switch {
			case age > IdempotencyTTL || existing.StatusCode == 0 && age > idempotencyAbandoned:
				// Expired, or abandoned by a request that died: take it over.
				if err := m.Store.DeleteIdempotency(ctx, p.MerchantID, key); err != nil && !errors.Is(err, instore.ErrNotFound) {
					return fmt.Errorf("idempotency: %w", err)
				}
				continue
			case !bytes.Equal(existing.RequestHash, rec.RequestHash):
				return instore.Errorf(instore.EIdempotencyConflict, "This Idempotency-Key was used with a different request; use a new key for a new request.")
			case existing.StatusCode != 0:
				return replay(w, existing)
			}
			// The first request is still running: wait for it.
			if time.Now().After(deadline) {
				return instore.Errorf(instore.EConflict, "A request with this Idempotency-Key is still running; retry later.")
			}
			if err := m.wait(ctx, p.MerchantID, key); err != nil {
				return instore.Errorf(instore.EConflict, "A request with this Idempotency-Key is still running; retry later.")
			}
		}
	}
}

// first runs the handler for the first request with a key and stores its
// response, whatever it is: a retry must see the same answer (a WP25 or a
// 500 included), never a second attempt at the payment.
func (m *Idempotency) first(w http.ResponseWriter, r *http.Request, p *instore.Principal, h httpapi.AuthedFunc, rec *instore.IdempotencyRecord) error {
	cw := &captureWriter{ResponseWriter: w}
	err := h(cw, r, p)
	if err != nil {
		m.API.Error(cw, r, err)
	}
	status := cw.status
	if status == 0 {
		status = http.StatusOK
	}
	hdr := map[string]string{}
	for _, k := range replayedHeaders {
		if v := w.Header().Get(k); v != "" {
			hdr[k] = v
		}
	}
	ctx := context.WithoutCancel(r.Context())
	if cerr := m.Store.CompleteIdempotency(ctx, p.MerchantID, rec.Key, status, hdr, cw.body.Bytes()); cerr != nil {
		m.Logger.Error("store idempotent response", "error", cerr)
	}
	m.done(p.MerchantID, rec.Key)
	return nil
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

func (m *Idempotency) done(merchantID, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := merchantID + "\x00" + key
	if ch := m.waiters[k]; ch != nil {
		close(ch)
		delete(m.waiters, k)
	}
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

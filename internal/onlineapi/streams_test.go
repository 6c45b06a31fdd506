package onlineapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// recorder is a response writer that records each write's size and the
// write deadline set before it.
type recorder struct {
	*httptest.ResponseRecorder
	deadline time.Time
	writes   []int
	late     int // writes without a deadline in the future
}

func (r *recorder) SetWriteDeadline(d time.Time) error { r.deadline = d; return nil }

func (r *recorder) Write(b []byte) (int, error) {
	r.writes = append(r.writes, len(b))
	if !r.deadline.After(time.Now()) {
		r.late++
	}
	r.deadline = time.Time{}
	return r.ResponseRecorder.Write(b)
}

// TestStreamWriterBoundsWrites: a catch-up's page of messages goes out in
// order, in writes of at most streamChunk bytes (a larger message alone),
// each with a write deadline; the buffer it is assembled in is the shared
// one of streamChunk bytes, not one that grows with the page.
func TestStreamWriterBoundsWrites(t *testing.T) {
	rec := &recorder{ResponseRecorder: httptest.NewRecorder()}
	sw := &streamWriter{w: rec, rc: http.NewResponseController(rec), timeout: time.Minute}
	var msgs []service.StreamMessage
	var want bytes.Buffer
	for i := range instore.MaxEventPage {
		size := 3000 + i%7*100
		if i == 250 {
			size = 3 * streamChunk // one message larger than a write
		}
		m := service.StreamMessage{Seq: int64(i + 1), Text: fmt.Appendf(nil, "id: %d\ndata: %s\n\n", i+1, bytes.Repeat([]byte{'x'}, size))}
		msgs = append(msgs, m)
		want.Write(m.Text)
	}
	if err := sw.send(msgs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Fatalf("sent %d bytes, not the %d of the messages in order", rec.Body.Len(), want.Len())
	}
	big := 0
	for _, n := range rec.writes {
		if n > streamChunk {
			big++
		}
	}
	if big != 1 || len(rec.writes) < want.Len()/streamChunk || rec.late != 0 {
		t.Errorf("writes %v: %d over %d bytes (want the one large message), %d without a deadline", rec.writes, big, streamChunk, rec.late)
	}
	bp := chunkPool.Get().(*[]byte)
	if cap(*bp) != streamChunk {
		t.Errorf("the pooled buffer grew to %d bytes, want %d", cap(*bp), streamChunk)
	}
	chunkPool.Put(bp)
}

// TestStreamCounter: places are taken atomically: of 50 concurrent
// streams of one client, exactly the limit get one; another client gets
// one until the node is full; a released place is free again, once.
func TestStreamCounter(t *testing.T) {
	c := newStreamCounter(StreamLimits{PerClient: 10, PerNode: 12})
	a := &instore.Principal{ClientID: "cli_a", MerchantID: "mer_1"}
	b := &instore.Principal{ClientID: "cli_b", MerchantID: "mer_1"}
	var got atomic.Int32
	var mu sync.Mutex
	var releases []func()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rel, err := c.open(httptest.NewRecorder(), a); err == nil {
				got.Add(1)
				mu.Lock()
				releases = append(releases, rel)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got.Load() != 10 {
		t.Fatalf("%d streams of one client open, want 10", got.Load())
	}
	w := httptest.NewRecorder()
	if _, err := c.open(w, a); err == nil || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("an 11th stream: %v, Retry-After %q", err, w.Header().Get("Retry-After"))
	}
	for range 2 {
		if _, err := c.open(httptest.NewRecorder(), b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.open(httptest.NewRecorder(), b); err == nil {
		t.Fatal("a 13th stream on a node of 12")
	}
	releases[0]()
	releases[0]() // once only
	if _, err := c.open(httptest.NewRecorder(), b); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := c.open(httptest.NewRecorder(), b); err == nil {
		t.Fatal("a release counted twice")
	}
}

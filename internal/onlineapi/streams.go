package onlineapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// What an event stream may cost (docs/events.md, "The stream and the
// pages"): how many a client and a node may hold open, how long one write
// may wait for the client, and how much a write carries.
const (
	// DefaultStreamsPerClient is how many streams one API client may hold
	// open on a node at once (serve --streams-per-client).
	DefaultStreamsPerClient = 10
	// DefaultStreamsPerNode is how many streams a node holds open at once,
	// of all clients (serve --streams-per-node).
	DefaultStreamsPerNode = 5000
	// DefaultStreamWriteTimeout is how long a write to a stream may wait
	// for the client to read before the stream is dropped (serve
	// --stream-write-timeout).
	DefaultStreamWriteTimeout = 30 * time.Second
	// streamRetryAfter is the Retry-After of a stream refused over a limit
	// (seconds).
	streamRetryAfter = 5
	// streamChunk bounds one write of a stream: a batch of messages (a
	// catch-up's page is up to instore.MaxEventPage events) goes out in
	// writes of at most this many bytes (a larger message alone), through a
	// buffer shared by all streams, so that a stream holds no buffer of its
	// own between batches, however large its catch-up was.
	streamChunk = 32 << 10
)

// StreamLimits bound a node's event streams; a zero member takes its
// default.
type StreamLimits struct {
	PerClient, PerNode int
	WriteTimeout       time.Duration
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.PerClient <= 0 {
		l.PerClient = DefaultStreamsPerClient
	}
	if l.PerNode <= 0 {
		l.PerNode = DefaultStreamsPerNode
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultStreamWriteTimeout
	}
	return l
}

// streamCounter counts the open streams per API client and on the node;
// open takes a place or refuses one, atomically.
type streamCounter struct {
	limits  StreamLimits
	mu      sync.Mutex
	total   int
	clients map[string]int
}

func newStreamCounter(l StreamLimits) *streamCounter {
	return &streamCounter{limits: l.withDefaults(), clients: map[string]int{}}
}

// open takes a place for a stream of the principal's API client, or
// answers rate-limited (429, with Retry-After set on w) naming the limit
// reached. release gives the place back; call it once.
func (c *streamCounter) open(w http.ResponseWriter, p *instore.Principal) (release func(), err error) {
	key := "client " + p.ClientID
	if p.ClientID == "" {
		key = "merchant " + p.MerchantID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.clients[key] >= c.limits.PerClient:
		err = instore.Errorf(instore.ERateLimited, "At most %d event streams may be open at once per API client, and this client has %d open; close one, or retry after %d s.",
			c.limits.PerClient, c.clients[key], streamRetryAfter)
	case c.total >= c.limits.PerNode:
		err = instore.Errorf(instore.ERateLimited, "This node serves at most %d event streams at once, and has %d open; retry after %d s.",
			c.limits.PerNode, c.total, streamRetryAfter)
	}
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		return nil, err
	}
	c.clients[key]++
	c.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.clients[key]--; c.clients[key] <= 0 {
				delete(c.clients, key)
			}
		})
	}, nil
}

// chunkPool holds the buffers streams assemble their writes in; a stream
// takes one for a batch and gives it back before it waits.
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, streamChunk)
	return &b
}}

// streamWriter writes a stream: each write with a deadline (a client that
// stops reading is dropped once it passes, and the stream's memory with
// it), a batch of messages in writes of at most streamChunk bytes.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// write writes b and flushes it, within the deadline.
func (s *streamWriter) write(b []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("stream write deadline: %w", err)
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// send writes msgs, in order, in writes of at most streamChunk bytes but
// for a message larger than that, which goes alone.
func (s *streamWriter) send(msgs []service.StreamMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	bp := chunkPool.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		*bp = buf[:0]
		chunkPool.Put(bp)
	}()
	for _, m := range msgs {
		if len(buf) > 0 && len(buf)+len(m.Text) > streamChunk {
			if err := s.write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if len(m.Text) > streamChunk {
			if err := s.write(m.Text); err != nil {
				return err
			}
			continue
		}
		buf = append(buf, m.Text...)
	}
	if len(buf) > 0 {
		return s.write(buf)
	}
	return nil
}

package sqlstore

import (
	"context"
	"sync"
)

// gate is the entrance of a queue of writes that close shuts: the group
// committer's (commit.go) and each pipeline's (pipeline.go). A send after
// close is refused with errClosed; close waits for every send under way,
// so that nothing is sent on the closed channel.
type gate[T any] struct {
	mu   sync.RWMutex // held (read) while sending; close takes it
	shut bool
	ch   chan T
}

func newGate[T any](size int) gate[T] { return gate[T]{ch: make(chan T, size)} }

// send queues v, or ends with ctx (v not queued).
func (g *gate[T]) send(ctx context.Context, v T) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.shut {
		return errClosed
	}
	select {
	case g.ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close shuts the gate and closes the channel once: its reader then
// drains what was queued.
func (g *gate[T]) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.shut {
		g.shut = true
		close(g.ch)
	}
}

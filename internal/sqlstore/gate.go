package sqlstore

import (
	"context"
	"sync"
)

// gate is the entrance of a queue that close shuts: the group committer's
// (commit.go), each pipeline's (pipeline.go) and the read pipeline's
// (reads.go). A send after
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

// crew is a gate with the workers that drain it in groups (a pipeline's)
// and the goroutines they start: close shuts the gate and waits for all.
type crew[T any] struct {
	jobs gate[T]
	wg   sync.WaitGroup
}

// start runs pipeWorkers workers, each calling send with the jobs queued
// at once (gather), one group after another.
func (c *crew[T]) start(send func(group []T)) {
	c.jobs = newGate[T](maxPipe)
	c.wg.Add(pipeWorkers)
	for range pipeWorkers {
		go func() {
			defer c.wg.Done()
			group := make([]T, 0, maxPipe)
			for j := range c.jobs.ch {
				send(gather(c.jobs.ch, append(group[:0], j)))
			}
		}()
	}
}

// spawn runs fn on a goroutine of its own, which close waits for.
func (c *crew[T]) spawn(fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// close runs what is queued and stops.
func (c *crew[T]) close() {
	c.jobs.close()
	c.wg.Wait()
}

// gather appends to group what ch holds now, up to maxPipe in all.
func gather[T any](ch <-chan T, group []T) []T {
	for len(group) < maxPipe {
		select {
		case j, ok := <-ch:
			if !ok {
				return group
			}
			group = append(group, j)
		default:
			return group
		}
	}
	return group
}

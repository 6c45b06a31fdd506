// Package batch gathers concurrent calls of one operation into batches
// (Batcher): what a storm of callers asks for at once (a dead node's fleet
// reconnecting elsewhere) costs one statement per batch instead of one
// per call.
package batch

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Batcher gathers the concurrent calls of one operation on keys into
// batches: a call that finds no batch being run runs its own with every
// call queued meanwhile, up to most, in one call of run; then the oldest
// call still queued, if any, runs the next batch. Every call returns once
// the batch holding it ran, with its key's result and the batch's error.
// A storm's calls (a node's fleet reconnecting at once) then cost one
// statement per batch instead of one each, and no timer delays a lone
// call: a batch is what queued while the one before it ran. A key is what
// a call asks for (a serial number), or the call's own request (a
// pointer) when each call brings data of its own (a hello).
type Batcher[K comparable, V any] struct {
	mu sync.Mutex
	// running: a batch is being run; queue holds the calls not run yet,
	// oldest first (empty whenever running is false).
	running bool
	queue   []*batchCall[K, V]
}

// batchCall is one queued call: its key, where it is told that its batch
// ran (false) or that it runs the next batch (true), and its result.
type batchCall[K comparable, V any] struct {
	key  K
	done chan bool
	v    V
	err  error
}

// Do queues key and returns its result once run ran the batch holding
// it. run gets the batch's keys (a key twice if two calls asked for it)
// and returns the results by key; a key it leaves out gets V's zero value.
//
// A call whose ctx ends while it is still queued leaves the queue and
// returns ctx.Err(). Once taken into a batch it waits for that batch (a
// run that may stall bounds itself in time, as the read of devices does),
// and once told to run the next batch it runs it whatever its ctx: the
// calls queued behind it wait for it. run gets no ctx of its own: a batch
// serves every call in it, so it must not end with the one that happens
// to run it.
func (b *Batcher[K, V]) Do(ctx context.Context, key K, most int, run func(keys []K) (map[K]V, error)) (V, error) {
	c, lead := b.join(key)
	if !lead {
		lead, err := b.wait(ctx, c)
		if err != nil {
			return c.v, err // left the queue: c.v is V's zero value
		}
		if !lead {
			return c.v, c.err // run in another call's batch
		}
	}
	return b.lead(c, most, run)
}

// join queues a call of key, and reports whether it is to run the batch
// at once (no batch is being run).
func (b *Batcher[K, V]) join(key K) (*batchCall[K, V], bool) {
	c := &batchCall[K, V]{key: key, done: make(chan bool, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, c)
	lead := !b.running
	b.running = true
	return c, lead
}

// wait waits, for a queued call c, until its batch ran (false) or it is
// told to run the next batch (true); if ctx ends first while c is still
// queued, c leaves the queue and wait returns ctx.Err().
func (b *Batcher[K, V]) wait(ctx context.Context, c *batchCall[K, V]) (bool, error) {
	select {
	case lead := <-c.done:
		return lead, nil
	case <-ctx.Done():
	}
	if b.leave(c) {
		return false, ctx.Err()
	}
	// Taken into the batch being run, or told to run the next one.
	return <-c.done, nil
}

// leave takes c out of the queue if it is still there and not told to
// run the next batch (both change only under mu): no batch holds it then,
// and none will.
func (b *Batcher[K, V]) leave(c *batchCall[K, V]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, c)
	if i < 0 || len(c.done) > 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	return true
}

// lead runs the batch of c, the oldest call queued, and those behind it
// (up to most), gives each its result and hands on to the oldest call
// still queued.
func (b *Batcher[K, V]) lead(c *batchCall[K, V], most int, run func(keys []K) (map[K]V, error)) (V, error) {
	b.mu.Lock()
	batch := b.queue[:min(len(b.queue), max(1, most))]
	b.queue = b.queue[len(batch):]
	b.mu.Unlock()
	keys := make([]K, len(batch))
	for i, x := range batch {
		keys[i] = x.key
	}
	got, err, panicked := b.runSafely(run, keys)
	for _, x := range batch {
		x.v, x.err = got[x.key], err
	}
	b.mu.Lock()
	if len(b.queue) > 0 {
		b.queue[0].done <- true
	} else {
		b.running, b.queue = false, nil
	}
	b.mu.Unlock()
	for _, x := range batch[1:] {
		x.done <- false
	}
	if panicked != nil {
		panic(panicked) // the batch's other calls got an error and go on
	}
	return c.v, c.err
}

// runSafely runs run; a panic is returned (with an error for every call
// of the batch) instead of leaving the Batcher running for ever.
func (b *Batcher[K, V]) runSafely(run func(keys []K) (map[K]V, error), keys []K) (got map[K]V, err error, panicked any) {
	defer func() {
		if r := recover(); r != nil {
			got, err, panicked = nil, fmt.Errorf("batch: panic: %v", r), r
		}
	}()
	got, err = run(keys)
	return got, err, nil
}

// Queued is how many calls wait for the batch being run.
func (b *Batcher[K, V]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

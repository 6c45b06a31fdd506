package service

import (
	"fmt"
	"sync"
)

// batcher gathers the concurrent calls of one operation on keys into
// batches: a call that finds no batch being run runs its own with every
// call queued meanwhile, up to most, in one call of run; then the oldest
// call still queued, if any, runs the next batch. Every call returns once
// the batch holding it ran, with its key's result and the batch's error.
// A storm's calls (a node's fleet reconnecting at once) then cost one
// statement per batch instead of one each, and no timer delays a lone
// call: a batch is what queued while the one before it ran.
type batcher[V any] struct {
	mu sync.Mutex
	// running: a batch is being run; queue holds the calls not run yet,
	// oldest first (empty whenever running is false).
	running bool
	queue   []*batchCall[V]
}

// batchCall is one queued call: its key, where it is told that its batch
// ran (false) or that it runs the next batch (true), and its result.
type batchCall[V any] struct {
	key  string
	done chan bool
	v    V
	err  error
}

// do queues key and returns its result once run ran the batch holding
// it. run gets the batch's keys (a key twice if two calls asked for it)
// and returns the results by key; a key it leaves out gets V's zero value.
func (b *batcher[V]) do(key string, most int, run func(keys []string) (map[string]V, error)) (V, error) {
	c := &batchCall[V]{key: key, done: make(chan bool, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if !lead && !<-c.done {
		return c.v, c.err // run in another call's batch
	}
	// c is the oldest call queued: the batch is it and those behind it.
	b.mu.Lock()
	batch := b.queue[:min(len(b.queue), max(1, most))]
	b.queue = b.queue[len(batch):]
	b.mu.Unlock()
	keys := make([]string, len(batch))
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
// of the batch) instead of leaving the batcher running for ever.
func (b *batcher[V]) runSafely(run func(keys []string) (map[string]V, error), keys []string) (got map[string]V, err error, panicked any) {
	defer func() {
		if r := recover(); r != nil {
			got, err, panicked = nil, fmt.Errorf("batch: panic: %v", r), r
		}
	}()
	got, err = run(keys)
	return got, err, nil
}

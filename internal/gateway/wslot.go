package gateway

import "sync"

// writeSlot is a session's write token: whoever holds it writes to the
// terminal, so at most one data frame is written at a time. It was a
// chan struct{} of capacity 1, whose 96 bytes every session, idle or not,
// held for its life; this is a mutex, a flag and, only while writers wait
// for the slot, a queue of them.
type writeSlot struct {
	mu   sync.Mutex
	held bool
	// waiting are the writers that wait for the slot, first first.
	waiting *slotWaiter
}

// slotWaiter is a writer waiting for the slot: the slot is handed to it
// by a token on ch.
type slotWaiter struct {
	ch   chan struct{}
	next *slotWaiter
}

// tryTake takes the slot if it is free.
func (w *writeSlot) tryTake() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held {
		return false
	}
	w.held = true
	return true
}

// take takes the slot if it is free and returns nil, or queues the caller
// and returns its waiter: the slot is the caller's once the waiter's ch
// receives, unless it gives up first (leave).
func (w *writeSlot) take() *slotWaiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.held {
		w.held = true
		return nil
	}
	me := &slotWaiter{ch: make(chan struct{}, 1)}
	p := &w.waiting
	for *p != nil {
		p = &(*p).next
	}
	*p = me
	return me
}

// leave gives up waiting for the slot; if it was handed over meanwhile, it
// is passed on.
func (w *writeSlot) leave(me *slotWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := &w.waiting; *p != nil; p = &(*p).next {
		if *p == me {
			*p = me.next
			return
		}
	}
	w.handOn() // me holds the slot
}

// release gives the slot back, or to the next writer waiting.
func (w *writeSlot) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handOn()
}

// handOn passes the held slot to the first writer waiting or frees it;
// w.mu is held.
func (w *writeSlot) handOn() {
	if next := w.waiting; next != nil {
		w.waiting = next.next
		next.ch <- struct{}{} // never blocks: one token per waiter
		return
	}
	w.held = false
}

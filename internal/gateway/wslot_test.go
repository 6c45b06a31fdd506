package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteSlot(t *testing.T) {
	var w writeSlot
	if !w.tryTake() {
		t.Fatal("tryTake of a free slot failed")
	}
	if w.tryTake() {
		t.Fatal("tryTake of a held slot succeeded")
	}
	w1, w2 := w.take(), w.take()
	if w1 == nil || w2 == nil {
		t.Fatal("take of a held slot did not queue")
	}
	w.release() // to w1, the first
	select {
	case <-w1.ch:
	default:
		t.Fatal("release did not hand the slot to the first waiter")
	}
	w.leave(w2) // gives up while queued
	w.release() // w1 done: nobody waits
	if !w.tryTake() {
		t.Fatal("the slot is not free after its last holder released it")
	}

	// A waiter that gives up after the slot was handed to it passes it on.
	w3 := w.take()
	w.release()
	w.leave(w3)
	if !w.tryTake() {
		t.Fatal("the slot handed to a waiter that left was not passed on")
	}
	w.release()
}

func TestWriteSlotExclusive(t *testing.T) {
	var w writeSlot
	var in atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if waiter := w.take(); waiter != nil {
					if (g+i)%3 == 0 { // gives up at once
						w.leave(waiter)
						continue
					}
					select {
					case <-waiter.ch:
					case <-time.After(time.Millisecond):
						w.leave(waiter)
						continue
					}
				}
				if in.Add(1) != 1 {
					t.Error("two holders of the write slot")
				}
				in.Add(-1)
				w.release()
			}
		}()
	}
	wg.Wait()
	if !w.tryTake() {
		t.Fatal("the slot is held after every writer is done")
	}
}

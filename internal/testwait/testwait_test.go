package testwait

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if !Until(Timeout, func() bool { return n.Load() == 3 }) {
		t.Fatal("Until returned false for a condition that came to hold")
	}
	polls := 0
	if Until(5*time.Millisecond, func() bool { polls++; return false }) {
		t.Fatal("Until returned true for a condition that never holds")
	}
	if polls < 2 {
		t.Errorf("Until polled %d times in its bound, want it to poll again before giving up", polls)
	}
	polls = 0
	if !Until(0, func() bool { polls++; return true }) || polls != 1 {
		t.Errorf("a condition that holds at once: polled %d times, want 1 and true", polls)
	}
}

func TestForPasses(t *testing.T) {
	var n atomic.Int32
	go n.Store(1)
	For(t, "the store", func() bool { return n.Load() == 1 })
	calls := 0
	ForNil(t, "the third call", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("ForNil called f %d times, want 3 (until it returned nil)", calls)
	}
}

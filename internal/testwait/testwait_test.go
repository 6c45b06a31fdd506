package testwait

import (
	"errors"
	"fmt"
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
	if Until(5*time.Millisecond, func() bool { polls++; return false }) || polls == 0 {
		t.Fatalf("Until over a condition that never holds: true, or no poll (%d)", polls)
	}
	polls = 0
	if !Until(Timeout, func() bool { polls++; return polls == 3 }) || polls != 3 {
		t.Errorf("a condition that holds at the third poll: polled %d times, want 3 and true", polls)
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

// fatalTB records what Fatalf would end the test with.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestFailureSaysWhatAndLastError(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"nil at once", func() error { return nil }, ""},
		{"never nil", func() error { return errors.New("state X") }, "timed out after 5ms waiting for the thing: state X"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := &fatalTB{TB: t}
			forNil(tb, 5*time.Millisecond, "the thing", tc.f)
			if tb.failed != tc.want {
				t.Errorf("failed with %q, want %q", tb.failed, tc.want)
			}
		})
	}
}

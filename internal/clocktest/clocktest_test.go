package clocktest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/testwait"
)

var epoch = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func TestAdvanceRunsDueCallsInOrder(t *testing.T) {
	c := New(epoch)
	var mu sync.Mutex
	var got []string
	add := func(s string) func() {
		return func() { mu.Lock(); got = append(got, s); mu.Unlock() }
	}
	c.AfterFunc(3*time.Second, add("c"))
	c.AfterFunc(time.Second, add("a"))
	stopped := c.AfterFunc(2*time.Second, add("never"))
	c.AfterFunc(2*time.Second, func() {
		add("b")()
		// A call may arm another; one due within the advance runs too.
		c.AfterFunc(500*time.Millisecond, add("b+"))
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending call must report true once")
	}
	c.Advance(2500 * time.Millisecond)
	mu.Lock()
	if want := "a b b+"; join(got) != want {
		t.Errorf("after 2.5s ran %q, want %q", join(got), want)
	}
	mu.Unlock()
	if !c.Now().Equal(epoch.Add(2500 * time.Millisecond)) {
		t.Errorf("Now = %v", c.Now())
	}
	c.Advance(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if want := "a b b+ c"; join(got) != want {
		t.Errorf("after 3.5s ran %q, want %q", join(got), want)
	}
	if c.Pending() != 0 {
		t.Errorf("Pending = %d", c.Pending())
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestNowAtTheCall(t *testing.T) {
	c := New(epoch)
	var at time.Time
	c.AfterFunc(time.Minute, func() { at = c.Now() })
	c.Advance(time.Hour)
	if !at.Equal(epoch.Add(time.Minute)) {
		t.Errorf("a call due at +1m saw Now = %v", at)
	}
}

func TestWaitForAnotherGoroutinesTimer(t *testing.T) {
	c := New(epoch)
	var fired atomic.Bool
	go func() {
		time.Sleep(10 * time.Millisecond) // the code under test arms it "later": what the test simulates, not a wait
		c.AfterFunc(5*time.Second, func() { fired.Store(true) })
	}()
	if !c.WaitFor(5 * time.Second) {
		t.Fatal("the timer was never armed")
	}
	c.AfterFunc(time.Second, func() {})
	if c.BlockUntil(20*time.Millisecond, func(due []time.Duration) bool { return len(due) == 1 }) {
		t.Error("BlockUntil held with two calls pending")
	}
	c.Advance(time.Second)
	c.Advance(4 * time.Second)
	if !fired.Load() {
		t.Error("the call did not run")
	}
	if c.BlockUntil(20*time.Millisecond, func(due []time.Duration) bool { return len(due) > 0 }) {
		t.Error("BlockUntil held with nothing pending")
	}
}

func TestAfterAndEvery(t *testing.T) {
	c := New(epoch)
	ch, stop := service.After(c, time.Second)
	defer stop()
	select {
	case <-ch:
		t.Fatal("closed before the clock moved")
	default:
	}
	c.Advance(time.Second)
	<-ch

	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() { service.Every(ctx, c, time.Minute, func() { n.Add(1) }); close(done) }()
	for i := range 3 {
		if !c.WaitFor(time.Minute) {
			t.Fatalf("round %d never armed", i)
		}
		c.Advance(time.Minute)
		testwait.For(t, fmt.Sprintf("round %d to run", i), func() bool { return n.Load() == int32(i+1) })
	}
	cancel()
	<-done
	if c.Pending() != 0 {
		t.Errorf("Every left %d timers", c.Pending())
	}
}

func TestImmediateCall(t *testing.T) {
	c := New(epoch)
	ran := make(chan struct{})
	c.AfterFunc(0, func() { close(ran) })
	<-ran
}

func TestSet(t *testing.T) {
	c := New(epoch)
	var ran atomic.Int32
	c.AfterFunc(time.Hour, func() { ran.Add(1) })
	c.AfterFunc(3*time.Hour, func() { ran.Add(10) })
	c.Set(epoch.Add(2 * time.Hour)) // forward: the call due on the way runs
	if ran.Load() != 1 || !c.Now().Equal(epoch.Add(2*time.Hour)) {
		t.Fatalf("after Set(+2h): ran %d, Now %v; want 1, +2h", ran.Load(), c.Now())
	}
	c.Set(epoch) // backward: only the time changes
	if ran.Load() != 1 || !c.Now().Equal(epoch) || c.Pending() != 1 {
		t.Fatalf("after Set(epoch): ran %d, Now %v, pending %d; want 1, epoch, 1", ran.Load(), c.Now(), c.Pending())
	}
	c.Advance(2 * time.Hour) // the +3h call is still due at its own time
	if ran.Load() != 1 {
		t.Fatalf("the call due at +3h ran at +2h")
	}
	c.Advance(time.Hour)
	if ran.Load() != 11 {
		t.Errorf("ran %d after +3h, want 11", ran.Load())
	}
}

func TestBlockUntilWaiters(t *testing.T) {
	c := New(epoch)
	armed := make(chan struct{})
	for range 2 {
		go func() {
			<-armed
			c.AfterFunc(time.Second, func() {})
		}()
	}
	close(armed)
	if !c.BlockUntilWaiters(2) {
		t.Fatal("two calls were armed, BlockUntilWaiters(2) did not see them")
	}
	if got := c.Pending(); got != 2 {
		t.Errorf("Pending = %d, want 2", got)
	}
	c.Advance(time.Second)
	if c.BlockUntil(20*time.Millisecond, func(due []time.Duration) bool { return len(due) >= 1 }) {
		t.Error("calls still pending after they ran")
	}
}

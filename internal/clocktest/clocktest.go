// Package clocktest is a fake instore.Clock for tests: time stands still
// until the test moves it (Advance), and the calls that fall due then run
// in time order. A test that needs the code under test to have armed its
// timers first waits for them (BlockUntil) instead of sleeping.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/instore-dev/instore"
)

// Clock is a fake clock. Its zero value is not usable: use New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	pending []*timer
	changed *sync.Cond
}

type timer struct {
	c    *Clock
	at   time.Time
	seq  int
	f    func()
	done bool
}

var _ instore.Clock = (*Clock)(nil)

// New returns a clock at t.
func New(t time.Time) *Clock {
	c := &Clock{now: t}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f once the clock has been advanced by d (at once, in
// its own goroutine, when d <= 0).
func (c *Clock) AfterFunc(d time.Duration, f func()) instore.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		t.done = true
		go f()
		return t
	}
	c.pending = append(c.pending, t)
	c.changed.Broadcast()
	return t
}

// Stop removes the call if it has not run.
func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	for i, p := range c.pending {
		if p == t {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			break
		}
	}
	c.changed.Broadcast()
	return true
}

// Advance moves the clock forward by d and runs, in time order, every call
// that falls due, each to its end before the next (outside the clock's
// lock, so a call may arm new timers; one that falls due within d runs
// too).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.Slice(c.pending, func(i, j int) bool {
			if !c.pending[i].at.Equal(c.pending[j].at) {
				return c.pending[i].at.Before(c.pending[j].at)
			}
			return c.pending[i].seq < c.pending[j].seq
		})
		if len(c.pending) == 0 || c.pending[0].at.After(end) {
			break
		}
		t := c.pending[0]
		c.pending = c.pending[1:]
		t.done = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.changed.Broadcast()
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.changed.Broadcast()
	c.mu.Unlock()
}

// Set moves the clock to t: forward, it is Advance(t - Now()), which runs
// the calls falling due on the way; backward (or to the same time), it
// only resets the time, and no call runs.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	d := t.Sub(c.now)
	if d <= 0 {
		c.now = t
		c.changed.Broadcast()
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.Advance(d)
}

// Pending returns how many calls wait for the clock.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// BlockUntil waits until cond holds for the calls waiting for the clock
// (their due times, from now), or timeout passes in real time; it reports
// whether cond held. Tests wait with it for the code under test to arm a
// timer before they advance past it.
func (c *Clock) BlockUntil(timeout time.Duration, cond func(due []time.Duration) bool) bool {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer wake.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		due := make([]time.Duration, len(c.pending))
		for i, t := range c.pending {
			due[i] = t.at.Sub(c.now)
		}
		if cond(due) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		c.changed.Wait()
	}
}

// BlockUntilWaiters waits (up to 10 s in real time) until at least n calls
// wait for the clock, and reports whether they do. The server's periodic
// sweeps keep calls of their own pending, so server tests use WaitFor,
// which names the time-out they mean to pass.
func (c *Clock) BlockUntilWaiters(n int) bool {
	return c.BlockUntil(10*time.Second, func(due []time.Duration) bool { return len(due) >= n })
}

// WaitFor waits (up to 10 s in real time) until a call is due d from now
// (within the millisecond before: times are stored to the microsecond),
// and reports whether one is. Periodic calls due at other times do not
// count, so a test waits for the very time-out it means to pass.
func (c *Clock) WaitFor(d time.Duration) bool {
	return c.BlockUntil(10*time.Second, func(due []time.Duration) bool {
		for _, x := range due {
			if x <= d && x > d-time.Millisecond {
				return true
			}
		}
		return false
	})
}

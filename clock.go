package instore

import (
	"context"
	"time"
)

// Clock is the time the Service runs on: every time-out of a transaction's
// life (the ack time-out, the deadline, the print time-out), the waits for
// a change and the periodic sweeps are measured on it. Production uses
// RealClock; tests drive a fake one (internal/clocktest) instead of
// sleeping. An interface of two methods rather than a library: this is all
// the service needs of time, and the fake that implements it is small
// enough to read in one sitting (docs/decisions.md, "Time is injected").
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed on the
	// clock; the Timer stops it.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not run; it reports whether it
	// stopped it.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// After returns a channel closed once d has passed on c, and a function
// that releases its timer.
func After(c Clock, d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := c.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}

// Every calls f every interval on c until ctx ends (the first call one
// interval from now); each next interval starts when f returns.
func Every(ctx context.Context, c Clock, interval time.Duration, f func()) {
	for {
		ch, stop := After(c, interval)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-ch:
		}
		f()
	}
}

// clock is the Service's Clock: Clock, or the wall clock.
func (s *Service) clock() Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return RealClock{}
}

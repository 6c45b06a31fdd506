package service

import (
	"context"
	"time"

	"github.com/instore-dev/instore"
)

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) instore.Timer { return time.AfterFunc(d, f) }

// After returns a channel closed once d has passed on c, and a function
// that releases its timer.
func After(c instore.Clock, d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := c.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}

// Every calls f every interval on c until ctx ends (the first call one
// interval from now); each next interval starts when f returns.
func Every(ctx context.Context, c instore.Clock, interval time.Duration, f func()) {
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

// WithNow is c with its time of day read from now instead, its timers
// still c's (nil c: the wall clock's): for a process whose time of day is
// set apart from the clock that runs its time-outs (the server's
// Config.Now, the admin's Now).
func WithNow(c instore.Clock, now func() time.Time) instore.Clock {
	if c == nil {
		c = RealClock{}
	}
	return nowClock{Clock: c, now: now}
}

type nowClock struct {
	instore.Clock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// clock is the Service's Clock: Clock, or the wall clock.
func (s *Service) clock() instore.Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return RealClock{}
}

package service

import (
	"context"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/wallclock"
)

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

// clock is the Service's Clock: Clock, or the wall clock.
func (s *Service) clock() instore.Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return wallclock.Clock{}
}

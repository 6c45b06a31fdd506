package loadtest

import (
	"context"
	"errors"
	"time"
)

// op is a kind of request: workers goroutines call fn in a loop.
type op struct {
	name, unit string
	workers    int
	// fn does one request (or one purchase life) as worker w.
	fn func(ctx context.Context, w int) error
}

// errSkip from an op's fn means it did nothing this time: neither a
// request nor an error.
var errSkip = errors.New("skip")

// sleepUntil waits until t; it reports true if early closed first.
func sleepUntil(ctx context.Context, t time.Time, early <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	case <-early:
		return true
	}
	return false
}

package server_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/server"
)

// The service's time-outs run on its clock: these tests drive a fake one
// (internal/clocktest) instead of waiting for them in real time.

// newClock returns a fake clock at the current time and the option that
// gives it to a server.
func newClock() (*clocktest.Clock, func(*server.Config)) {
	ck := clocktest.New(time.Now().UTC())
	return ck, func(c *server.Config) { c.Clock = ck }
}

// advance waits until the server armed a time-out due d from now (bounded,
// in real time), then moves the clock by d, running what falls due. Tests
// pick durations the periodic sweeps do not have (30 s, 10 min).
func advance(t *testing.T, ck *clocktest.Clock, d time.Duration) {
	t.Helper()
	if !ck.WaitFor(d) {
		t.Fatalf("no time-out due within %s was armed", d)
	}
	ck.Advance(d)
}

// advanceDuring runs req, a request that waits for a time-out of d, while
// the clock is advanced past it (advance), and returns req's answer.
func advanceDuring(t *testing.T, ck *clocktest.Clock, d time.Duration, req func() reply) reply {
	t.Helper()
	answer := make(chan reply, 1)
	go func() { answer <- req() }()
	advance(t, ck, d)
	return <-answer
}

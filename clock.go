package instore

import (
	"time"
)

// Clock is the time the Service runs on: every time-out of a transaction's
// life (the ack time-out, the deadline, the print time-out), the waits for
// a change and the periodic sweeps are measured on it. Production uses
// the wall clock (internal/wallclock); tests drive a fake one (internal/clocktest) instead of
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

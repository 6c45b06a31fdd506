// Package wallclock is the wall clock as an instore.Clock: the clock of a
// process, and what a component given no Clock (nil) runs on. It lives
// outside the root package, which starts no goroutine (time.AfterFunc
// does).
package wallclock

import (
	"time"

	"github.com/instore-dev/instore"
)

// Clock is the wall clock.
type Clock struct{}

// Now returns time.Now().
func (Clock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Clock) AfterFunc(d time.Duration, f func()) instore.Timer { return time.AfterFunc(d, f) }

// Or returns c, or the wall clock when c is nil.
func Or(c instore.Clock) instore.Clock {
	if c == nil {
		return Clock{}
	}
	return c
}

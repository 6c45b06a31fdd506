package clocktest

import (
	"sync/atomic"
	"time"

	"github.com/instore-dev/instore"
)

// Shifted is a clock whose time of day is its base's moved by an offset
// the test sets (Shift), and whose timers are its base's: the time of day
// steps, as a wall clock does when it is set, while the timers keep
// measuring durations. A test of a rule on the time of day (a listing
// window, a retention bound) gives a process this one clock and moves its
// time of day days ahead, without running every periodic sweep in
// between as Advance would.
type Shifted struct {
	base   instore.Clock
	offset atomic.Int64 // time.Duration
}

var _ instore.Clock = (*Shifted)(nil)

// Shift returns base shifted by offset.
func Shift(base instore.Clock, offset time.Duration) *Shifted {
	s := &Shifted{base: base}
	s.offset.Store(int64(offset))
	return s
}

// Now returns the base's time moved by the offset.
func (s *Shifted) Now() time.Time { return s.base.Now().Add(time.Duration(s.offset.Load())) }

// AfterFunc is the base's: d passes on the base, whatever the offset.
func (s *Shifted) AfterFunc(d time.Duration, f func()) instore.Timer { return s.base.AfterFunc(d, f) }

// Shift sets the offset (from the base's time, not from the last one); no
// call falls due by it.
func (s *Shifted) Shift(offset time.Duration) { s.offset.Store(int64(offset)) }

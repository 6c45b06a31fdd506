package wallclock_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/wallclock"
)

func TestOr(t *testing.T) {
	if _, ok := wallclock.Or(nil).(wallclock.Clock); !ok {
		t.Errorf("Or(nil) = %T, want the wall clock", wallclock.Or(nil))
	}
	fake := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if got := wallclock.Or(fake); got != instore.Clock(fake) {
		t.Errorf("Or(fake) = %v, want the fake", got)
	}
}

func TestAfterFunc(t *testing.T) {
	done := make(chan struct{})
	wallclock.Clock{}.AfterFunc(time.Millisecond, func() { close(done) })
	<-done // the call runs (bounded by the test's own timeout)
	if n := (wallclock.Clock{}).Now(); n.IsZero() {
		t.Error("Now is zero")
	}
}

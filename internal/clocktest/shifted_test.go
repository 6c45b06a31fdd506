package clocktest

import (
	"testing"
	"time"
)

func TestShiftedNow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []time.Duration // set in turn; the last is in force
		advance time.Duration   // the base moves by it
		want    time.Time
	}{
		{"no offset", []time.Duration{0}, 0, epoch},
		{"ahead", []time.Duration{200 * 24 * time.Hour}, 0, epoch.Add(200 * 24 * time.Hour)},
		{"behind", []time.Duration{-time.Hour}, 0, epoch.Add(-time.Hour)},
		{"set again, not added", []time.Duration{time.Hour, 25 * time.Hour}, 0, epoch.Add(25 * time.Hour)},
		{"follows its base", []time.Duration{time.Hour}, time.Minute, epoch.Add(time.Hour + time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := New(epoch)
			s := Shift(base, 0)
			for _, o := range tc.offsets {
				s.Shift(o)
			}
			base.Advance(tc.advance)
			if got := s.Now(); !got.Equal(tc.want) {
				t.Errorf("Now() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShiftedTimersAreTheBase: a shift runs no call; the base's time
// does, d after it was armed, and Stop stops it.
func TestShiftedTimersAreTheBase(t *testing.T) {
	base := New(epoch)
	s := Shift(base, time.Hour)
	ran := make(chan struct{}, 2)
	s.AfterFunc(time.Second, func() { ran <- struct{}{} })
	stopped := s.AfterFunc(time.Second, func() { ran <- struct{}{} })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending call = false")
	}
	s.Shift(48 * time.Hour)
	if base.Pending() != 1 || len(ran) != 0 {
		t.Fatalf("after a shift: %d pending, %d ran; want 1 pending, none run", base.Pending(), len(ran))
	}
	base.Advance(999 * time.Millisecond)
	if len(ran) != 0 {
		t.Fatalf("the call ran before its second passed on the base")
	}
	base.Advance(time.Millisecond)
	if base.Pending() != 0 || len(ran) != 1 {
		t.Errorf("after a second on the base: %d pending, %d ran; want none pending, 1 run", base.Pending(), len(ran))
	}
}

// Package testwait is the one way a test waits for an outcome no event
// announces: another process coming up, a state another goroutine reaches
// over the network. It polls a condition, briefly at first and then at a
// short interval, bounded by a generous time-out (the machine running the
// tests may be loaded), and fails the test with what it waited for.
//
// A test waits on a channel, the fake clock (internal/clocktest) or
// testing/synctest instead wherever the code under test offers one; it
// never sleeps a fixed time in the hope that the code is done. Like the
// rest of the project's test support, it imports nothing of the project.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// Timeout bounds every wait of For and ForNil: far longer than any
// outcome should take, so that only a real failure reaches it.
const Timeout = 30 * time.Second

// maxInterval is the longest pause between two polls; the first pauses
// are shorter, so that a quick outcome is seen quickly.
const maxInterval = 20 * time.Millisecond

// For polls cond until it holds, and fails the test (tb.Fatalf, so from
// the test's goroutine only) if it does not within Timeout.
func For(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	forNil(tb, Timeout, what, func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

// ForNil polls f until it returns nil, and fails the test with what and
// f's last error if it does not within Timeout.
func ForNil(tb testing.TB, what string, f func() error) {
	tb.Helper()
	forNil(tb, Timeout, what, f)
}

var errNotYet = errors.New("the condition never held")

func forNil(tb testing.TB, timeout time.Duration, what string, f func() error) {
	tb.Helper()
	var err error
	if !Until(timeout, func() bool { err = f(); return err == nil }) {
		tb.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

// Until polls cond until it holds or timeout passes, and reports whether
// it held. It is for a caller that does something else than fail the
// test when it does not (a goroutine other than the test's, a wait with
// a bound of its own).
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause) // between two polls: the poll, not the pause, waits for the outcome
		pause = min(2*pause, maxInterval)
	}
	return true
}

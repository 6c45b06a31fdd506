package lifecycle_test

import (
	"fmt"
	"testing"
	"time"
)

// t0 is the time the lifecycle tests start from.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// everyPair runs check, as the subtest "state/event", over every pair of
// a state and an event of a machine's table test: w is the table's
// expectation for the pair. A pair the table does not name, or a state of
// the table that is no state, fails the test.
func everyPair[S comparable, X, E, W any](t *testing.T, states map[S]X, events map[string]E, table map[S]map[string]W,
	check func(t *testing.T, state S, x X, ev E, w W)) {
	t.Helper()
	for sname, x := range states {
		for ename, ev := range events {
			w, ok := table[sname][ename]
			if !ok {
				t.Errorf("no expectation for (%v, %s)", sname, ename)
				continue
			}
			t.Run(fmt.Sprintf("%v/%s", sname, ename), func(t *testing.T) { check(t, sname, x, ev, w) })
		}
	}
	for sname := range table {
		if _, ok := states[sname]; !ok {
			t.Errorf("table state %v is no state", sname)
		}
	}
}

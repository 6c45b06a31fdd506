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

// everyRecordPair runs everyPair over a machine of a record that may be
// absent (nil, the state ""), over the machine's own lists of states and
// events, so that a state or event added to them is run with no change to
// the test: of(state) is the record in that state, next the machine's
// step. A pair wants does not name wants the zero W: the record unchanged
// (next returns it, not ok). The record given must never be changed;
// check checks every other pair's step.
func everyRecordPair[S, E ~string, R, W comparable](t *testing.T, states []S, events []E, wants map[S]map[E]W,
	of func(S) *R, next func(*R, E) (*R, bool), check func(t *testing.T, state S, next *R, ok bool, w W)) {
	t.Helper()
	byName := map[string]E{}
	for _, ev := range events {
		byName[string(ev)] = ev
	}
	named := map[S]S{}
	table := map[S]map[string]W{}
	for _, s := range states {
		named[s], table[s] = s, map[string]W{}
		for _, ev := range events {
			table[s][string(ev)] = wants[s][ev]
		}
	}
	for s := range wants {
		if _, ok := named[s]; !ok {
			t.Errorf("wanted state %v is no state", s)
		}
	}
	everyPair(t, named, byName, table, func(t *testing.T, state S, _ S, ev E, w W) {
		r := of(state)
		var before R
		if r != nil {
			before = *r
		}
		n, ok := next(r, ev)
		if r != nil && *r != before {
			t.Fatalf("the record given was changed: %+v", *r)
		}
		var unchanged W
		if w == unchanged {
			if ok || n != r {
				t.Fatalf("next = %+v, %v; want unchanged", n, ok)
			}
			return
		}
		check(t, state, n, ok, w)
	})
}

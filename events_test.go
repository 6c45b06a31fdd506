package instore_test

import (
	"testing"

	"github.com/instore-dev/instore"
)

// TestParseEventID: an event id is evt_ and 1-19 digits, or the digits
// alone; EventID's form round-trips; a sign, a space, another prefix or
// more digits than an int64 holds are refused (-1: refused).
func TestParseEventID(t *testing.T) {
	for id, want := range map[string]int64{
		"evt_0000000000000042":     42,
		instore.EventID(1 << 60):   1 << 60,
		"evt_1":                    1,
		"42":                       42,
		"evt_0":                    0,
		"evt_9223372036854775807":  9223372036854775807,
		"evt_9223372036854775808":  -1,
		"evt_00000000000000000042": -1,
		"evt_+42":                  -1,
		"+42":                      -1,
		"evt_-1":                   -1,
		"evt_ 42":                  -1,
		"evt_42 ":                  -1,
		"evt_":                     -1,
		"":                         -1,
		"EVT_42":                   -1,
		"txn_42":                   -1,
		"evt_evt_42":               -1,
		"evt_4\x002":               -1,
		"evt_٤٢":                   -1,
	} {
		got, ok := instore.ParseEventID(id)
		if ok != (want >= 0) || ok && got != want {
			t.Errorf("ParseEventID(%q) = %d, %v; want %d (-1: refused)", id, got, ok, want)
		}
	}
}

package instore_test

import (
	"testing"

	"github.com/instore-dev/instore"
)

// TestParseEventID: an event id is evt_ and 1-19 digits, or the digits
// alone; EventID's form round-trips; a sign, a space, another prefix or
// more digits than an int64 holds are refused.
func TestParseEventID(t *testing.T) {
	rows := []struct {
		id   string
		want int64
		ok   bool
	}{
		{"evt_0000000000000042", 42, true},
		{instore.EventID(1 << 60), 1 << 60, true},
		{"evt_1", 1, true},
		{"42", 42, true},
		{"evt_0", 0, true},
		{"evt_9223372036854775807", 9223372036854775807, true},
		{"evt_9223372036854775808", 0, false},
		{"evt_00000000000000000042", 0, false},
		{"evt_+42", 0, false},
		{"+42", 0, false},
		{"evt_-1", 0, false},
		{"evt_ 42", 0, false},
		{"evt_42 ", 0, false},
		{"evt_", 0, false},
		{"", 0, false},
		{"EVT_42", 0, false},
		{"txn_42", 0, false},
		{"evt_evt_42", 0, false},
		{"evt_4\x002", 0, false},
		{"evt_٤٢", 0, false},
	}
	for _, r := range rows {
		got, ok := instore.ParseEventID(r.id)
		if got != r.want || ok != r.ok {
			t.Errorf("ParseEventID(%q) = %d, %v; want %d, %v", r.id, got, ok, r.want, r.ok)
		}
	}
}

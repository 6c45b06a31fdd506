package lifecycle_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

var batchErrorIDs = map[string]int{instore.WP25: 25, instore.WP23: 23}

// TestNextBatch runs every (state, event) pair of a close.
func TestNextBatch(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 18, 0, 0, 0, time.UTC)
	sale := instore.BatchItem{Ref: "txn_1", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000, Currency: "SEK"}
	extra := instore.BatchItem{Ref: "T-9", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 500, Currency: "SEK"}
	report := instore.BatchReport{MessageID: "m-7", BatchID: "bat_1", Number: 7, Items: []instore.BatchItem{sale, extra}}
	events := map[string]lifecycle.BatchEvent{
		string(lifecycle.BatchRequested):  {Kind: lifecycle.BatchRequested, At: t0},
		string(lifecycle.BatchReported):   {Kind: lifecycle.BatchReported, At: t0.Add(time.Second), Report: report, Service: []instore.BatchItem{sale}},
		string(lifecycle.BatchTimedOut):   {Kind: lifecycle.BatchTimedOut, At: t0.Add(10 * time.Second)},
		string(lifecycle.BatchSendFailed): {Kind: lifecycle.BatchSendFailed, At: t0},
		"BOGUS":                           {Kind: "BOGUS", At: t0},
	}
	wp25 := 25
	states := map[string]instore.Batch{
		"new":     {ID: "bat_1", ClosedAt: t0},
		"pending": {ID: "bat_1", ClosedAt: t0, State: instore.BatchPending},
		"failed":  {ID: "bat_1", ClosedAt: t0, State: instore.BatchFailed, ErrorID: &wp25},
		"closed":  {ID: "bat_1", ClosedAt: t0, State: instore.BatchClosed, Number: 6, MessageID: "m-6", Matched: true},
	}
	type want struct {
		state                        instore.BatchState
		changed, send, closed, ended bool
		refused                      bool
		errorID                      int // 0: none
	}
	requested, reported := string(lifecycle.BatchRequested), string(lifecycle.BatchReported)
	timedOut, sendFailed := string(lifecycle.BatchTimedOut), string(lifecycle.BatchSendFailed)
	refusedNew := want{state: lifecycle.BatchNew, refused: true}
	failed25 := want{state: instore.BatchFailed, errorID: 25}
	closed := want{state: instore.BatchClosed}
	table := map[string]map[string]want{
		"new": {
			requested: {state: instore.BatchPending, changed: true, send: true},
			reported:  refusedNew, timedOut: refusedNew, sendFailed: refusedNew, "BOGUS": refusedNew,
		},
		"pending": {
			requested:  {state: instore.BatchPending, refused: true},
			reported:   {state: instore.BatchClosed, changed: true, closed: true, ended: true},
			timedOut:   {state: instore.BatchFailed, changed: true, ended: true, errorID: 25},
			sendFailed: {state: instore.BatchFailed, changed: true, ended: true, errorID: 23},
			"BOGUS":    {state: instore.BatchPending, refused: true},
		},
		"failed": {
			requested: {state: instore.BatchFailed, refused: true, errorID: 25},
			reported:  {state: instore.BatchClosed, changed: true, closed: true, errorID: 25},
			timedOut:  failed25, sendFailed: failed25, "BOGUS": failed25,
		},
		"closed": {
			requested: {state: instore.BatchClosed, refused: true},
			reported:  closed, timedOut: closed, sendFailed: closed, "BOGUS": closed,
		},
	}
	everyPair(t, states, events, table, func(t *testing.T, sname string, batch instore.Batch, ev lifecycle.BatchEvent, w want) {
		b, st := lifecycle.NextBatch(batch, ev, batchErrorIDs)
		name := sname + " " + string(ev.Kind)
		got := want{state: b.State, changed: st.Changed, send: st.Send, closed: st.Closed, ended: st.Ended, refused: st.Refused != nil}
		if b.ErrorID != nil {
			got.errorID = *b.ErrorID
		}
		if got != w {
			t.Errorf("NextBatch(%s) = %+v, want %+v", name, got, w)
		}
		if st.Closed {
			if b.Number != 7 || b.MessageID != "m-7" || b.ReportedAt == nil || len(b.TerminalItems) != 2 {
				t.Errorf("NextBatch(%s) stored number %d, message %q, items %d; want the report's", name, b.Number, b.MessageID, len(b.TerminalItems))
			}
			if b.Matched || len(b.Differences) != 1 || b.Differences[0].Kind != instore.MissingInService || b.Differences[0].Ref != "T-9" {
				t.Errorf("NextBatch(%s) comparison = matched %v, %+v; want one MISSING_IN_SERVICE T-9", name, b.Matched, b.Differences)
			}
			if len(b.TerminalTotals) != 1 || b.TerminalTotals[0].Amount != 1500 || len(b.ServiceTotals) != 1 || b.ServiceTotals[0].Amount != 1000 {
				t.Errorf("NextBatch(%s) totals = %+v / %+v", name, b.TerminalTotals, b.ServiceTotals)
			}
		}
		if sname == "closed" && (b.Number != 6 || b.MessageID != "m-6") {
			t.Errorf("NextBatch(%s) changed a closed batch: number %d, message %q", name, b.Number, b.MessageID)
		}
	})
}

func TestBatchDue(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 18, 0, 0, 0, time.UTC)
	if got := lifecycle.BatchDue(&instore.Batch{ClosedAt: t0}, 10*time.Second); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("BatchDue = %v, want %v", got, t0.Add(10*time.Second))
	}
}

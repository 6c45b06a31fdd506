package lifecycle_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextPrintEveryStateAndEvent runs a print job's life over every pair
// of a state and an event: the table gives the final status after (-1:
// none), whether the change is written, whether the job is owed to its
// terminal, and whether the event is refused.
func TestNextPrintEveryStateAndEvent(t *testing.T) {
	now := t0.Add(3 * time.Second)
	success, outOfPaper := instore.PrintSuccess, instore.PrintOutOfPaper
	base := instore.PrintJob{ID: "prt_1", MerchantID: "mer_1", TerminalID: "10000001", Lines: []string{"HELLO"}, CreatedAt: t0}
	ended := base
	ended.StatusID, ended.CompletedAt = &success, &t0
	states := map[lifecycle.PrintState]instore.PrintJob{lifecycle.PrintNew: base, lifecycle.PrintRunning: base, lifecycle.PrintEnded: ended}
	events := map[string]lifecycle.PrintEvent{
		"requested idle":        {Kind: lifecycle.PrintRequested, At: t0},
		"requested busy":        {Kind: lifecycle.PrintRequested, At: t0, Busy: true},
		"reported success":      {Kind: lifecycle.PrintReported, At: now, Status: success},
		"reported out of paper": {Kind: lifecycle.PrintReported, At: now, Status: outOfPaper},
		"timed out":             {Kind: lifecycle.PrintTimedOut, At: now},
		"send failed":           {Kind: lifecycle.PrintSendFailed, At: now},
		"unknown":               {Kind: "BOGUS", At: now},
	}
	type want struct {
		status  instore.PrintStatus // the final status after; -1 none
		at      time.Time
		changed bool
		send    bool
		refused bool
	}
	none := instore.PrintStatus(-1)
	refused := want{status: none, refused: true}
	refusedEnded := want{status: success, at: t0, refused: true}
	stands := want{status: success, at: t0}
	end := func(status instore.PrintStatus) want { return want{status: status, at: now, changed: true} }
	table := map[lifecycle.PrintState]map[string]want{
		lifecycle.PrintNew: {
			"requested idle": {status: none, changed: true, send: true}, "requested busy": {status: instore.PrintBusy, at: t0, changed: true},
			"reported success": refused, "reported out of paper": refused, "timed out": refused, "send failed": refused, "unknown": refused,
		},
		lifecycle.PrintRunning: {
			"requested idle": refused, "requested busy": refused,
			"reported success": end(success), "reported out of paper": end(outOfPaper), "timed out": end(instore.PrintTimeout),
			"send failed": end(instore.PrintError), "unknown": refused,
		},
		lifecycle.PrintEnded: {
			"requested idle": refusedEnded, "requested busy": refusedEnded,
			"reported success": stands, "reported out of paper": stands, "timed out": stands, "send failed": stands, "unknown": stands,
		},
	}
	everyPair(t, states, events, table, func(t *testing.T, sname lifecycle.PrintState, job instore.PrintJob, ev lifecycle.PrintEvent, w want) {
		next, st := lifecycle.NextPrint(sname, job, ev)
		if (st.Refused != nil) != w.refused || st.Changed != w.changed || st.Send != w.send ||
			st.Ended != (w.changed && w.status != none) {
			t.Fatalf("step %+v, want %+v", st, w)
		}
		status := none
		if next.StatusID != nil {
			status = *next.StatusID
		}
		if status != w.status {
			t.Errorf("status %d, want %d", status, w.status)
		}
		if w.status != none && (next.CompletedAt == nil || !next.CompletedAt.Equal(w.at)) {
			t.Errorf("completed at %v, want %v", next.CompletedAt, w.at)
		}
		if w.status == none && next.CompletedAt != nil {
			t.Errorf("completed at %v without a status", next.CompletedAt)
		}
		if next.ID != job.ID || next.CreatedAt != job.CreatedAt {
			t.Errorf("the job changed identity: %+v", next)
		}
	})
	if got := lifecycle.PrintDue(&base, 30*time.Second); !got.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("PrintDue = %v", got)
	}
	for j, want := range map[*instore.PrintJob]lifecycle.PrintState{nil: lifecycle.PrintNew, &base: lifecycle.PrintRunning, &ended: lifecycle.PrintEnded} {
		if got := lifecycle.PrintStateOf(j); got != want {
			t.Errorf("PrintStateOf(%v) = %s, want %s", j, got, want)
		}
	}
}

package lifecycle

import (
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// The life of a close (a terminal's day close, instore.Batch): created
// PENDING when it is sent (the terminal busy until it ends), it ends
// CLOSED with the terminal's batch, or FAILED when the terminal does not
// answer within the close time-out (WP25) or the close cannot be sent
// (WP23). A terminal's answer that comes after the time-out is never lost:
// it closes the FAILED batch all the same (the ECR learns it from
// batch.closed and GET /batch). A resent answer is applied once.
//
//	(new)    --REQUESTED-->  PENDING (send the close, arm the time-out at BatchDue)
//	PENDING  --REPORTED--->  CLOSED (the comparison stored, batch.closed)
//	PENDING  --TIMED_OUT-->  FAILED WP25
//	PENDING  --SEND_FAILED-> FAILED WP23
//	FAILED   --REPORTED--->  CLOSED (late; the error the ECR had is kept)
//	CLOSED   --any-------->  unchanged
//	FAILED   --TIMED_OUT, SEND_FAILED--> unchanged

// BatchEventKind is what happens to a close.
type BatchEventKind string

// Close events.
const (
	BatchRequested  BatchEventKind = "REQUESTED"   // the ECR's POST /terminal/{terminalId}/close
	BatchReported   BatchEventKind = "REPORTED"    // the terminal's batch message
	BatchTimedOut   BatchEventKind = "TIMED_OUT"   // the close time-out passed (its timer, the sweep)
	BatchSendFailed BatchEventKind = "SEND_FAILED" // the close could not be sent
)

// BatchEvent is something that happens to a close.
type BatchEvent struct {
	Kind BatchEventKind
	At   time.Time
	// Report: (BatchReported) the terminal's batch.
	Report instore.BatchReport
	// Service: (BatchReported) the service's record of the batch's
	// window (instore.InBatch), read by the caller.
	Service []instore.BatchItem
}

// BatchStep is what one event does to a close.
type BatchStep struct {
	// Changed: the close is to be written, by compare-and-set on the
	// state it was read in.
	Changed bool
	// Send: the close is PENDING and to be sent to its terminal, its
	// time-out armed at BatchDue.
	Send bool
	// Closed: the terminal's batch was applied with this change (the
	// event batch.closed is owed).
	Closed bool
	// Ended: the close is no longer PENDING after this change (its timer
	// is disarmed, its waiters woken).
	Ended bool
	// Refused: the event cannot apply to a close in this state.
	Refused error
}

// BatchNew is the state of a close not stored yet.
const BatchNew instore.BatchState = ""

// BatchDue is when a PENDING close b times out.
func BatchDue(b *instore.Batch, timeout time.Duration) time.Time { return b.ClosedAt.Add(timeout) }

// NextBatch applies e to the close b (a copy the caller owns; for
// BatchRequested, the new close with its window set) and returns its next
// state and what the change owes. errorIDs maps WP25 and WP23 to their
// errorCodes ids.
func NextBatch(b instore.Batch, e BatchEvent, errorIDs map[string]int) (instore.Batch, BatchStep) {
	var st BatchStep
	fail := func(code string) (instore.Batch, BatchStep) {
		id := errorIDs[code]
		b.State, b.ErrorID = instore.BatchFailed, &id
		st.Changed, st.Ended = true, true
		return b, st
	}
	switch {
	case e.Kind == BatchRequested && b.State == BatchNew:
		b.State = instore.BatchPending
		st.Changed, st.Send = true, true
	case e.Kind == BatchRequested:
		st.Refused = fmt.Errorf("close %s exists already", b.ID)
	case b.State == BatchNew:
		st.Refused = fmt.Errorf("close event %s of a close not stored", e.Kind)
	case b.State == instore.BatchClosed:
		// The first answer stands; a resent one is confirmed again.
	case e.Kind == BatchReported:
		c := instore.CompareBatch(e.Report.Items, e.Service)
		at := e.At
		b.Number, b.MessageID, b.ReportedAt, b.TerminalItems = e.Report.Number, e.Report.MessageID, &at, e.Report.Items
		b.TerminalTotals, b.ServiceTotals, b.Matched, b.Differences = c.TerminalTotals, c.ServiceTotals, c.Matched, c.Differences
		st.Ended = b.State == instore.BatchPending
		b.State = instore.BatchClosed
		st.Changed, st.Closed = true, true
	case b.State == instore.BatchFailed:
		// Ended already: only an answer changes it.
	case e.Kind == BatchTimedOut:
		return fail(instore.WP25)
	case e.Kind == BatchSendFailed:
		return fail(instore.WP23)
	default:
		st.Refused = fmt.Errorf("unknown close event %q", e.Kind)
	}
	return b, st
}

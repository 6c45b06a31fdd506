package lifecycle

import (
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// The life of a print job: created running (sent to its terminal, its
// time-out armed) or, while the terminal is in a transaction, BUSY at once;
// a running job ends with the status its terminal reports, TIMEOUT when
// the print time-out passes first, or ERROR when it cannot be sent at all.
// A final status stands.
//
//	(new)    --REQUESTED, terminal idle-->  running (send it, arm the time-out at Due)
//	(new)    --REQUESTED, terminal busy-->  BUSY
//	running  --REPORTED s--------------->  s
//	running  --TIMED_OUT--------------->  TIMEOUT
//	running  --SEND_FAILED------------->  ERROR
//	final    --any---------------------->  unchanged

// PrintState is where a print job is in its life.
type PrintState string

// Print job states.
const (
	PrintNew     PrintState = "NEW"     // not stored yet
	PrintRunning PrintState = "RUNNING" // sent, no final status yet (StatusID nil)
	PrintEnded   PrintState = "ENDED"   // a final status of the printStatuses list
)

// PrintStateOf is the state of the job j (nil: a job not stored yet).
func PrintStateOf(j *instore.PrintJob) PrintState {
	switch {
	case j == nil:
		return PrintNew
	case j.StatusID == nil:
		return PrintRunning
	}
	return PrintEnded
}

// PrintEventKind is what happens to a print job.
type PrintEventKind string

// Print job events.
const (
	PrintRequested  PrintEventKind = "REQUESTED"   // the ECR's POST /print (Busy: the terminal is in a transaction)
	PrintReported   PrintEventKind = "REPORTED"    // the terminal's final status (Status)
	PrintTimedOut   PrintEventKind = "TIMED_OUT"   // the print time-out passed (its timer, the sweep, the ECR's wait)
	PrintSendFailed PrintEventKind = "SEND_FAILED" // the gateway refused the message
)

// PrintEvent is something that happens to a print job.
type PrintEvent struct {
	Kind PrintEventKind
	At   time.Time
	// Busy: (PrintRequested) the terminal runs a transaction.
	Busy bool
	// Status: (PrintReported) the printStatuses id the terminal reported,
	// checked against the list by the caller.
	Status instore.PrintStatus
}

// PrintStep is what one event does to a print job.
type PrintStep struct {
	// Changed: the job is to be written (created, or given its final
	// status: compare-and-set on its having none).
	Changed bool
	// Send: the job is running and owed to its terminal (an effect), its
	// time-out armed at Due.
	Send bool
	// Ended: the job has its final status with this change.
	Ended bool
	// Refused: the event cannot apply to a job in this state.
	Refused error
}

// PrintDue is when a running job j times out.
func PrintDue(j *instore.PrintJob, timeout time.Duration) time.Time { return j.CreatedAt.Add(timeout) }

// NextPrint applies e to the job j (a copy the caller owns; for
// PrintRequested, the new job with its CreatedAt set, in state from) and
// returns its next state and what the change owes.
func NextPrint(from PrintState, j instore.PrintJob, e PrintEvent) (instore.PrintJob, PrintStep) {
	var st PrintStep
	end := func(status instore.PrintStatus) (instore.PrintJob, PrintStep) {
		j.StatusID, j.CompletedAt = &status, &e.At
		st.Changed, st.Ended = true, true
		return j, st
	}
	switch {
	case e.Kind == PrintRequested && from == PrintNew && e.Busy:
		// A print never disturbs a transaction: BUSY at once.
		j.StatusID, j.CompletedAt = ptr(instore.PrintBusy), &j.CreatedAt
		st.Changed, st.Ended = true, true
		return j, st
	case e.Kind == PrintRequested && from == PrintNew:
		j.StatusID, j.CompletedAt = nil, nil
		st.Changed, st.Send = true, true
		return j, st
	case e.Kind == PrintRequested:
		st.Refused = fmt.Errorf("print job %s exists already", j.ID)
	case from == PrintNew:
		st.Refused = fmt.Errorf("print event %s of a job not stored", e.Kind)
	case from == PrintEnded:
		// The first final status stands.
	case e.Kind == PrintReported:
		return end(e.Status)
	case e.Kind == PrintTimedOut:
		return end(instore.PrintTimeout)
	case e.Kind == PrintSendFailed:
		return end(instore.PrintError)
	default:
		st.Refused = fmt.Errorf("unknown print event %q", e.Kind)
	}
	return j, st
}

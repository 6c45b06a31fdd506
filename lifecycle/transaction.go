package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// The life of a transaction, as one pure state machine: Next takes the
// stored transaction, an event and the rules, and returns the next state
// and what the change makes the service owe (a cancel or a reversal sent
// to the terminal, a receipt printed, a timer armed, cancels made moot).
// It does no I/O and reads no clock: the Service (apply, in internal/service/apply.go)
// reads the transaction, calls Next, writes the new state with its
// effects and timeline event in one database transaction, and carries
// the effects out after the commit. docs/lifecycle.md has the diagram.
//
// States are (status, acknowledged, cancel requested, result applied):
//
//	PENDING, not acknowledged   --ACKNOWLEDGED-->  PENDING, acknowledged (deadline armed)
//	PENDING                     --PROGRESS------>  PENDING (stage moves forward only)
//	PENDING                     --CANCEL_REQUESTED-> PENDING, cancel requested (cancel owed)
//	PENDING                     --RESULT-------->  final (ABORTED_BY_CASHIER gets WP37 after a cancel; receipt printed)
//	PENDING, not acknowledged   --ACK_TIMEOUT--->  TECHNICAL_ERROR WP25 (cancel owed)
//	PENDING                     --DEADLINE------>  TECHNICAL_ERROR WP36 (cancel owed)
//	PENDING                     --SEND_FAILED--->  TECHNICAL_ERROR WP23 (cancel owed)
//	TECHNICAL_ERROR             --RESULT APPROVED-> REVERSED, error kept (reversal owed): LATE_APPROVAL
//	                                                (a VOID: kept, result kept, its pre-auth released: nextOnPreAuth)
//	TECHNICAL_ERROR             --RESULT other--->  TECHNICAL_ERROR, result kept: LATE_RESULT
//	REVERSAL PENDING or TECHNICAL_ERROR --RESULT APPROVED--> APPROVED (or kept), original REVERSED (nextReversalPair)
//
// A purchase that asked for confirmation (confirmWithinSeconds) has a
// second, smaller life once APPROVED:
//
//	APPROVED, confirmation PENDING (timer at its deadline) --CONFIRMED-------->  APPROVED, CONFIRMED
//	APPROVED, confirmation PENDING --CONFIRM_DEADLINE (or CONFIRMED too late)-->  REVERSED, AUTO_REVERSED (reversal owed)
//
// Every other (state, event) pair changes nothing (a final status stands).

// EventConfirmDeadline is the event of the timer at an unconfirmed sale's
// confirmation deadline; it is not a timeline kind (its change is
// instore.EventAutoReversed).
const EventConfirmDeadline instore.TimelineKind = "CONFIRM_DEADLINE"

// Event is something that happens to a transaction.
type Event struct {
	// Kind is one of the timeline kinds an event can have: instore.EventAcknowledged,
	// instore.EventProgress, instore.EventResult, instore.EventCancelRequested, instore.EventAckTimeout,
	// instore.EventDeadline, instore.EventSendFailed, instore.EventConfirmed (the ECR's confirm);
	// or EventConfirmDeadline (the confirmation window's timer).
	Kind instore.TimelineKind
	// At is when it happened (the service's clock).
	At time.Time
	// Stage is the stage of an instore.EventProgress.
	Stage instore.Progress
	// Result is the terminal's report of an instore.EventResult.
	Result *instore.TerminalResult
	// Forward is the terminal's report of an instore.EventForwarded
	// (forwarding.go), declined or not.
	Forward *instore.ForwardReport
}

// Rules are the settings and code lists Next applies.
type Rules struct {
	// AckTimeout is how long a new transaction waits for its terminal's
	// ack.
	AckTimeout time.Duration
	// Deadline is how long an acknowledged transaction may wait for its
	// result.
	Deadline time.Duration
	// ErrorID returns the errorCodes id of a WP code.
	ErrorID func(code string) *int
	// Status returns the transactionStatuses code of a status id.
	Status func(id instore.TransactionStatus) string
	// PreAuthValidity is how long an approved pre-auth stays OPEN
	// (instore.Authorization.ExpiresAt).
	PreAuthValidity time.Duration
}

// Step is what one event does to a transaction.
type Step struct {
	// Changed: the new state must be written (with Event, and the effects
	// below that are owed: Cancel, Reverse, Print).
	Changed bool
	// Refused is set when the event cannot apply to any transaction (an
	// unknown progress stage, a result that is no outcome); nothing
	// changes.
	Refused error
	// Event is the timeline entry of the change (Changed only), which the
	// store writes with the new state (Change.Events).
	Event *instore.TransactionEvent
	// PairEvent is, for nextReversalPair, the original's timeline entry
	// (REVERSED), written with the original's new state.
	PairEvent *instore.TransactionEvent
	// Cancel is the reason of a cancel the terminal is owed ("" none).
	Cancel string
	// Reverse is the reason of a reversal the terminal is owed ("" none).
	Reverse string
	// Print is the customer receipt to print once the terminal is free
	// (nil: none).
	Print []string
	// Arm is the time of the timer the transaction now needs (nil: no
	// change of timer); a final transaction needs none (Ended).
	Arm *time.Time
	// ArmKind is the event the timer at Arm fires: instore.EventDeadline, or
	// EventConfirmDeadline (armed on a final, APPROVED sale).
	ArmKind instore.TimelineKind
	// EndCancels: the terminal has a final outcome for the transaction,
	// so the cancels it is owed are moot.
	EndCancels bool
	// Ended: the transaction reached its final status with this change.
	Ended bool
}

// Create is the creation of a transaction: t, a new PURCHASE, REFUND or
// REVERSAL as the ECR's request describes it (its CreatedAt set), becomes
// PENDING and SENT with its first timeline entry (CREATED, version 1);
// until the ack, its deadline is the latest the result can be awaited
// (the ack sets the real one), and its ack time-out is armed (Due).
func Create(t instore.Transaction, r Rules) (instore.Transaction, Step) {
	t.StatusID, t.Progress, t.Version = instore.StatusPending, instore.ProgressSent, 0
	t.DeadlineAt = ptr(t.CreatedAt.Add(r.AckTimeout + r.Deadline))
	st := Step{Changed: true, Event: &instore.TransactionEvent{Version: 1, At: t.CreatedAt, Kind: instore.EventCreated,
		Actor: actors[instore.EventCreated], StatusAfter: r.Status(t.StatusID), Detail: "the ECR's request; command sent to the terminal"}}
	if t.ByTimer {
		// The service's VOID of an expired pre-auth.
		st.Event.Actor, st.Event.Detail = instore.ActorTimer, "the pre-authorisation expired; void sent to the terminal"
	}
	at, kind, _ := Due(t, r)
	st.Arm, st.ArmKind = &at, kind
	return t, st
}

// Due is the timer the stored transaction t needs and when it fires (ok
// false: none): a PENDING one not acknowledged, its ack time-out
// (EventAckTimeout); an acknowledged one, its deadline (EventDeadline); an
// APPROVED sale awaiting confirmation, its confirmation deadline
// (EventConfirmDeadline). The Service arms it after a creation and at
// start (Recover), and the sweep applies the event of every one past due.
func Due(t instore.Transaction, r Rules) (at time.Time, kind instore.TimelineKind, ok bool) {
	switch {
	case t.Unconfirmed():
		return *t.ConfirmDeadline, EventConfirmDeadline, true
	case t.Final():
		return time.Time{}, "", false
	case !t.Acknowledged():
		return t.CreatedAt.Add(r.AckTimeout), instore.EventAckTimeout, true
	case t.DeadlineAt != nil:
		return *t.DeadlineAt, instore.EventDeadline, true
	}
	return time.Time{}, "", false
}

// Pairs reports whether e applies to t together with t's original
// (NextPair, not Next): an approved result of a REVERSAL, in time
// or late, means the purchase's money went back, so the original becomes
// REVERSED in the same write.
// An approved result of an INCREMENT, CAPTURE or VOID in time moves its
// pre-auth's authorisation in the same write (nextOnPreAuth), and so does
// a VOID's late one (the hold was released).
func Pairs(t instore.Transaction, e Event) bool {
	approved := e.Kind == instore.EventResult && e.Result != nil && e.Result.StatusID == instore.StatusApproved
	return approved && (t.Type == instore.TypeReversal || instore.OnPreAuth(t.Type) && !t.Final() || lateVoid(t, e))
}

// StageRank orders the progress stages; 0 is no terminal stage.
func StageRank(p instore.Progress) int { return slices.Index(instore.TerminalStages, p) + 1 }

// Next applies e to t under r. t is a copy the caller owns; the new state
// is returned as a value and t is not changed. An event that moves t's
// original too (Pairs) is refused: it is NextPair's, which needs the
// original.
func Next(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	if Pairs(t, e) {
		return t, Step{Refused: errPaired}
	}
	return nextAlone(t, e, r)
}

// errPaired refuses, in Next, an event that moves the original too.
var errPaired = errors.New("this event moves the transaction's original too: lifecycle.NextPair applies it")

// nextAlone is Next without the check that e moves only t: nextOnPreAuth
// moves the child with it before moving the pre-auth.
func nextAlone(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	before := t
	var st Step
	switch e.Kind {
	case instore.EventAcknowledged:
		if t.Final() || t.Acknowledged() {
			return before, st
		}
		deadline := e.At.Add(r.Deadline)
		t.AcknowledgedAt, t.DeadlineAt = ptr(e.At), &deadline
		if t.Progress == instore.ProgressSent {
			t.Progress = instore.ProgressAcknowledged
		}
		st.Arm, st.ArmKind = &deadline, instore.EventDeadline

	case instore.EventProgress:
		rank := StageRank(e.Stage)
		if rank == 0 {
			st.Refused = fmt.Errorf("unknown progress stage %q", e.Stage)
			return before, st
		}
		if t.Final() || rank <= StageRank(t.Progress) {
			return before, st
		}
		t.Progress = e.Stage

	case instore.EventCancelRequested:
		if t.Final() || t.CancelRequested {
			return before, st
		}
		t.CancelRequested = true
		st.Cancel = instore.CancelByECR

	case instore.EventAckTimeout:
		if t.Final() {
			return before, st
		}
		if t.Acknowledged() {
			// Acknowledged meanwhile: its deadline applies, whatever timer
			// this one replaced (an ack recorded while Recover re-armed).
			st.Arm, st.ArmKind = t.DeadlineAt, instore.EventDeadline
			return before, st
		}
		fail(&t, r, instore.WP25, e.At)
		st.Cancel = instore.CancelAckTimeout

	case instore.EventDeadline:
		if t.Final() {
			return before, st
		}
		fail(&t, r, instore.WP36, e.At)
		st.Cancel = instore.CancelDeadline

	case instore.EventSendFailed:
		// The session went away while the command was sent: it most likely
		// never left. In case its frame reached the terminal all the same,
		// the terminal is owed a cancel ACK_TIMEOUT (it drops a command it
		// never acknowledged, and ignores a ref it does not know).
		if t.Final() {
			return before, st
		}
		fail(&t, r, instore.WP23, e.At)
		st.Cancel = instore.CancelAckTimeout

	case instore.EventResult:
		return result(t, e, r)

	case instore.EventForwarded:
		return forwarded(t, e, r)

	case instore.EventConfirmed:
		switch {
		case t.Unconfirmed() && e.At.Before(*t.ConfirmDeadline):
			t.ConfirmState, t.ConfirmedAt = instore.ConfirmConfirmed, ptr(e.At)
		case t.Unconfirmed():
			// Too late: the window has passed, whether or not its timer
			// ran yet. The deadline is exact.
			return autoReverse(t, e, r)
		case t.ConfirmState == instore.ConfirmConfirmed && t.StatusID == instore.StatusApproved:
			return before, st // confirmed already: the same answer
		default:
			st.Refused = NotConfirmable(&t)
			return before, st
		}

	case EventAuthLapsed:
		return authLapsed(t, e, r)

	case EventConfirmDeadline:
		switch {
		case !t.Unconfirmed():
			return before, st // confirmed, or no longer APPROVED
		case e.At.Before(*t.ConfirmDeadline):
			st.Arm, st.ArmKind = t.ConfirmDeadline, EventConfirmDeadline
			return before, st
		}
		return autoReverse(t, e, r)

	default:
		st.Refused = fmt.Errorf("unknown event %q", e.Kind)
		return before, st
	}
	return changed(before, t, e, r, st, e.Kind)
}

// autoReverse reverses an APPROVED sale the ECR did not confirm within its
// window: REVERSED, AUTO_REVERSED, and a reversal CONFIRM_TIMEOUT owed to
// its terminal.
func autoReverse(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	before := t
	t.StatusID, t.ConfirmState = instore.StatusReversed, instore.ConfirmAutoReversed
	st := Step{Reverse: instore.ReversalConfirmTimeout}
	return changed(before, t, e, r, st, instore.EventAutoReversed)
}

// NotConfirmable is the problem of a confirm of t that cannot apply.
func NotConfirmable(t *instore.Transaction) *instore.Error {
	switch {
	case t.ConfirmState == "":
		return instore.Errorf(instore.ENotConfirmable, "The transaction did not ask for confirmation (confirmWithinSeconds).")
	case t.ConfirmState == instore.ConfirmAutoReversed:
		return instore.Errorf(instore.ENotConfirmable, "The sale was not confirmed within its window and has been reversed.")
	case t.StatusID == instore.StatusPending:
		return instore.Errorf(instore.ENotConfirmable, "The sale has no result yet; confirm it once it is APPROVED.")
	case t.StatusID == instore.StatusReversed && t.ConfirmState == instore.ConfirmConfirmed:
		return instore.Errorf(instore.ENotConfirmable, "The sale was confirmed and has since been reversed.")
	case t.StatusID == instore.StatusReversed:
		return instore.Errorf(instore.ENotConfirmable, "The sale has been reversed.")
	}
	return instore.Errorf(instore.ENotConfirmable, "Only an APPROVED sale can be confirmed; this one ended in status %d.", t.StatusID)
}

// fail ends t TECHNICAL_ERROR with code at.
func fail(t *instore.Transaction, r Rules, code string, at time.Time) {
	t.StatusID, t.ErrorID, t.Progress, t.CompletedAt = instore.StatusTechnicalError, r.ErrorID(code), instore.ProgressFinal, ptr(at)
}

// actors of the event kinds.
var actors = map[instore.TimelineKind]instore.Actor{
	instore.EventCreated: instore.ActorECR, instore.EventSendFailed: instore.ActorTerminal, instore.EventAcknowledged: instore.ActorTerminal,
	instore.EventProgress: instore.ActorTerminal, instore.EventResult: instore.ActorTerminal, instore.EventCancelRequested: instore.ActorECR,
	instore.EventAckTimeout: instore.ActorTimer, instore.EventDeadline: instore.ActorTimer, instore.EventLateApproval: instore.ActorTerminal,
	instore.EventLateResult: instore.ActorTerminal, instore.EventReversed: instore.ActorTerminal, instore.EventConfirmed: instore.ActorECR,
	instore.EventAutoReversed: instore.ActorTimer, instore.EventTipRefused: instore.ActorTerminal,
	instore.EventAuthorization: instore.ActorTerminal, instore.EventForwarded: instore.ActorTerminal,
	instore.EventForwardDeclined: instore.ActorTerminal,
}

// changed completes st for the change from before to t: its timeline
// event (of kind, with detail) and whether it ended the transaction.
func changed(before, t instore.Transaction, e Event, r Rules, st Step, kind instore.TimelineKind) (instore.Transaction, Step) {
	st.Changed = true
	st.Ended = !before.Final() && t.Final()
	detail := ""
	switch kind {
	case instore.EventProgress:
		detail = string(t.Progress)
	case instore.EventAckTimeout, instore.EventDeadline, instore.EventSendFailed:
		if st.Cancel != "" {
			detail = "cancel " + st.Cancel + " owed to the terminal"
		}
	case instore.EventCancelRequested:
		detail = "cancel sent to the terminal"
	case instore.EventAutoReversed:
		detail = "not confirmed within " + t.ConfirmWithin.String() + "; reversal " + st.Reverse + " owed to the terminal"
	case instore.EventResult, instore.EventLateResult, instore.EventLateApproval, instore.EventTipRefused:
		if e.Result != nil {
			detail = "terminal reported " + r.Status(e.Result.StatusID)
		}
		if kind == instore.EventTipRefused {
			detail += fmt.Sprintf(" with a tip of %d the purchase did not allow", t.TipAmount)
		}
		if st.Reverse != "" {
			detail += "; reversal " + st.Reverse + " owed to the terminal"
		}
		if st.Print != nil {
			detail += "; customer receipt to print"
		}
	}
	st.Event = &instore.TransactionEvent{
		Version: before.Version + 1, At: e.At, Kind: kind, Actor: actors[kind],
		StatusBefore: r.Status(before.StatusID), StatusAfter: r.Status(t.StatusID), Detail: detail,
	}
	return t, st
}

// result applies a terminal's final outcome to t (not an approved
// REVERSAL: nextReversalPair): once per result message; a resent one
// changes nothing.
func result(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	before := t
	var st Step
	res := e.Result
	if res == nil || res.StatusID < 0 || res.StatusID > instore.StatusWrongPIN {
		st.Refused = fmt.Errorf("a result must carry a terminal outcome")
		return before, st
	}
	if t.ResultMessageID == res.MessageID {
		return before, st // a resent result, already applied
	}
	// A cancel was owed (the ECR's, or the expiry's): the terminal has a
	// final outcome now, so it changes nothing.
	st.EndCancels = t.CancelRequested || t.Final()
	if t.ResultMessageID != "" {
		return before, st // the first result stands
	}
	kind := instore.EventResult
	result := res.Result
	// Approved offline (forwarding.go): the flag is kept only where it
	// holds, on an APPROVED purchase.
	result.Offline = offlineApproval(t, res)
	// A tip the rules do not allow (instore.CheckTipAmount) never loses the
	// result: on anything but an approval of a purchase or a
	// pre-authorisation (the two that take a tip) it charged
	// nothing and is dropped; with an approval the card was charged it, so
	// it is recorded, and the sale is reversed on the terminal at once.
	approved := res.StatusID == instore.StatusApproved && (t.Type == instore.TypePurchase || t.Type == instore.TypePreAuth)
	tipRefused := approved && instore.CheckTipAmount(&t, res.StatusID, res.TipAmount) != nil
	switch {
	case tipRefused && !t.Final():
		t.StatusID = instore.StatusReversed
		if t.AcknowledgedAt == nil {
			t.AcknowledgedAt = ptr(e.At)
		}
		st.Reverse = instore.ReversalLateApproval
		kind = instore.EventTipRefused
	case !t.Final():
		t.StatusID = res.StatusID
		if res.StatusID == instore.StatusAbortedByCashier && t.CancelRequested {
			t.ErrorID = r.ErrorID(instore.WP37)
		}
		if t.AcknowledgedAt == nil {
			t.AcknowledgedAt = ptr(e.At)
		}
		if res.StatusID == instore.StatusApproved && t.ConfirmState == instore.ConfirmPending && t.ConfirmWithin > 0 {
			// The confirmation window starts with the approval.
			t.ConfirmDeadline = ptr(e.At.Add(t.ConfirmWithin))
			st.Arm, st.ArmKind = t.ConfirmDeadline, EventConfirmDeadline
		}
		if t.PrintReceipt && len(result.Receipt.Customer) > 0 {
			// printReceipt: the customer copy, once the terminal is free.
			st.Print = result.Receipt.Customer
		}
	case t.StatusID == instore.StatusTechnicalError && res.StatusID == instore.StatusApproved:
		// A late approval of a sale the ECR saw fail: reversed on the
		// terminal at once, and REVERSED, keeping its error code.
		t.StatusID = instore.StatusReversed
		t.CompletedAt = nil // set below: when it was reversed
		st.Reverse = instore.ReversalLateApproval
		kind = instore.EventLateApproval
	case t.StatusID == instore.StatusTechnicalError:
		// The terminal's own outcome, not an approval, of a transaction the
		// service had ended (WP25, WP23, WP36): the status stands, and the
		// report is kept, as every result is: it settles that the terminal
		// took no money (CheckOnOriginal reads it for a reversal whose
		// outcome was unknown).
		t.Result, t.ResultMessageID = &result, res.MessageID
		return changed(before, t, e, r, st, instore.EventLateResult)
	default:
		return before, st // the first final status stands
	}
	if approved {
		t.TipAmount = res.TipAmount // the tip the card was charged, allowed or not
	}
	// An approval offline: queued on the terminal until it forwards it
	// (forwarding.go), whatever the status became (a late one is REVERSED,
	// and the terminal forwards the sale with its reversal).
	if result.Offline {
		t.Forwarding, _ = NextForwarding(t.Forwarding, ForwardQueue, e.At)
	}
	if res.StatusID == instore.StatusApproved && t.Type == instore.TypePreAuth && kind == instore.EventResult {
		// The authorisation opens with the approval (NextAuthorization).
		t.Authorization, _ = NextAuthorization(nil, AuthApproved, t.TotalAmount(), e.At, r.PreAuthValidity)
	}
	t.Result, t.ResultMessageID, t.Progress = &result, res.MessageID, instore.ProgressFinal
	if t.CompletedAt == nil {
		t.CompletedAt = ptr(e.At)
	}
	t, st = changed(before, t, e, r, st, kind)
	if result.Offline {
		st.Event.Detail += "; approved offline, queued on the terminal"
	}
	return t, st
}

// NextPair applies e to t and its original orig, when Pairs(t, e): the
// machine decides which rule moves the pair, by t's type. An approved
// REVERSAL reverses its original (nextReversalPair); an INCREMENT,
// CAPTURE or VOID moves its pre-auth's authorisation (nextOnPreAuth).
// paired reports whether orig changed (its timeline entry st.PairEvent);
// when st.Changed is false nothing changes.
func NextPair(t, orig instore.Transaction, e Event, r Rules) (next, newOrig instore.Transaction, st Step, paired bool) {
	if t.Type == instore.TypeReversal {
		return nextReversalPair(t, orig, e, r)
	}
	return nextOnPreAuth(t, orig, e, r)
}

// nextReversalPair applies an approved result to a REVERSAL rev and its
// original orig: the money of the purchase went back, so the REVERSAL
// ends APPROVED (or, if the service had ended it, keeps its status and
// gets the result) and the original becomes REVERSED naming it, both in
// one write. ok is false when the result was applied before (or the
// REVERSAL has another final status): nothing changes.
func nextReversalPair(rev, orig instore.Transaction, e Event, r Rules) (newRev, newOrig instore.Transaction, st Step, ok bool) {
	res := e.Result
	if res == nil || rev.ResultMessageID != "" || rev.Final() && rev.StatusID != instore.StatusTechnicalError {
		return rev, orig, st, false
	}
	revBefore, origBefore := rev, orig
	st.EndCancels = rev.CancelRequested || rev.Final()
	result := res.Result
	kind := instore.EventResult
	if !rev.Final() {
		rev.StatusID, rev.CompletedAt = instore.StatusApproved, ptr(e.At)
	} else {
		// The service had ended it (WP25, WP36): its status stands, the
		// terminal's outcome is kept beside it, as for any late result.
		kind = instore.EventLateResult
	}
	rev.Result, rev.ResultMessageID, rev.Progress = &result, res.MessageID, instore.ProgressFinal
	if rev.AcknowledgedAt == nil {
		rev.AcknowledgedAt = ptr(e.At)
	}
	rev, st = changed(revBefore, rev, e, r, st, kind)
	orig.StatusID, orig.ReversedBy = instore.StatusReversed, rev.ID
	orig, ost := changed(origBefore, orig, e, r, Step{}, instore.EventReversed)
	ost.Event.Detail = "by REVERSAL " + rev.ID
	st.PairEvent = ost.Event
	return rev, orig, st, true
}

// ptr is a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

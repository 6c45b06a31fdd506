package lifecycle_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextEveryStateAndEvent runs the state machine over every pair of a
// state a transaction can be in and an event that can happen to it, with
// no store, no gateway and no clock: the table says, for each pair,
// whether the transaction changes and to what, what the change owes the
// terminal, and which timeline event it records. A pair missing from the
// table fails the test.
func TestNextEveryStateAndEvent(t *testing.T) {
	now := t0.Add(5 * time.Second)
	md := instore.DefaultMetadata()
	rules := lifecycle.Rules{
		Deadline: 2 * time.Minute,
		ErrorID: func(code string) *int {
			c, ok := md.ErrorCode(code)
			if !ok {
				panic(code)
			}
			return &c.ID
		},
		Status: func(id instore.TransactionStatus) string { c, _ := md.TransactionStatus(id); return c.Code },
	}
	id := func(code string) *int { return rules.ErrorID(code) }
	acked := t0.Add(time.Second)
	deadline := acked.Add(rules.Deadline)
	receipt := []string{"CUSTOMER COPY", "APPROVED"}
	base := instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, SerialNumber: "SN1", TerminalID: "10000001",
		Amount: 1250, Currency: "SEK", PrintReceipt: true, StatusID: instore.StatusPending, Progress: instore.ProgressSent,
		Version: 3, CreatedAt: t0}
	states := map[string]func() instore.Transaction{
		"sent": func() instore.Transaction { return base },
		"acknowledged": func() instore.Transaction {
			x := base
			x.AcknowledgedAt, x.DeadlineAt, x.Progress = &acked, &deadline, instore.ProgressWaitingForCard
			return x
		},
		"cancel requested": func() instore.Transaction {
			x := states0("acknowledged")
			x.CancelRequested = true
			return x
		},
		"approved": func() instore.Transaction {
			x := states0("acknowledged")
			x.StatusID, x.Progress, x.CompletedAt, x.ResultMessageID = instore.StatusApproved, instore.ProgressFinal, &now, "m-first"
			x.Result = &instore.Result{}
			return x
		},
		"ack timed out": func() instore.Transaction {
			x := base
			x.StatusID, x.ErrorID, x.Progress, x.CompletedAt = instore.StatusTechnicalError, id("WP25"), instore.ProgressFinal, &now
			return x
		},
		"deadline passed, late decline kept": func() instore.Transaction {
			x := states0("acknowledged")
			x.StatusID, x.ErrorID, x.Progress, x.CompletedAt = instore.StatusTechnicalError, id("WP36"), instore.ProgressFinal, &now
			x.ResultMessageID, x.Result = "m-first", &instore.Result{}
			return x
		},
		"late approval reversed": func() instore.Transaction {
			x := states0("ack timed out")
			x.StatusID, x.ResultMessageID, x.Result = instore.StatusReversed, "m-first", &instore.Result{}
			return x
		},
		// Approved offline: its forward is still owed (TestNextForwarding
		// has the forwarding's own life).
		"approved offline": func() instore.Transaction {
			x := states0("approved")
			x.Result.Offline, x.Forwarding = true, &instore.Forwarding{State: instore.ForwardQueued}
			return x
		},
		// The other types Next moves alone (an approved REVERSAL, and an
		// approved INCREMENT, CAPTURE or VOID, move their original too:
		// NextPair, TestNextReversalPair, TestNextOnPreAuth).
		"refund acknowledged": func() instore.Transaction {
			x := states0("acknowledged")
			x.Type = instore.TypeRefund
			return x
		},
		"pre-auth acknowledged": func() instore.Transaction {
			x := states0("acknowledged")
			x.Type = instore.TypePreAuth
			return x
		},
		"reversal acknowledged": func() instore.Transaction {
			x := states0("acknowledged")
			x.Type, x.OriginalID = instore.TypeReversal, "txn_o"
			return x
		},
	}
	statesFn = states
	result := func(msg string, status instore.TransactionStatus) *instore.TerminalResult {
		return &instore.TerminalResult{MessageID: msg, Ref: "txn_1", StatusID: status,
			Result: instore.Result{Receipt: instore.Receipt{Customer: receipt}}}
	}
	events := map[string]lifecycle.Event{
		"ack":                   {Kind: instore.EventAcknowledged, At: now},
		"progress forward":      {Kind: instore.EventProgress, At: now, Stage: instore.ProgressWaitingForPIN},
		"progress backward":     {Kind: instore.EventProgress, At: now, Stage: instore.ProgressWaitingForCard},
		"progress unknown":      {Kind: instore.EventProgress, At: now, Stage: "DANCING"},
		"cancel":                {Kind: instore.EventCancelRequested, At: now},
		"ack timeout":           {Kind: instore.EventAckTimeout, At: now},
		"deadline":              {Kind: instore.EventDeadline, At: now},
		"send failed":           {Kind: instore.EventSendFailed, At: now},
		"result approved":       {Kind: instore.EventResult, At: now, Result: result("m-2", instore.StatusApproved)},
		"result declined":       {Kind: instore.EventResult, At: now, Result: result("m-2", instore.StatusTransactionDeclined)},
		"result aborted":        {Kind: instore.EventResult, At: now, Result: result("m-2", instore.StatusAbortedByCashier)},
		"result resent":         {Kind: instore.EventResult, At: now, Result: result("m-first", instore.StatusApproved)},
		"result not an outcome": {Kind: instore.EventResult, At: now, Result: result("m-3", instore.StatusPending)},
		"unknown event":         {Kind: "BOGUS", At: now},
		"confirm":               {Kind: instore.EventConfirmed, At: now},
		"confirm deadline":      {Kind: lifecycle.EventConfirmDeadline, At: now},
		"forwarded":             {Kind: instore.EventForwarded, At: now, Forward: &instore.ForwardReport{MessageID: "f-1", Ref: "txn_1", ForwardedAt: now}},
		"forward declined":      {Kind: instore.EventForwarded, At: now, Forward: &instore.ForwardReport{MessageID: "f-1", Ref: "txn_1", ForwardedAt: now, Declined: true}},
		"forwarded, no report":  {Kind: instore.EventForwarded, At: now},
		"auth lapsed":           {Kind: lifecycle.EventAuthLapsed, At: now},
	}

	// want is the outcome of a pair: "-" nothing changes and nothing is
	// owed; "refused" the event is refused; otherwise the fields of a
	// change, written as a string for a compact table.
	type want struct {
		kind     instore.TimelineKind // timeline event kind ("" unchanged)
		status   instore.TransactionStatus
		code     string           // the error code after ("" none)
		progress instore.Progress // "": as before
		cancel   string
		reverse  bool
		print    bool
		arm      bool // the deadline timer armed
		endMoot  bool // cancels owed made moot
		ended    bool
	}
	pending, techErr := instore.StatusPending, instore.StatusTechnicalError
	unchanged := want{}
	moot := want{endMoot: true}
	refused := want{kind: "refused"}
	ackWant := want{kind: instore.EventAcknowledged, status: pending, progress: instore.ProgressAcknowledged, arm: true}
	cancelWant := want{kind: instore.EventCancelRequested, status: pending, cancel: instore.CancelByECR}
	expire := func(code, cancel string) want {
		return want{kind: kindOf(code), status: techErr, code: code, progress: instore.ProgressFinal, cancel: cancel, ended: true}
	}
	final := func(status instore.TransactionStatus, code string, print, endMoot bool) want {
		return want{kind: instore.EventResult, status: status, code: code, progress: instore.ProgressFinal, print: print, endMoot: endMoot, ended: true}
	}
	lateApproval := want{kind: instore.EventLateApproval, status: instore.StatusReversed, code: "WP25", progress: instore.ProgressFinal, reverse: true, endMoot: true}
	lateResult := func(code string) want {
		return want{kind: instore.EventLateResult, status: techErr, code: code, progress: instore.ProgressFinal, endMoot: true}
	}
	progress := func(p instore.Progress) want { return want{kind: instore.EventProgress, status: pending, progress: p} }
	// A transaction awaiting its result: "sent" and "cancel requested"
	// change a few of the acknowledged one's outcomes.
	awaiting := func(endMoot bool, changes map[string]want) map[string]want {
		row := map[string]want{
			"ack": unchanged, "progress forward": progress(instore.ProgressWaitingForPIN), "progress backward": unchanged,
			"progress unknown": refused, "cancel": cancelWant,
			"ack timeout": {arm: true}, "deadline": expire("WP36", instore.CancelDeadline),
			"send failed":     expire("WP23", instore.CancelAckTimeout),
			"result approved": final(instore.StatusApproved, "", true, endMoot), "result declined": final(instore.StatusTransactionDeclined, "", true, endMoot),
			"result aborted": final(instore.StatusAbortedByCashier, "", true, endMoot), "result resent": final(instore.StatusApproved, "", true, endMoot),
			"result not an outcome": refused, "unknown event": refused,
		}
		maps.Copy(row, changes)
		return row
	}
	// An ended transaction: only a result tells "ack timed out" apart.
	ended := func(changes map[string]want) map[string]want {
		row := map[string]want{
			"ack": unchanged, "progress forward": unchanged, "progress backward": unchanged, "progress unknown": refused,
			"cancel": unchanged, "ack timeout": unchanged, "deadline": unchanged, "send failed": unchanged,
			"result approved": moot, "result declined": moot, "result aborted": moot, "result resent": unchanged,
			"result not an outcome": refused, "unknown event": refused,
		}
		maps.Copy(row, changes)
		return row
	}
	table := map[string]map[string]want{
		"sent": awaiting(false, map[string]want{"ack": ackWant, "progress backward": progress(instore.ProgressWaitingForCard),
			"ack timeout": expire("WP25", instore.CancelAckTimeout)}),
		"acknowledged": awaiting(false, nil),
		"cancel requested": awaiting(true, map[string]want{"cancel": unchanged,
			"result aborted": final(instore.StatusAbortedByCashier, "WP37", true, true)}),
		"approved": ended(nil),
		"ack timed out": ended(map[string]want{"result approved": lateApproval, "result declined": lateResult("WP25"),
			"result aborted": lateResult("WP25"), "result resent": lateApproval}),
		"deadline passed, late decline kept": ended(nil),
		"late approval reversed":             ended(nil),
		"approved offline": ended(map[string]want{
			"forwarded":        {kind: instore.EventForwarded, status: instore.StatusApproved},
			"forward declined": {kind: instore.EventForwardDeclined, status: instore.StatusApproved}}),
		"refund acknowledged":   awaiting(false, nil),
		"pre-auth acknowledged": awaiting(false, nil),
		// Its approval goes to NextPair (Pairs): Next refuses it.
		"reversal acknowledged": awaiting(false, map[string]want{"result approved": refused, "result resent": refused}),
	}

	// None of these asked for confirmation: a confirm is refused, the
	// confirmation timer changes nothing (TestNextConfirmation has those
	// that did).
	for _, row := range table {
		row["confirm"], row["confirm deadline"] = refused, unchanged
		// A forwarding report changes only a sale approved offline whose
		// forward is owed; one without its report is refused.
		if _, ok := row["forwarded"]; !ok {
			row["forwarded"], row["forward declined"] = unchanged, unchanged
		}
		row["forwarded, no report"] = refused
		// Only an OPEN pre-auth's authorisation lapses (TestAuthLapsed).
		row["auth lapsed"] = unchanged
	}
	everyPair(t, states, events, table, func(t *testing.T, _ string, state func() instore.Transaction, ev lifecycle.Event, w want) {
		before := state()
		next, st := lifecycle.Next(before, ev, rules)
		if w.kind == "refused" {
			if st.Refused == nil || st.Changed || next.Version != before.Version || st.Event != nil {
				t.Errorf("want refused, got %+v", st)
			}
			return
		}
		if st.Refused != nil {
			t.Fatalf("refused: %v", st.Refused)
		}
		if st.Changed != (w.kind != "") {
			t.Fatalf("changed %v, want %v (%+v)", st.Changed, w.kind != "", st)
		}
		armed := st.Arm != nil
		if st.Cancel != w.cancel || (st.Reverse != "") != w.reverse || (st.Print != nil) != w.print ||
			armed != w.arm || st.EndCancels != w.endMoot || st.Ended != w.ended {
			t.Errorf("effects = cancel %q reverse %q print %v arm %v endMoot %v ended %v; want %+v",
				st.Cancel, st.Reverse, st.Print != nil, armed, st.EndCancels, st.Ended, w)
		}
		if !st.Changed {
			if fmt.Sprint(next) != fmt.Sprint(before) {
				t.Errorf("unchanged step changed the state:\n%+v\n%+v", before, next)
			}
			return
		}
		code := ""
		for _, c := range md.ErrorCodes {
			if next.ErrorID != nil && c.ID == *next.ErrorID {
				code = c.Code
			}
		}
		if w.progress == "" { // a cancel leaves the stage as it was
			w.progress = before.Progress
		}
		if next.StatusID != w.status || code != w.code || next.Progress != w.progress {
			t.Errorf("state = %d %q %s; want %d %q %s", next.StatusID, code, next.Progress, w.status, w.code, w.progress)
		}
		if st.Event == nil || st.Event.Kind != w.kind || st.Event.Version != before.Version+1 || !st.Event.At.Equal(now) ||
			st.Event.StatusBefore != rules.Status(before.StatusID) || st.Event.StatusAfter != rules.Status(next.StatusID) {
			t.Errorf("timeline event = %+v, want kind %s at version %d", st.Event, w.kind, before.Version+1)
		}
		if w.ended && (next.CompletedAt == nil || next.ResultMessageID == "" && ev.Kind == instore.EventResult) {
			t.Errorf("ended without completion or result: %+v", next)
		}
		if w.arm && (st.Arm == nil || next.DeadlineAt == nil || !st.Arm.Equal(*next.DeadlineAt)) {
			t.Errorf("armed %v, deadline %v", st.Arm, next.DeadlineAt)
		}
	})
}

var statesFn map[string]func() instore.Transaction

func states0(name string) instore.Transaction { return statesFn[name]() }

func kindOf(code string) instore.TimelineKind {
	switch code {
	case "WP25":
		return instore.EventAckTimeout
	case "WP36":
		return instore.EventDeadline
	}
	return instore.EventSendFailed
}

// TestNextReversalPair: an approved result of a REVERSAL ends it APPROVED
// and turns its original REVERSED in one step, each with its timeline
// event; a REVERSAL the service ended keeps its status (a LATE_RESULT)
// and still reverses the original; a result applied before changes
// nothing.
func TestNextReversalPair(t *testing.T) {
	rules := testRules()
	now := t0
	orig := instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Version: 6, Progress: instore.ProgressFinal}
	rev := instore.Transaction{ID: "txn_r", Type: instore.TypeReversal, OriginalID: "txn_o", StatusID: instore.StatusPending, Version: 2, Progress: instore.ProgressAcknowledged}
	ev := lifecycle.Event{Kind: instore.EventResult, At: now, Result: &instore.TerminalResult{MessageID: "m1", StatusID: instore.StatusApproved}}

	r2, o2, st, ok := lifecycle.NextPair(rev, orig, ev, rules)
	if !ok || r2.StatusID != instore.StatusApproved || o2.StatusID != instore.StatusReversed || o2.ReversedBy != "txn_r" || !st.Ended {
		t.Fatalf("pair = %v %d %d %q ended %v", ok, r2.StatusID, o2.StatusID, o2.ReversedBy, st.Ended)
	}
	if st.Event == nil || st.Event.Kind != instore.EventResult || st.Event.Version != 3 ||
		st.PairEvent == nil || st.PairEvent.Kind != instore.EventReversed || st.PairEvent.Version != 7 || st.PairEvent.StatusAfter != "REVERSED" ||
		st.PairEvent.Detail != "by REVERSAL txn_r" {
		t.Errorf("events: reversal %+v, original %+v", st.Event, st.PairEvent)
	}
	if _, _, _, ok := lifecycle.NextPair(r2, o2, ev, rules); ok {
		t.Errorf("the same result applied twice")
	}
	ended := rev
	ended.StatusID, ended.ErrorID = instore.StatusTechnicalError, rules.ErrorID("WP25")
	r3, o3, st, ok := lifecycle.NextPair(ended, orig, ev, rules)
	if !ok || r3.StatusID != instore.StatusTechnicalError || r3.ResultMessageID != "m1" || o3.StatusID != instore.StatusReversed || st.Ended {
		t.Errorf("late approved reversal: %v %d %q %d ended %v", ok, r3.StatusID, r3.ResultMessageID, o3.StatusID, st.Ended)
	}
	// Its status stands: a LATE_RESULT, as for any transaction the
	// service had ended (told as transaction.final with the result).
	if st.Event == nil || st.Event.Kind != instore.EventLateResult || st.PairEvent == nil || st.PairEvent.Kind != instore.EventReversed {
		t.Errorf("late approved reversal's events: reversal %+v, original %+v", st.Event, st.PairEvent)
	}
	declined := rev
	declined.StatusID = instore.StatusTransactionDeclined
	if _, _, _, ok := lifecycle.NextPair(declined, orig, ev, rules); ok {
		t.Errorf("a REVERSAL that ended otherwise reversed its original")
	}
}

// TestNextConfirmation: a purchase that asked for confirmation
// (confirmWithinSeconds) gets its deadline with the approval; the ECR's
// confirm before it confirms (once: a second one changes nothing), one at
// or after it reverses the sale, as the deadline's timer does (a timer run
// early re-arms); a sale that is not APPROVED, or no longer awaits
// confirmation, refuses the confirm and ignores the timer.
func TestNextConfirmation(t *testing.T) {
	rules := testRules()
	approvedAt := t0.Add(10 * time.Second)
	deadline := approvedAt.Add(30 * time.Second)
	pending := instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, SerialNumber: "SN1", TerminalID: "10000001",
		Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending, Progress: instore.ProgressAcknowledged,
		Version: 2, CreatedAt: t0, AcknowledgedAt: &t0, ConfirmWithin: 30 * time.Second, ConfirmState: instore.ConfirmPending}

	// The approval starts the window.
	approved, st := lifecycle.Next(pending, lifecycle.Event{Kind: instore.EventResult, At: approvedAt,
		Result: &instore.TerminalResult{MessageID: "m-1", Ref: "txn_1", StatusID: instore.StatusApproved}}, rules)
	if !approved.Unconfirmed() || !approved.ConfirmDeadline.Equal(deadline) || st.Arm == nil || !st.Arm.Equal(deadline) ||
		st.ArmKind != lifecycle.EventConfirmDeadline {
		t.Fatalf("approved: %+v, step %+v; want unconfirmed until %v, its timer armed", approved, st, deadline)
	}
	approved.Version++
	declined, _ := lifecycle.Next(pending, lifecycle.Event{Kind: instore.EventResult, At: approvedAt,
		Result: &instore.TerminalResult{MessageID: "m-1", Ref: "txn_1", StatusID: instore.StatusTransactionDeclined}}, rules)
	if declined.ConfirmDeadline != nil || declined.ConfirmState != instore.ConfirmPending || declined.Unconfirmed() {
		t.Fatalf("declined: %+v; want no deadline", declined)
	}
	confirmed := approved
	confirmed.ConfirmState, confirmed.ConfirmedAt = instore.ConfirmConfirmed, &approvedAt
	autoReversed := approved
	autoReversed.StatusID, autoReversed.ConfirmState = instore.StatusReversed, instore.ConfirmAutoReversed
	reversedAfter := confirmed // confirmed, then reversed by the ECR
	reversedAfter.StatusID = instore.StatusReversed

	before, at, after := deadline.Add(-time.Millisecond), deadline, deadline.Add(time.Second)
	type want struct {
		kind    instore.TimelineKind // the timeline event ("" unchanged, "refused")
		status  instore.TransactionStatus
		state   instore.ConfirmState
		reverse bool
		rearm   bool
		problem string // the refusal's detail, in part
	}
	confirmAt := func(at time.Time) lifecycle.Event { return lifecycle.Event{Kind: instore.EventConfirmed, At: at} }
	timerAt := func(at time.Time) lifecycle.Event {
		return lifecycle.Event{Kind: lifecycle.EventConfirmDeadline, At: at}
	}
	autoReversal := want{kind: instore.EventAutoReversed, status: instore.StatusReversed, state: instore.ConfirmAutoReversed, reverse: true}
	refusal := func(problem string) want { return want{kind: "refused", problem: problem} }
	// stays: unchanged, the sale's status and confirmation as they were.
	stays := func(status instore.TransactionStatus, state instore.ConfirmState) want {
		return want{status: status, state: state}
	}
	for _, tc := range []struct {
		name  string
		state instore.Transaction
		ev    lifecycle.Event
		want  want
	}{
		{"confirm in time", approved, confirmAt(before), want{kind: instore.EventConfirmed, status: instore.StatusApproved, state: instore.ConfirmConfirmed}},
		{"confirm at the deadline", approved, confirmAt(at), autoReversal},
		{"confirm after the deadline", approved, confirmAt(after), autoReversal},
		{"timer at the deadline", approved, timerAt(at), autoReversal},
		{"timer early", approved, timerAt(before), want{status: instore.StatusApproved, state: instore.ConfirmPending, rearm: true}},
		{"confirm again", confirmed, confirmAt(after), stays(instore.StatusApproved, instore.ConfirmConfirmed)},
		{"timer of a confirmed sale", confirmed, timerAt(after), stays(instore.StatusApproved, instore.ConfirmConfirmed)},
		{"confirm a reversed sale", autoReversed, confirmAt(before), refusal("has been reversed")},
		{"confirm a sale confirmed and then reversed", reversedAfter, confirmAt(before), refusal("confirmed and has since been reversed")},
		{"timer of a sale confirmed and then reversed", reversedAfter, timerAt(after), stays(instore.StatusReversed, instore.ConfirmConfirmed)},
		{"timer of a reversed sale", autoReversed, timerAt(after), stays(instore.StatusReversed, instore.ConfirmAutoReversed)},
		{"confirm a PENDING sale", pending, confirmAt(before), refusal("no result yet")},
		{"confirm a declined sale", declined, confirmAt(before), refusal("ended in status")},
		{"timer of a declined sale", declined, timerAt(after), stays(instore.StatusTransactionDeclined, instore.ConfirmPending)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, st := lifecycle.Next(tc.state, tc.ev, rules)
			if tc.want.kind == "refused" {
				var e *instore.Error
				if st.Changed || !errors.As(st.Refused, &e) || e.Code != instore.ENotConfirmable || !strings.Contains(e.Detail, tc.want.problem) {
					t.Fatalf("step %+v (%v); want refused not-confirmable %q", st, st.Refused, tc.want.problem)
				}
				return
			}
			if st.Refused != nil {
				t.Fatalf("refused: %v", st.Refused)
			}
			if st.Changed != (tc.want.kind != "") || next.StatusID != tc.want.status || next.ConfirmState != tc.want.state {
				t.Fatalf("changed %v to %d %s; want %q %d %s", st.Changed, next.StatusID, next.ConfirmState, tc.want.kind, tc.want.status, tc.want.state)
			}
			if (st.Reverse == instore.ReversalConfirmTimeout) != tc.want.reverse || (st.Reverse != "" && !tc.want.reverse) {
				t.Errorf("reverse %q, want %v", st.Reverse, tc.want.reverse)
			}
			if rearmed := st.Arm != nil && st.Arm.Equal(deadline) && st.ArmKind == lifecycle.EventConfirmDeadline; rearmed != tc.want.rearm {
				t.Errorf("arm %v %s, want re-armed %v", st.Arm, st.ArmKind, tc.want.rearm)
			}
			if !st.Changed {
				return
			}
			if st.Event == nil || st.Event.Kind != tc.want.kind || st.Event.Version != tc.state.Version+1 {
				t.Fatalf("timeline event %+v, want %s", st.Event, tc.want.kind)
			}
			if tc.want.kind == instore.EventConfirmed && (next.ConfirmedAt == nil || !next.ConfirmedAt.Equal(tc.ev.At) || st.Event.Actor != instore.ActorECR) {
				t.Errorf("confirmed at %v by %s", next.ConfirmedAt, st.Event.Actor)
			}
			if tc.want.kind == instore.EventAutoReversed && next.ConfirmedAt != nil {
				t.Errorf("auto-reversed with a confirmation time %v", next.ConfirmedAt)
			}
		})
	}
}

package lifecycle_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

func testRules() lifecycle.Rules {
	md := instore.DefaultMetadata()
	return lifecycle.Rules{AckTimeout: 10 * time.Second, Deadline: 2 * time.Minute, PreAuthValidity: 7 * 24 * time.Hour,
		ErrorID: func(code string) *int { c, _ := md.ErrorCode(code); return &c.ID },
		Status:  func(id instore.TransactionStatus) string { c, _ := md.TransactionStatus(id); return c.Code }}
}

// TestCreate: a new transaction is PENDING and SENT, with its CREATED
// timeline entry at version 1, the latest deadline the result can be
// awaited, and its ack time-out to arm.
func TestCreate(t *testing.T) {
	r := testRules()
	for _, typ := range []instore.TransactionType{instore.TypePurchase, instore.TypeRefund, instore.TypeReversal} {
		req := instore.Transaction{ID: "txn_1", Type: typ, Amount: 100, Currency: "SEK", CreatedAt: t0, StatusID: instore.StatusApproved, Version: 9}
		got, st := lifecycle.Create(req, r)
		if got.StatusID != instore.StatusPending || got.Progress != instore.ProgressSent || got.Version != 0 ||
			got.DeadlineAt == nil || !got.DeadlineAt.Equal(t0.Add(r.AckTimeout+r.Deadline)) || got.Amount != 100 || got.Type != typ {
			t.Errorf("%s: created %+v", typ, got)
		}
		want := instore.TransactionEvent{Version: 1, At: t0, Kind: instore.EventCreated, Actor: instore.ActorECR, StatusAfter: "PENDING",
			Detail: "the ECR's request; command sent to the terminal"}
		if !st.Changed || st.Event == nil || *st.Event != want {
			t.Errorf("%s: step %+v, event %+v; want %+v", typ, st, st.Event, want)
		}
		if st.Arm == nil || !st.Arm.Equal(t0.Add(r.AckTimeout)) || st.ArmKind != instore.EventAckTimeout {
			t.Errorf("%s: arm %v %s, want the ack time-out", typ, st.Arm, st.ArmKind)
		}
	}
}

// TestDue: the timer each state of a transaction needs, the one arm,
// Recover and the sweep all read.
func TestDue(t *testing.T) {
	r := testRules()
	acked, deadline, confirmBy := t0.Add(time.Second), t0.Add(time.Minute), t0.Add(5*time.Minute)
	pending := instore.Transaction{ID: "txn_1", StatusID: instore.StatusPending, CreatedAt: t0}
	ackedTx := pending
	ackedTx.AcknowledgedAt, ackedTx.DeadlineAt = &acked, &deadline
	ackedNoDeadline := pending
	ackedNoDeadline.AcknowledgedAt = &acked
	unconfirmed := ackedTx
	unconfirmed.StatusID, unconfirmed.ConfirmState, unconfirmed.ConfirmDeadline = instore.StatusApproved, instore.ConfirmPending, &confirmBy
	confirmed := unconfirmed
	confirmed.ConfirmState = instore.ConfirmConfirmed
	approved := ackedTx
	approved.StatusID = instore.StatusApproved
	techErr := pending
	techErr.StatusID = instore.StatusTechnicalError
	reversed := unconfirmed
	reversed.StatusID, reversed.ConfirmState = instore.StatusReversed, instore.ConfirmAutoReversed
	for _, tc := range []struct {
		name string
		t    instore.Transaction
		at   time.Time
		kind instore.TimelineKind
	}{
		{"sent, not acknowledged", pending, t0.Add(r.AckTimeout), instore.EventAckTimeout},
		{"acknowledged", ackedTx, deadline, instore.EventDeadline},
		{"acknowledged, no deadline stored", ackedNoDeadline, time.Time{}, ""},
		{"approved, awaiting confirmation", unconfirmed, confirmBy, lifecycle.EventConfirmDeadline},
		{"approved and confirmed", confirmed, time.Time{}, ""},
		{"approved", approved, time.Time{}, ""},
		{"ended by the service", techErr, time.Time{}, ""},
		{"auto-reversed", reversed, time.Time{}, ""},
	} {
		at, kind, ok := lifecycle.Due(tc.t, r)
		if ok != (tc.kind != "") || kind != tc.kind || !at.Equal(tc.at) {
			t.Errorf("%s: Due = %v %q %v, want %v %q", tc.name, at, kind, ok, tc.at, tc.kind)
		}
	}
}

// TestPairs: an approved result takes the original along (NextPair, which
// Next refuses) for a REVERSAL, in time or late, and for an INCREMENT,
// CAPTURE or VOID in time (a VOID late too: it released the hold); every
// other (type, event) goes to Next alone.
func TestPairs(t *testing.T) {
	result := func(status instore.TransactionStatus) *instore.TerminalResult {
		return &instore.TerminalResult{MessageID: "m", StatusID: status}
	}
	ended := instore.Transaction{StatusID: instore.StatusTechnicalError} // the service ended it (WP25, WP36)
	for _, typ := range instore.TransactionTypes {
		for _, tc := range []struct {
			name string
			e    lifecycle.Event
			ok   bool // an approved result
		}{
			{"approved", lifecycle.Event{Kind: instore.EventResult, Result: result(instore.StatusApproved)}, true},
			{"declined", lifecycle.Event{Kind: instore.EventResult, Result: result(instore.StatusTransactionDeclined)}, false},
			{"technical error", lifecycle.Event{Kind: instore.EventResult, Result: result(instore.StatusTechnicalError)}, false},
			{"no result", lifecycle.Event{Kind: instore.EventResult}, false},
			{"ack", lifecycle.Event{Kind: instore.EventAcknowledged}, false},
			{"deadline", lifecycle.Event{Kind: instore.EventDeadline}, false},
			{"cancel", lifecycle.Event{Kind: instore.EventCancelRequested}, false},
			{"forwarded", lifecycle.Event{Kind: instore.EventForwarded}, false},
		} {
			inTime := tc.ok && (typ == instore.TypeReversal || instore.OnPreAuth(typ))
			late := tc.ok && (typ == instore.TypeReversal || typ == instore.TypeVoid)
			pending, lateT := instore.Transaction{Type: typ, StatusID: instore.StatusPending}, ended
			lateT.Type = typ
			if got := lifecycle.Pairs(pending, tc.e); got != inTime {
				t.Errorf("Pairs(%s pending, %s) = %v, want %v", typ, tc.name, got, inTime)
			}
			if got := lifecycle.Pairs(lateT, tc.e); got != late {
				t.Errorf("Pairs(%s ended by the service, %s) = %v, want %v", typ, tc.name, got, late)
			}
			if _, st := lifecycle.Next(pending, tc.e, testRules()); inTime && st.Refused == nil {
				t.Errorf("Next(%s pending, %s) took an event NextPair must apply", typ, tc.name)
			}
		}
	}
}

package lifecycle_test

import (
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextForwarding runs every (state, event) pair of an offline
// approval's forwarding: none (not offline) and each state, by each event.
func TestNextForwarding(t *testing.T) {
	at := t0
	earlier := at.Add(-time.Hour)
	// want: the state after ("": unchanged).
	wants := map[instore.ForwardingState]map[lifecycle.ForwardEvent]instore.ForwardingState{
		"": {lifecycle.ForwardQueue: instore.ForwardQueued},
		instore.ForwardQueued: {
			lifecycle.ForwardForwarded: instore.ForwardForwarded,
			lifecycle.ForwardDeclined:  instore.ForwardDeclined,
		},
	}
	of := func(state instore.ForwardingState) *instore.Forwarding {
		if state == "" {
			return nil
		}
		f := &instore.Forwarding{State: state}
		if state != instore.ForwardQueued {
			f.ForwardedAt = &earlier
		}
		return f
	}
	next := func(f *instore.Forwarding, ev lifecycle.ForwardEvent) (*instore.Forwarding, bool) {
		return lifecycle.NextForwarding(f, ev, at)
	}
	everyRecordPair(t, append([]instore.ForwardingState{""}, instore.ForwardingStates...), lifecycle.ForwardEvents, wants, of, next,
		func(t *testing.T, _ instore.ForwardingState, next *instore.Forwarding, ok bool, want instore.ForwardingState) {
			if !ok || next == nil || next.State != want {
				t.Fatalf("NextForwarding = %+v, %v; want %s", next, ok, want)
			}
			switch {
			case want == instore.ForwardQueued && next.ForwardedAt != nil:
				t.Errorf("QUEUED with forwardedAt %v", next.ForwardedAt)
			case want != instore.ForwardQueued && (next.ForwardedAt == nil || !next.ForwardedAt.Equal(at)):
				t.Errorf("forwardedAt %v, want %v", next.ForwardedAt, at)
			}
		})
}

// TestOfflineResult: an APPROVED purchase result with offline: true is
// queued (forwarding QUEUED, result.offline kept, said in the RESULT
// entry), the status APPROVED; a late one is REVERSED and queued too (the
// terminal forwards the sale with its reversal). The flag on any other
// result is dropped and queues nothing.
func TestOfflineResult(t *testing.T) {
	r := testRules()
	at := t0.Add(time.Minute)
	pending := func(typ instore.TransactionType) instore.Transaction {
		return instore.Transaction{ID: "txn_1", Type: typ, Amount: 1000, Currency: "EUR", StatusID: instore.StatusPending,
			Progress: instore.ProgressAcknowledged, Version: 2, CreatedAt: t0, AcknowledgedAt: &t0}
	}
	late := pending(instore.TypePurchase)
	late.StatusID, late.Progress = instore.StatusTechnicalError, instore.ProgressFinal
	for _, tc := range []struct {
		name       string
		t          instore.Transaction
		status     instore.TransactionStatus
		wantStatus instore.TransactionStatus
		queued     bool
	}{
		{"purchase approved offline", pending(instore.TypePurchase), instore.StatusApproved, instore.StatusApproved, true},
		{"purchase approved offline late", late, instore.StatusApproved, instore.StatusReversed, true},
		{"purchase declined, said offline", pending(instore.TypePurchase), instore.StatusTransactionDeclined, instore.StatusTransactionDeclined, false},
		{"refund approved, said offline", pending(instore.TypeRefund), instore.StatusApproved, instore.StatusApproved, false},
		{"pre-auth approved, said offline", pending(instore.TypePreAuth), instore.StatusApproved, instore.StatusApproved, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := lifecycle.Event{Kind: instore.EventResult, At: at, Result: &instore.TerminalResult{MessageID: "m-1", Ref: "txn_1",
				StatusID: tc.status, Result: instore.Result{Offline: true}}}
			next, st := lifecycle.Next(tc.t, e, r)
			if !st.Changed || next.StatusID != tc.wantStatus || next.Result == nil {
				t.Fatalf("Next = status %d, changed %v; want %d", next.StatusID, st.Changed, tc.wantStatus)
			}
			if next.Result.Offline != tc.queued {
				t.Errorf("result.offline = %v, want %v", next.Result.Offline, tc.queued)
			}
			queued := next.Forwarding != nil && next.Forwarding.State == instore.ForwardQueued && next.Forwarding.ForwardedAt == nil
			if queued != tc.queued || !tc.queued && next.Forwarding != nil {
				t.Errorf("forwarding = %+v, want queued %v", next.Forwarding, tc.queued)
			}
			if said := strings.Contains(st.Event.Detail, "approved offline"); said != tc.queued {
				t.Errorf("detail %q", st.Event.Detail)
			}
		})
	}
}

// TestForwarded: the terminal's forwarding report moves a QUEUED approval
// to FORWARDED or DECLINED with its timeline entry (FORWARDED,
// FORWARD_DECLINED; actor TERMINAL; the status unchanged; version + 1);
// the same report again, a contradicting one, or one on a transaction
// that was not approved offline changes nothing; an event without its
// report is refused.
func TestForwarded(t *testing.T) {
	r := testRules()
	fwdAt := t0.Add(time.Hour)
	approved := instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, Amount: 1000, Currency: "EUR", StatusID: instore.StatusApproved,
		Progress: instore.ProgressFinal, Version: 4, CreatedAt: t0, Result: &instore.Result{}}
	queued := approved
	queued.Result = &instore.Result{Offline: true}
	queued.Forwarding = &instore.Forwarding{State: instore.ForwardQueued}
	reversed := queued
	reversed.StatusID = instore.StatusReversed
	report := func(declined bool) lifecycle.Event {
		return lifecycle.Event{Kind: instore.EventForwarded, At: fwdAt.Add(time.Second),
			Forward: &instore.ForwardReport{MessageID: "f-1", Ref: "txn_1", Declined: declined, ForwardedAt: fwdAt}}
	}
	for _, tc := range []struct {
		name     string
		t        instore.Transaction
		declined bool
		want     instore.ForwardingState // "": unchanged
		kind     instore.TimelineKind
	}{
		{"queued, accepted", queued, false, instore.ForwardForwarded, instore.EventForwarded},
		{"queued, declined", queued, true, instore.ForwardDeclined, instore.EventForwardDeclined},
		{"reversed and queued, accepted", reversed, false, instore.ForwardForwarded, instore.EventForwarded},
		{"not offline", approved, false, "", ""},
		{"not offline, declined", approved, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, st := lifecycle.Next(tc.t, report(tc.declined), r)
			if st.Refused != nil {
				t.Fatalf("refused: %v", st.Refused)
			}
			if tc.want == "" {
				if st.Changed || next.Forwarding != nil {
					t.Fatalf("changed %v, forwarding %+v; want unchanged", st.Changed, next.Forwarding)
				}
				return
			}
			if !st.Changed || next.Forwarding == nil || next.Forwarding.State != tc.want || !next.Forwarding.ForwardedAt.Equal(fwdAt) {
				t.Fatalf("changed %v, forwarding %+v; want %s at %v", st.Changed, next.Forwarding, tc.want, fwdAt)
			}
			if next.StatusID != tc.t.StatusID || st.Ended || st.Reverse != "" || st.Cancel != "" {
				t.Errorf("status %d, step %+v: the status must not move", next.StatusID, st)
			}
			ev := st.Event
			if ev.Kind != tc.kind || ev.Actor != instore.ActorTerminal || ev.Version != tc.t.Version+1 || ev.StatusBefore != ev.StatusAfter {
				t.Errorf("timeline entry %+v, want %s by TERMINAL at version %d", ev, tc.kind, tc.t.Version+1)
			}
			if tc.t.Forwarding.State != instore.ForwardQueued {
				t.Errorf("the transaction given was changed: %+v", tc.t.Forwarding)
			}
			// Applied once: the same report again, or the other outcome,
			// changes nothing.
			for _, again := range []bool{tc.declined, !tc.declined} {
				if n2, st2 := lifecycle.Next(next, report(again), r); st2.Changed || n2.Forwarding.State != tc.want {
					t.Errorf("a second report (declined %v) changed it: %+v", again, n2.Forwarding)
				}
			}
		})
	}
	if _, st := lifecycle.Next(queued, lifecycle.Event{Kind: instore.EventForwarded, At: fwdAt}, r); st.Refused == nil {
		t.Errorf("a forwarding event without a report was not refused")
	}
}

package storetest

import (
	"testing"

	"github.com/instore-dev/instore"
)

// ev is a timeline event of version v.
func ev(v int64, kind instore.TimelineKind, before, after string) instore.TransactionEvent {
	return instore.TransactionEvent{Version: v, At: at(int(v)), Kind: kind, Actor: instore.ActorTerminal,
		StatusBefore: before, StatusAfter: after, Detail: "d" + string(kind)}
}

func storedEvents(es ...instore.TransactionEvent) []instore.TransactionEvent {
	out := []instore.TransactionEvent{}
	for _, e := range es {
		e.At = stored(e.At)
		out = append(out, e)
	}
	return out
}

func mustEvents(t *testing.T, s instore.Store, ref string) []instore.TransactionEvent {
	t.Helper()
	return mustGet(t, "TransactionEvents", s.TransactionEvents, ref)
}

// checkTimeline compares the timeline of ref with want as stored.
func checkTimeline(t *testing.T, s instore.Store, ref string, want ...instore.TransactionEvent) {
	t.Helper()
	if d := diff(storedEvents(want...), mustEvents(t, s, ref)); d != "" {
		t.Errorf("TransactionEvents(%q) mismatch (-want +got):\n%s", ref, d)
	}
}

var timelineTests = []test{
	{"EveryWritePath", func(t *testing.T, s instore.Store) {
		// Each write of a transaction stores its events with it, in order
		// of version: create, update, progress, update with effects, and a
		// pair (both sides).
		terminalID := seed(t, s)
		tx := newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1))
		created := ev(1, instore.EventCreated, "", "PENDING")
		if err := s.CreateTransaction(t.Context(), &instore.Change{T: tx, Events: []instore.TransactionEvent{created}}); err != nil {
			t.Fatal(err)
		}
		ack := ev(2, instore.EventAcknowledged, "PENDING", "PENDING")
		mustCommit(t, s, &instore.Change{T: tx, From: 1, Events: []instore.TransactionEvent{ack}})
		stage := ev(3, instore.EventProgress, "PENDING", "PENDING")
		tx.Progress = instore.ProgressWaitingForCard
		mustCommit(t, s, &instore.Change{T: tx, From: 2, Relaxed: true, Events: []instore.TransactionEvent{stage}})
		result := ev(4, instore.EventResult, "PENDING", "APPROVED")
		tx.StatusID, tx.Progress, tx.ResultMessageID = instore.StatusApproved, instore.ProgressFinal, "m-1"
		mustCommit(t, s, &instore.Change{T: tx, From: 3, Events: []instore.TransactionEvent{result},
			Effects: []*instore.Effect{{ID: "eff_timeline", Kind: instore.EffectCancel, SerialNumber: "SN-1", Ref: "txn_1", CreatedAt: at(2)}}})
		checkTimeline(t, s, "txn_1", created, ack, stage, result)
		if es := mustEvents(t, s, "txn_unknown"); len(es) != 0 {
			t.Errorf("timeline of an unknown transaction = %+v, want empty", es)
		}
	}},
	{"SeveralEventsInOneWrite", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		tx := newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1))
		a, b := ev(1, instore.EventCreated, "", "PENDING"), ev(2, instore.EventAcknowledged, "PENDING", "PENDING")
		mustCreate(t, s, &instore.Change{T: tx, Events: []instore.TransactionEvent{a}})
		// An update carrying two events (the second a re-write of the first
		// is kept once) writes both, in its transaction.
		mustCommit(t, s, &instore.Change{T: tx, From: 1, Events: []instore.TransactionEvent{b, a}})
		checkTimeline(t, s, "txn_1", a, b)
	}},
	{"RefusedWriteStoresNoEvent", func(t *testing.T, s instore.Store) {
		// A failed compare-and-set writes no event, on every path.
		terminalID := seed(t, s)
		tx := newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1))
		mustCreate(t, s, &instore.Change{T: tx, Events: []instore.TransactionEvent{ev(1, instore.EventCreated, "", "PENDING")}})
		stale := *tx
		staleEv := []instore.TransactionEvent{ev(5, instore.EventDeadline, "PENDING", "TECHNICAL_ERROR")}
		checkConflict(t, "Commit(stale)", s.Commit(t.Context(), &instore.Change{T: &stale, From: 7, Events: staleEv}))
		checkConflict(t, "Commit(stale, relaxed)", s.Commit(t.Context(), &instore.Change{T: &stale, From: 7, Relaxed: true, Events: staleEv}))
		checkConflict(t, "Commit(stale, with an effect)", s.Commit(t.Context(), &instore.Change{T: &stale, From: 7, Events: staleEv,
			Effects: []*instore.Effect{{ID: "eff_stale", Kind: instore.EffectCancel, SerialNumber: "SN-1", Ref: "txn_1", CreatedAt: at(2)}}}))
		two := *tx
		checkConflict(t, "Commit(stale, two events)", s.Commit(t.Context(), &instore.Change{T: &two, From: 7,
			Events: []instore.TransactionEvent{ev(5, instore.EventDeadline, "PENDING", "TECHNICAL_ERROR"), ev(6, instore.EventResult, "x", "y")}}))
		// A second PENDING transaction on the terminal ID is refused, with
		// its event.
		other := newTransaction("txn_2", "mer_1", terminalID, "SN-1", instore.StatusPending, at(2))
		checkConflict(t, "CreateTransaction(second PENDING)", s.CreateTransaction(t.Context(), &instore.Change{T: other,
			Events: []instore.TransactionEvent{ev(1, instore.EventCreated, "", "PENDING")}}))
		if es := mustEvents(t, s, "txn_1"); len(es) != 1 {
			t.Errorf("timeline after refused writes = %+v, want the creation only", es)
		}
		if es := mustEvents(t, s, "txn_2"); len(es) != 0 {
			t.Errorf("timeline of a refused creation = %+v, want empty", es)
		}
	}},
	{"Pair", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		orig := newTransaction("txn_o", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(1))
		mustCreateTransaction(t, s, orig)
		rev := newTransaction("txn_r", "mer_1", terminalID, "SN-1", instore.StatusPending, at(2))
		rev.Type, rev.OriginalID, rev.Reverses = instore.TypeReversal, "txn_o", "txn_o"
		mustCreateTransaction(t, s, rev)
		revEv, origEv := ev(2, instore.EventResult, "PENDING", "APPROVED"), ev(2, instore.EventReversed, "APPROVED", "REVERSED")
		rev.StatusID = instore.StatusApproved
		orig.StatusID, orig.ReversedBy = instore.StatusReversed, "txn_r"
		mustCommit(t, s, &instore.Change{T: rev, From: 1, Events: []instore.TransactionEvent{revEv},
			Pair: &instore.Change{T: orig, From: 1, Events: []instore.TransactionEvent{origEv}}})
		checkTimeline(t, s, "txn_r", revEv)
		checkTimeline(t, s, "txn_o", origEv)
	}},
}

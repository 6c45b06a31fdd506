package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newEffect returns an open effect owed to serial.
func newEffect(id string, kind instore.EffectKind, serial, ref, reason string, created time.Time) *instore.Effect {
	return &instore.Effect{ID: id, Kind: kind, SerialNumber: serial, Ref: ref, Reason: reason, CreatedAt: created}
}

// done is e done with outcome at t, as the store returns it.
func done(e *instore.Effect, outcome instore.EffectOutcome, t time.Time) *instore.Effect {
	ee := asStored(e)
	ee.Outcome, ee.DoneAt = outcome, ptr(stored(t))
	return ee
}

func mustEffect(t *testing.T, s instore.Store, id string) *instore.Effect {
	t.Helper()
	return mustGet(t, "Effect", s.Effect, id)
}

func mustOpenEffects(t *testing.T, s instore.Store, serial string) []*instore.Effect {
	t.Helper()
	return mustGet(t, "OpenEffects", s.OpenEffects, serial)
}

// owing stores a PENDING transaction on a seeded terminal ID of device
// SN-1 and returns it; the effects are then owed for it.
func owing(t *testing.T, s instore.Store) *instore.Transaction {
	t.Helper()
	terminalID := seed(t, s)
	return mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1)))
}

// mustOwe commits a copy of tx, unchanged but for the effects es it now
// owes (tx itself keeps its version).
func mustOwe(t *testing.T, s instore.Store, tx *instore.Transaction, es ...*instore.Effect) {
	t.Helper()
	next := *tx
	mustCommit(t, s, &instore.Change{T: &next, From: tx.Version, Effects: es})
}

// mustEndEffect ends effect id of device serial with outcome at when.
func mustEndEffect(t *testing.T, s instore.Store, id, serial string, outcome instore.EffectOutcome, when time.Time) {
	t.Helper()
	if err := s.EndEffect(t.Context(), id, serial, outcome, when); err != nil {
		t.Fatalf("EndEffect(%s) = %v", id, err)
	}
}

// expired is tx ended TECHNICAL_ERROR, as a change that owes a cancel.
func expired(tx *instore.Transaction) *instore.Transaction {
	e := *tx
	e.StatusID, e.Progress, e.CompletedAt = instore.StatusTechnicalError, instore.ProgressFinal, ptr(at(3))
	return &e
}

var effectTests = []test{
	{"CommitEffects", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		next := expired(tx)
		cancel := newEffect("eff_1", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(3))
		if err := s.Commit(t.Context(), &instore.Change{T: next, From: tx.Version, Effects: []*instore.Effect{cancel}}); err != nil {
			t.Fatalf("CommitEffects() = %v", err)
		}
		if next.Version != tx.Version+1 {
			t.Errorf("CommitEffects() left Version %d, want %d", next.Version, tx.Version+1)
		}
		got, err := s.Transaction(t.Context(), tx.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.StatusID != instore.StatusTechnicalError || got.Version != tx.Version+1 {
			t.Errorf("Transaction() after CommitEffects = status %d version %d, want %d %d", got.StatusID, got.Version, instore.StatusTechnicalError, tx.Version+1)
		}
		if d := diff(asStored(cancel), mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) mismatch (-want +got):\n%s", d)
		}
		if d := diff([]*instore.Effect{asStored(cancel)}, mustOpenEffects(t, s, "SN-1")); d != "" {
			t.Errorf("OpenEffects(SN-1) mismatch (-want +got):\n%s", d)
		}
		if owed, err := s.OwedDevices(t.Context()); err != nil || len(owed) != 1 || !owed["SN-1"].Equal(asStored(cancel).CreatedAt) {
			t.Errorf("OwedDevices() = %v, %v; want SN-1 at %v", owed, err, asStored(cancel).CreatedAt)
		}
		if _, err := s.EndEffectsOf(t.Context(), tx.ID, instore.EffectCancel, instore.EffectMoot, at(4)); err != nil {
			t.Fatal(err)
		}
		if owed, err := s.OwedDevices(t.Context()); err != nil || len(owed) != 0 {
			t.Errorf("OwedDevices() after the effect ended = %v, %v; want none", owed, err)
		}
	}},
	{"CommitEffectsWithPrintJob", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		next := *tx
		next.StatusID, next.Progress, next.ResultMessageID = instore.StatusApproved, instore.ProgressFinal, "t-1"
		job := &instore.PrintJob{ID: "prt_1", MerchantID: "mer_1", TerminalID: tx.TerminalID, TransactionID: tx.ID,
			Copy: instore.CopyCustomer, Lines: []string{"ACME", "APPROVED"}, CreatedAt: at(3)}
		print := newEffect("eff_p", instore.EffectPrint, "SN-1", job.ID, "", at(3))
		if err := s.Commit(t.Context(), &instore.Change{T: &next, From: tx.Version, Job: job, Effects: []*instore.Effect{print}}); err != nil {
			t.Fatalf("CommitEffects(job) = %v", err)
		}
		if d := diff(asStored(job), printJobs.mustGet(t, s, job.ID)); d != "" {
			t.Errorf("PrintJob(prt_1) mismatch (-want +got):\n%s", d)
		}
		if d := diff(asStored(print), mustEffect(t, s, "eff_p")); d != "" {
			t.Errorf("Effect(eff_p) mismatch (-want +got):\n%s", d)
		}
	}},
	{"CommitEffectsAllOrNothing", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		taken := newEffect("eff_taken", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(2))
		marked := *tx
		marked.CancelRequested = true
		if err := s.Commit(t.Context(), &instore.Change{T: &marked, From: tx.Version, Effects: []*instore.Effect{taken}}); err != nil {
			t.Fatalf("CommitEffects() = %v", err)
		}
		for _, tc := range []struct {
			name    string
			from    int64
			job     *instore.PrintJob
			effects []*instore.Effect
		}{
			{"stale version", tx.Version, nil, []*instore.Effect{newEffect("eff_2", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(3))}},
			{"taken effect id", marked.Version, nil, []*instore.Effect{
				newEffect("eff_3", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(3)), taken}},
			{"refused print job", marked.Version, &instore.PrintJob{ID: "prt_1", MerchantID: "mer_missing", TerminalID: tx.TerminalID, Lines: []string{"x"}, CreatedAt: at(3)},
				[]*instore.Effect{newEffect("eff_4", instore.EffectPrint, "SN-1", "prt_1", "", at(3))}},
		} {
			next := expired(&marked)
			err := s.Commit(t.Context(), &instore.Change{T: next, From: tc.from, Job: tc.job, Effects: tc.effects})
			checkConflict(t, "CommitEffects("+tc.name+")", err)
			if next.Version != marked.Version {
				t.Errorf("CommitEffects(%s) changed t.Version to %d", tc.name, next.Version)
			}
		}
		got, err := s.Transaction(t.Context(), tx.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.StatusID != instore.StatusPending || got.Version != marked.Version || !got.CancelRequested {
			t.Errorf("Transaction() after refused changes = status %d version %d cancel %v, want PENDING, %d, cancel requested",
				got.StatusID, got.Version, got.CancelRequested, marked.Version)
		}
		for _, id := range []string{"eff_2", "eff_3", "eff_4"} {
			checkMissing(t, "Effect(refused "+id+")", s.Effect, id, "")
		}
		checkMissing(t, "PrintJob(refused)", s.PrintJob, "prt_1", "")
		if d := diff([]*instore.Effect{asStored(taken)}, mustOpenEffects(t, s, "SN-1")); d != "" {
			t.Errorf("OpenEffects(SN-1) after refused changes (-want +got):\n%s", d)
		}
	}},
	{"CreatePrintJobEffect", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		job := newPrintJob("prt_1", terminalID, at(1), "Thank you")
		e := newEffect("eff_1", instore.EffectPrint, "SN-1", job.ID, "", at(1))
		if err := s.CreatePrintJobEffect(t.Context(), job, e); err != nil {
			t.Fatalf("CreatePrintJobEffect() = %v", err)
		}
		if d := diff(asStored(job), printJobs.mustGet(t, s, job.ID)); d != "" {
			t.Errorf("PrintJob(prt_1) mismatch (-want +got):\n%s", d)
		}
		if d := diff(asStored(e), mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) mismatch (-want +got):\n%s", d)
		}
		// A taken effect id: the job is not stored either.
		job2 := newPrintJob("prt_2", terminalID, at(2), "again")
		checkConflict(t, "CreatePrintJobEffect(taken effect id)",
			s.CreatePrintJobEffect(t.Context(), job2, newEffect("eff_1", instore.EffectPrint, "SN-1", job2.ID, "", at(2))))
		checkMissing(t, "PrintJob(refused)", s.PrintJob, "prt_2", "")
		// A refused job: the effect is not stored either.
		checkConflict(t, "CreatePrintJobEffect(taken job id)",
			s.CreatePrintJobEffect(t.Context(), newPrintJob("prt_1", terminalID, at(3), "x"), newEffect("eff_3", instore.EffectPrint, "SN-1", "prt_1", "", at(3))))
		checkMissing(t, "Effect(refused)", s.Effect, "eff_3", "")
	}},
	{"OpenEffects", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		seedTerminal(t, s, "SN-2")
		// Created out of order; two at the same time, ordered by id.
		es := []*instore.Effect{
			newEffect("eff_c", instore.EffectCancel, "SN-1", tx.ID, instore.CancelAckTimeout, at(5)),
			newEffect("eff_a", instore.EffectReversal, "SN-1", tx.ID, instore.ReversalLateApproval, at(3)),
			newEffect("eff_b", instore.EffectPrint, "SN-1", "prt_1", "", at(5)),
			newEffect("eff_other", instore.EffectCancel, "SN-2", "txn_9", instore.CancelByECR, at(1)),
			newEffect("eff_done", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(1)),
		}
		from := tx.Version
		for _, e := range es {
			next := *tx
			if err := s.Commit(t.Context(), &instore.Change{T: &next, From: from, Effects: []*instore.Effect{e}}); err != nil {
				t.Fatalf("CommitEffects(%s) = %v", e.ID, err)
			}
			from = next.Version
		}
		mustEndEffect(t, s, "eff_done", "SN-1", instore.EffectConfirmed, at(6))
		want := []*instore.Effect{asStored(es[1]), asStored(es[2]), asStored(es[0])}
		if d := diff(want, mustOpenEffects(t, s, "SN-1")); d != "" {
			t.Errorf("OpenEffects(SN-1) mismatch (-want +got):\n%s", d)
		}
		if d := diff([]*instore.Effect{asStored(es[3])}, mustOpenEffects(t, s, "SN-2")); d != "" {
			t.Errorf("OpenEffects(SN-2) mismatch (-want +got):\n%s", d)
		}
		if got := mustOpenEffects(t, s, "SN-NONE"); got == nil || len(got) != 0 {
			t.Errorf("OpenEffects(unknown device) = %v, want an empty, non-nil list", got)
		}
	}},
	{"EndEffect", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		e := newEffect("eff_1", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(2))
		mustOwe(t, s, tx, e)
		// Another device's confirm, or an unknown id: nothing changes.
		checkNotFound(t, "EndEffect(another device's)", s.EndEffect(t.Context(), "eff_1", "SN-2", instore.EffectConfirmed, at(3)), "eff_1")
		checkNotFound(t, "EndEffect(unknown)", s.EndEffect(t.Context(), "eff_missing_7c", "SN-1", instore.EffectConfirmed, at(3)), "eff_missing_7c")
		if d := diff(asStored(e), mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) after refused ends (-want +got):\n%s", d)
		}
		mustEndEffect(t, s, "eff_1", "SN-1", instore.EffectConfirmed, at(4))
		want := done(e, instore.EffectConfirmed, at(4))
		if d := diff(want, mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) after EndEffect (-want +got):\n%s", d)
		}
		// Done once: the first outcome stays.
		checkNotFound(t, "EndEffect(done)", s.EndEffect(t.Context(), "eff_1", "SN-1", instore.EffectMoot, at(5)), "")
		if d := diff(want, mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) after a second EndEffect (-want +got):\n%s", d)
		}
		if got := mustOpenEffects(t, s, "SN-1"); len(got) != 0 {
			t.Errorf("OpenEffects(SN-1) = %v, want none", got)
		}
		checkMissing(t, "Effect(missing)", s.Effect, "eff_missing_7c", "eff_missing_7c")
	}},
	{"ConcurrentEndEffect", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		e := newEffect("eff_1", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(2))
		mustOwe(t, s, tx, e)
		outcomes := []instore.EffectOutcome{instore.EffectConfirmed, instore.EffectMoot, instore.EffectConfirmed, instore.EffectMoot, instore.EffectConfirmed, instore.EffectMoot}
		errs := atOnce(len(outcomes), func(i int) error {
			return s.EndEffect(t.Context(), "eff_1", "SN-1", outcomes[i], at(10+i))
		})
		winner := exactlyOneOr(t, "concurrent EndEffect(same effect)", errs, instore.ErrNotFound)
		if winner < 0 {
			t.FailNow()
		}
		if d := diff(done(e, outcomes[winner], at(10+winner)), mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) is not the winner's (-want +got):\n%s", d)
		}
	}},
	{"EndEffectsOf", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		es := []*instore.Effect{
			newEffect("eff_1", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(2)),
			newEffect("eff_2", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(3)),
			newEffect("eff_3", instore.EffectReversal, "SN-1", tx.ID, instore.ReversalLateApproval, at(4)),
			newEffect("eff_4", instore.EffectCancel, "SN-1", "txn_other", instore.CancelDeadline, at(5)),
			newEffect("eff_5", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(1)),
		}
		mustOwe(t, s, tx, es...)
		mustEndEffect(t, s, "eff_5", "SN-1", instore.EffectConfirmed, at(5))
		n, err := s.EndEffectsOf(t.Context(), tx.ID, instore.EffectCancel, instore.EffectMoot, at(6))
		if err != nil || n != 2 {
			t.Fatalf("EndEffectsOf(cancels of txn_1) = %d, %v; want 2, nil", n, err)
		}
		want := []*instore.Effect{
			done(es[0], instore.EffectMoot, at(6)), done(es[1], instore.EffectMoot, at(6)),
			asStored(es[2]), asStored(es[3]), done(es[4], instore.EffectConfirmed, at(5)),
		}
		for i, w := range want {
			if d := diff(w, mustEffect(t, s, es[i].ID)); d != "" {
				t.Errorf("Effect(%s) after EndEffectsOf (-want +got):\n%s", es[i].ID, d)
			}
		}
		if n, err := s.EndEffectsOf(t.Context(), tx.ID, instore.EffectCancel, instore.EffectMoot, at(7)); err != nil || n != 0 {
			t.Errorf("EndEffectsOf(again) = %d, %v; want 0, nil", n, err)
		}
	}},
	{"CompletePrintJobEndsItsEffect", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		job := newPrintJob("prt_1", terminalID, at(1), "Thank you")
		e := newEffect("eff_1", instore.EffectPrint, "SN-1", job.ID, "", at(1))
		if err := s.CreatePrintJobEffect(t.Context(), job, e); err != nil {
			t.Fatal(err)
		}
		other := newPrintJob("prt_2", terminalID, at(1), "Other")
		oe := newEffect("eff_2", instore.EffectPrint, "SN-1", other.ID, "", at(1))
		if err := s.CreatePrintJobEffect(t.Context(), other, oe); err != nil {
			t.Fatal(err)
		}
		if err := s.CompletePrintJob(t.Context(), job.ID, instore.PrintTimeout, at(2)); err != nil {
			t.Fatalf("CompletePrintJob() = %v", err)
		}
		if d := diff(done(e, instore.EffectMoot, at(2)), mustEffect(t, s, "eff_1")); d != "" {
			t.Errorf("Effect(eff_1) after its job ended (-want +got):\n%s", d)
		}
		if d := diff(asStored(oe), mustEffect(t, s, "eff_2")); d != "" {
			t.Errorf("Effect(eff_2) of another job changed (-want +got):\n%s", d)
		}
	}},
	{"ExpireEffects", func(t *testing.T, s instore.Store) {
		tx := owing(t, s)
		seedTerminal(t, s, "SN-2")
		es := []*instore.Effect{
			newEffect("eff_b", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(2)),
			newEffect("eff_a", instore.EffectReversal, "SN-2", "txn_9", instore.ReversalLateApproval, at(2)),
			newEffect("eff_c", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(1)),
			newEffect("eff_new", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(10)),
			newEffect("eff_done", instore.EffectCancel, "SN-1", tx.ID, instore.CancelByECR, at(1)),
		}
		mustOwe(t, s, tx, es...)
		mustEndEffect(t, s, "eff_done", "SN-1", instore.EffectConfirmed, at(3))
		got, err := s.ExpireEffects(t.Context(), at(10), at(20))
		if err != nil {
			t.Fatalf("ExpireEffects() = %v", err)
		}
		// The reversal stays owed: it gives money back.
		want := []*instore.Effect{
			done(es[2], instore.EffectExpired, at(20)), done(es[0], instore.EffectExpired, at(20)),
		}
		if d := diff(want, got); d != "" {
			t.Errorf("ExpireEffects() mismatch (-want +got):\n%s", d)
		}
		if d := diff([]*instore.Effect{asStored(es[3])}, mustOpenEffects(t, s, "SN-1")); d != "" {
			t.Errorf("OpenEffects(SN-1) after ExpireEffects (-want +got):\n%s", d)
		}
		if d := diff([]*instore.Effect{asStored(es[1])}, mustOpenEffects(t, s, "SN-2")); d != "" {
			t.Errorf("OpenEffects(SN-2) after ExpireEffects: the reversal must stay owed (-want +got):\n%s", d)
		}
		if d := diff(done(es[4], instore.EffectConfirmed, at(3)), mustEffect(t, s, "eff_done")); d != "" {
			t.Errorf("ExpireEffects() changed a done effect (-want +got):\n%s", d)
		}
		if got, err := s.ExpireEffects(t.Context(), at(10), at(21)); err != nil || got == nil || len(got) != 0 {
			t.Errorf("ExpireEffects(again) = %v, %v; want an empty, non-nil list", got, err)
		}
	}},
	{"RunningPrintJobs", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		var want []*instore.PrintJob
		for i, c := range []int{3, 1, 2, 1} {
			p := printJobs.mustCreate(t, s, newPrintJob(fmt.Sprintf("prt_%d", i), terminalID, at(c), "line"))
			if i != 2 {
				want = append(want, asStored(p))
			}
		}
		printJobs.mustCreate(t, s, func() *instore.PrintJob {
			p := newPrintJob("prt_busy", terminalID, at(0), "line")
			p.StatusID, p.CompletedAt = ptr(instore.PrintBusy), ptr(at(0))
			return p
		}())
		if err := s.CompletePrintJob(t.Context(), "prt_2", instore.PrintSuccess, at(4)); err != nil {
			t.Fatal(err)
		}
		// Oldest first: created_at, then id.
		checkAll(t, "RunningPrintJobs", s.RunningPrintJobs, want[1], want[2], want[0])
	}},
}

package simulation

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// The invariants of day closes (close.go), after every step and at
// quiescence.
const (
	invBatchReport = "a closed batch equals the terminal's report"
	invBatchOnce   = "a batch applied once"
	invCloseStuck  = "no close stuck"
	invCloseBusy   = "no purchase created while a close of its terminal ran"
	invCloseWindow = "a close's window starts where the last closed batch ended"
)

// closeSeen is what the checks saw of a close: when it was first seen
// ended (no longer PENDING) and CLOSED, and the batch as first seen
// CLOSED.
type closeSeen struct {
	ended, closed *time.Time
	first         *instore.Batch
}

// batches reads every close of the merchant.
func (w *world) batches(ctx context.Context) []*instore.Batch {
	bs, err := w.db.ListBatches(ctx, instore.BatchFilter{MerchantID: w.merchantID, From: epoch.Add(-time.Hour), To: epoch.Add(24 * time.Hour), Limit: 100000})
	if err != nil {
		w.fail("store readable", "%v", err)
	}
	slices.Reverse(bs) // oldest first
	return bs
}

// checkCloses checks, after every step, the closes in the store against
// the transactions ts: no transaction created while a close of its
// terminal ran (nor PENDING beside a PENDING close); a new close's window
// starts where the latest batch seen CLOSED before it ended; a CLOSED
// close is what its terminal answered, and never changes once CLOSED.
func (w *world) checkCloses(ts []*instore.Transaction) {
	now := w.sched.now
	bs := w.batches(context.Background())
	byTerminal := map[string][]*instore.Batch{}
	for _, b := range bs {
		byTerminal[b.TerminalID] = append(byTerminal[b.TerminalID], b)
		seen := w.closes.seen[b.ID]
		if seen == nil {
			seen = &closeSeen{}
			w.closes.seen[b.ID] = seen
			w.checkWindow(b)
		}
		if b.State != instore.BatchPending && seen.ended == nil {
			seen.ended = &now
		}
		if b.State == instore.BatchClosed && seen.closed == nil {
			seen.closed, seen.first = &now, b
			w.note("close %s of %s CLOSED: number %d, %d differences", b.ID, b.TerminalID, b.Number, len(b.Differences))
			w.checkReport(b)
		}
		if seen.first != nil && !reflect.DeepEqual(b, seen.first) {
			w.fail(invBatchOnce, "close %s changed once CLOSED: %+v, then %+v", b.ID, seen.first, b)
		}
	}
	for _, t := range ts {
		for _, b := range byTerminal[t.TerminalID] {
			end := now
			if seen := w.closes.seen[b.ID]; seen.ended != nil {
				end = *seen.ended
			}
			switch {
			case b.State == instore.BatchPending && t.StatusID == instore.StatusPending:
				w.fail(invCloseBusy, "%s %s is PENDING beside the PENDING close %s of %s", t.Type, t.ID, b.ID, t.TerminalID)
			case t.CreatedAt.After(b.ClosedAt) && t.CreatedAt.Before(end):
				w.fail(invCloseBusy, "%s %s created at %v, while the close %s of %s ran (%v to %v)", t.Type, t.ID,
					t.CreatedAt.Sub(epoch), b.ID, t.TerminalID, b.ClosedAt.Sub(epoch), end.Sub(epoch))
			}
		}
	}
}

// checkWindow: a new close's window opens at the ClosedAt of the latest
// batch of its terminal ID seen CLOSED before the close was made (or
// later, one closed while it was being made), never earlier: no
// transaction falls into two windows but those of a late answer's.
func (w *world) checkWindow(b *instore.Batch) {
	var latest time.Time
	for _, id := range sortedKeys(w.closes.seen) {
		seen := w.closes.seen[id]
		if seen.first != nil && seen.first.TerminalID == b.TerminalID && seen.closed.Before(b.ClosedAt) && seen.first.ClosedAt.After(latest) && id != b.ID {
			latest = seen.first.ClosedAt
		}
	}
	if b.OpenedAt.Before(latest) || b.OpenedAt.After(b.ClosedAt) {
		w.fail(invCloseWindow, "close %s of %s covers (%v, %v]; the latest batch closed before it ended at %v", b.ID, b.TerminalID,
			b.OpenedAt.Sub(epoch), b.ClosedAt.Sub(epoch), latest.Sub(epoch))
	}
}

// checkReport: a CLOSED close's terminal side is exactly what the device
// it was sent to answered for that batch number, to that close; no other
// close answered by that device holds that number (a device numbers its
// batches, whichever terminal ID it is linked to: relink.go).
func (w *world) checkReport(b *instore.Batch) {
	serial := b.SerialNumber
	a := w.closes.answers[serial][b.Number]
	switch {
	case a == nil:
		w.fail(invBatchReport, "close %s is CLOSED with number %d; %s never answered that number", b.ID, b.Number, serial)
	case a.batchID != b.ID || a.id != b.MessageID:
		w.fail(invBatchReport, "close %s is CLOSED with number %d (message %s); %s answered it to %s (message %s)", b.ID, b.Number, b.MessageID, serial, a.batchID, a.id)
	case !slices.Equal(a.items, b.TerminalItems):
		w.fail(invBatchReport, "close %s: %s answered %+v, the store holds %+v", b.ID, serial, a.items, b.TerminalItems)
	}
	for _, id := range sortedKeys(w.closes.seen) {
		seen := w.closes.seen[id]
		if o := seen.first; o != nil && id != b.ID && o.SerialNumber == b.SerialNumber && o.Number == b.Number {
			w.fail(invBatchOnce, "closes %s and %s answered by %s both hold batch number %d", id, b.ID, serial, b.Number)
		}
	}
}

// settledCloses checks at quiescence: no close PENDING, no batch answer
// left to resend; each CLOSED close's comparison is CompareBatch of its
// terminal's answer and the service's transactions of its window (read
// again now: a transaction that changed since the answer was applied may
// differ), each difference one the world made or a fault legitimately
// causes (expectedDifference); one batch.closed event per CLOSED close,
// none for another.
func (w *world) settledCloses(ctx context.Context) {
	for _, d := range w.devices {
		for _, a := range d.book.unconfirmed {
			w.fail(invCloseStuck, "%s still resends its batch %d (close %s)", d.serial, a.number, a.batchID)
		}
	}
	events := w.batchEvents(ctx)
	for _, b := range w.batches(ctx) {
		switch {
		case b.State == instore.BatchPending:
			w.fail(invCloseStuck, "close %s of %s PENDING at quiescence", b.ID, b.TerminalID)
		case b.State == instore.BatchClosed && events[b.ID] != 1:
			w.fail(invBatchOnce, "close %s is CLOSED with %d batch.closed events", b.ID, events[b.ID])
		case b.State != instore.BatchClosed && events[b.ID] != 0:
			w.fail(invBatchOnce, "close %s is %s with %d batch.closed events", b.ID, b.State, events[b.ID])
		}
		if b.State == instore.BatchClosed {
			w.checkComparison(ctx, b)
		}
	}
}

// batchEvents counts the batch.closed events of each close.
func (w *world) batchEvents(ctx context.Context) map[string]int {
	evs, err := w.db.ListEvents(ctx, instore.EventFilter{MerchantID: w.merchantID, Limit: 1 << 20})
	if err != nil {
		w.fail("store readable", "%v", err)
	}
	n := map[string]int{}
	for _, e := range evs {
		var d struct {
			BatchID string `json:"batchId"`
		}
		if e.Type == instore.EventBatchClosed && json.Unmarshal(e.Data, &d) == nil {
			n[d.BatchID]++
		}
	}
	return n
}

// checkComparison recomputes b's comparison on the store's final state.
func (w *world) checkComparison(ctx context.Context, b *instore.Batch) {
	ts, err := w.db.TerminalTransactions(ctx, b.TerminalID, b.OpenedAt, b.ClosedAt)
	if err != nil {
		w.fail("store readable", "%v", err)
		return
	}
	service := []instore.BatchItem{}
	byRef := map[string]*instore.Transaction{}
	for _, t := range ts {
		byRef[t.ID] = t
		if instore.InBatch(t, b.OpenedAt, b.ClosedAt) {
			service = append(service, instore.BatchItemOf(t))
		}
	}
	c := instore.CompareBatch(b.TerminalItems, service)
	stored := map[string]instore.BatchDifference{}
	for _, d := range b.Differences {
		stored[d.Ref] = d
	}
	again := map[string]instore.BatchDifference{}
	for _, d := range c.Differences {
		again[d.Ref] = d
	}
	for _, ref := range sortedKeys(unionKeys(stored, again)) {
		s, a := stored[ref], again[ref]
		if !reflect.DeepEqual(s, a) && !w.changedSince(ctx, ref, *b.ReportedAt) {
			w.fail(invBatchReport, "close %s: the stored difference of %s is %+v, CompareBatch on the store gives %+v", b.ID, ref, s, a)
		}
	}
	if len(b.Differences) == 0 != b.Matched {
		w.fail(invBatchReport, "close %s: matched %v with %d differences", b.ID, b.Matched, len(b.Differences))
	}
	for _, d := range b.Differences {
		if why := w.expectedDifference(b, d, byRef[d.Ref]); why == "" {
			w.fail(invBatchReport, "close %s: the difference %s of %s (terminal %+v, service %+v) is none the world made", b.ID, d.Kind, d.Ref, d.Terminal, d.Service)
		} else {
			w.note("close %s: %s of %s: %s", b.ID, d.Kind, d.Ref, why)
		}
	}
}

// changedSince: ref has a timeline entry at or after at (a change the
// comparison made at that time could not see).
func (w *world) changedSince(ctx context.Context, ref string, at time.Time) bool {
	tl, err := w.db.TransactionEvents(ctx, ref)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(tl, func(e instore.TransactionEvent) bool { return !e.At.Before(at) })
}

// expectedDifference says why a difference is one the world makes, or ""
// when it is not (docs/testing.md lists them):
//   - MISSING_IN_SERVICE of a sale the terminal made up (batch-extra);
//   - STATUS of a transaction the service ended itself (ACK_TIMEOUT,
//     DEADLINE) before the terminal's outcome came, which it kept beside
//     its own status (LATE_RESULT) or reversed (LATE_APPROVAL);
//   - STATUS of a sale the terminal listed APPROVED, which the service
//     reversed (auto-reversal, late approval, refused tip) and whose
//     reversal reached the terminal after it had answered the close;
//   - MISSING_ON_TERMINAL of a transaction the terminal listed in another
//     batch: a close answered late (the two windows overlap), or one whose
//     outcome reached the service only after that batch's window ended
//     (docs/decisions.md, "Day close");
//   - MISSING_IN_SERVICE of a transaction of that terminal the service
//     knows but places in another window: the terminal's outcome reached
//     it after this close's point (a result resent after a reconnect, a
//     late approval), so the service ended it later than the terminal;
//   - after a relink (relink.go), MISSING_ON_TERMINAL of a transaction
//     made on the terminal ID's device before, or listed by its device in
//     its answer to a close of the terminal ID it was linked to then, and
//     MISSING_IN_SERVICE of one the answering device made for the terminal
//     ID it was linked to before: a device's batch is the device's, not
//     the terminal ID's.
func (w *world) expectedDifference(b *instore.Batch, d instore.BatchDifference, t *instore.Transaction) string {
	switch {
	case d.Kind == instore.MissingInService && w.closes.extras[d.Ref]:
		return "a sale the terminal added (batch-extra)"
	case d.Kind == instore.MissingInService && w.otherWindow(b, d.Ref):
		return "the service learned its outcome after the close's point: it is in another window"
	case d.Kind == instore.DifferenceStatus && t != nil && (w.hasEntry(t.ID, instore.EventLateResult) || w.hasEntry(t.ID, instore.EventLateApproval)):
		return "the service ended it before the terminal's outcome came"
	case d.Kind == instore.DifferenceStatus && d.Terminal.StatusID == instore.StatusApproved && d.Service.StatusID == instore.StatusReversed &&
		w.closes.reversedAfter[d.Ref]:
		return "its reversal reached the terminal after the close"
	case d.Kind == instore.MissingOnTerminal && w.listedElsewhere(b, d.Ref, true):
		return "the terminal listed it in another batch (answered late, or before the service learned its outcome)"
	case d.Kind == instore.MissingOnTerminal && w.listedElsewhere(b, d.Ref, false):
		return "its device listed it in its answer to a close of another terminal ID, which it was linked to then"
	case d.Kind == instore.MissingOnTerminal && t != nil && t.SerialNumber != b.SerialNumber:
		return "made on " + t.SerialNumber + ", the terminal ID's device before it was relinked to " + b.SerialNumber
	case d.Kind == instore.MissingInService && w.madeForAnother(b, d.Ref):
		return "made by " + b.SerialNumber + " for the terminal ID it was linked to before"
	}
	return ""
}

// madeForAnother: ref is a transaction the device that answered b made
// for another terminal ID than b's (it was linked to that one then:
// relink.go); its batch lists what it ended since its last close,
// whichever terminal ID it was for.
func (w *world) madeForAnother(b *instore.Batch, ref string) bool {
	t, err := w.db.Transaction(context.Background(), ref)
	return err == nil && t.TerminalID != b.TerminalID && t.SerialNumber == b.SerialNumber
}

// hasEntry: the timeline of ref has an entry of kind.
func (w *world) hasEntry(ref string, kind instore.TimelineKind) bool {
	tl, _ := w.db.TransactionEvents(context.Background(), ref)
	return slices.ContainsFunc(tl, func(e instore.TransactionEvent) bool { return e.Kind == kind })
}

// otherWindow: ref is a transaction of b's terminal ID the service knows,
// outside b's window as the service counts it (instore.InBatch).
func (w *world) otherWindow(b *instore.Batch, ref string) bool {
	t, err := w.db.Transaction(context.Background(), ref)
	return err == nil && t.TerminalID == b.TerminalID && !instore.InBatch(t, b.OpenedAt, b.ClosedAt)
}

// listedElsewhere: ref is in another CLOSED batch of b's terminal ID
// (same), or of another terminal ID (!same: one its device answered while
// it was linked there, relink.go).
func (w *world) listedElsewhere(b *instore.Batch, ref string, same bool) bool {
	for _, id := range sortedKeys(w.closes.seen) {
		o := w.closes.seen[id].first
		if o == nil || id == b.ID || (o.TerminalID == b.TerminalID) != same {
			continue
		}
		if slices.ContainsFunc(o.TerminalItems, func(it instore.BatchItem) bool { return it.Ref == ref }) {
			return true
		}
	}
	return false
}

func unionKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

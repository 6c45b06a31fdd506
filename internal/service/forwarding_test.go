package service_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// TestForwardedKeepsConfirmDeadline: a terminal's forwarded report on an
// offline approval still awaiting the ECR's confirmation changes the sale
// (its forwarding) but not its confirmation window: the window's timer
// stays armed and reverses the sale when it ends, not the next sweep
// (found by the deterministic simulation).
func TestForwardedKeepsConfirmDeadline(t *testing.T) {
	synctest.Test(t, testForwardedKeepsConfirmDeadline)
}

func testForwardedKeepsConfirmDeadline(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	tx := &instore.Transaction{ID: f.svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
		Progress: instore.ProgressSent, CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
		ConfirmWithin: 30 * time.Second, ConfirmState: instore.ConfirmPending}
	if err := f.st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.TerminalResult(ctx, "S-1", instore.TerminalResult{MessageID: "m-1", Ref: tx.ID,
		StatusID: instore.StatusApproved, Result: instore.Result{Offline: true}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the bubble's clock: the network comes back within the window
	if err := f.svc.TerminalForwarded(ctx, "S-1", instore.ForwardReport{MessageID: "m-2", Ref: tx.ID, ForwardedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	time.Sleep(20 * time.Second) // the window ends; no sweep runs in this test
	synctest.Wait()
	got, err := f.st.Transaction(ctx, tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Forwarding == nil || got.Forwarding.State != instore.ForwardForwarded {
		t.Fatalf("forwarding %+v, want FORWARDED", got.Forwarding)
	}
	if got.StatusID != instore.StatusReversed || got.ConfirmState != instore.ConfirmAutoReversed {
		t.Errorf("at the end of its window: status %d, confirmation %s; want REVERSED, AUTO_REVERSED", got.StatusID, got.ConfirmState)
	}
}

// TestForwardedAfterResultElsewhere: a forwarded report is applied to the
// stored transaction, not to the state this node last knew: when another
// node applied the offline result, this one's copy is still PENDING,
// without a forwarding, and the report must not be confirmed and lost
// (found by the deterministic simulation).
func TestForwardedAfterResultElsewhere(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	tx := pendingFixture(t, f, time.Now())
	if err := f.svc.TerminalAcknowledged(ctx, "S-1", tx.ID); err != nil { // this node knows it PENDING
		t.Fatal(err)
	}
	other := &service.Service{Store: f.st, Metadata: f.svc.Metadata, Gateway: instore.NoGateway{}, NewRef: f.svc.NewRef}
	t.Cleanup(other.Close)
	if err := other.TerminalResult(ctx, "S-1", instore.TerminalResult{MessageID: "m-1", Ref: tx.ID,
		StatusID: instore.StatusApproved, Result: instore.Result{Offline: true}}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.TerminalForwarded(ctx, "S-1", instore.ForwardReport{MessageID: "m-2", Ref: tx.ID, Declined: true, ForwardedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got, err := f.st.Transaction(ctx, tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Forwarding == nil || got.Forwarding.State != instore.ForwardDeclined {
		t.Errorf("forwarding %+v after the report, want DECLINED", got.Forwarding)
	}
}

package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/gateway"
	"github.com/instore-dev/instore/internal/ids"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// fixture is a Service on SQLite with one merchant and one terminal ID
// linked to a device with the serial number serial.
type fixture struct {
	st       *sqlstore.DB
	svc      *service.Service
	merchant string
	terminal string
}

// wantTechnicalError fails t unless the stored transaction ref ended
// TECHNICAL_ERROR with the error code; when names the moment checked.
func (f *fixture) wantTechnicalError(t *testing.T, ref, code, when string) {
	t.Helper()
	tx, err := f.st.Transaction(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := f.svc.Metadata.ErrorCode(code)
	if tx.StatusID != instore.StatusTechnicalError || tx.ErrorID == nil || *tx.ErrorID != c.ID {
		t.Errorf("%s: status %d, error %v; want TECHNICAL_ERROR with %s", when, tx.StatusID, tx.ErrorID, code)
	}
}

func newFixture(tb testing.TB, synchronous, serial string) *fixture {
	tb.Helper()
	ctx := context.Background()
	st := apitest.SQLite(tb, synchronous)
	ad := admin.New(st)
	cus, _ := ad.CreateCustomer(ctx, "c")
	mer, _ := ad.CreateMerchant(ctx, cus.ID, "m", true)
	if _, _, err := ad.CreateDevice(ctx, serial, instore.ModelCountertop, cus.ID); err != nil {
		tb.Fatal(err)
	}
	ts, err := ad.AllocateTerminals(ctx, mer.ID, 1)
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := st.LinkTerminal(ctx, ts[0].TerminalID, serial, time.Now()); err != nil {
		tb.Fatal(err)
	}
	meta := instore.DefaultMetadata()
	svc := &service.Service{Store: st, Metadata: &meta, Gateway: instore.NoGateway{}, NewRef: func() string { return ids.New("txn") }}
	svc.Gateway = gateway.New(gateway.Config{Events: svc})
	tb.Cleanup(svc.Close)
	return &fixture{st: st, svc: svc, merchant: mer.ID, terminal: ts[0].TerminalID}
}

// TestTerminalEventAfterOutsideChange: the service starts a terminal's
// report from the state it last committed itself instead of reading the
// store; a change made meanwhile by another writer makes the
// compare-and-set fail, and the report is applied to the stored state.
func TestTerminalEventAfterOutsideChange(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "FULL", "S-1")
	st, svc := f.st, f.svc
	tx := &instore.Transaction{ID: svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
		Progress: instore.ProgressSent, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
		t.Fatal(err)
	}
	if err := svc.TerminalAcknowledged(ctx, "S-1", tx.ID); err != nil { // the service now knows version 2
		t.Fatal(err)
	}
	// Another writer asks for a cancel: version 3, which the service has not seen.
	stored, err := st.Transaction(ctx, tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored.CancelRequested = true
	if err := st.Commit(ctx, &instore.Change{T: stored, From: stored.Version}); err != nil {
		t.Fatal(err)
	}
	if err := svc.TerminalProgress(ctx, "S-1", tx.ID, instore.ProgressWaitingForCard); err != nil {
		t.Fatal(err)
	}
	if err := svc.TerminalResult(ctx, "S-1", instore.TerminalResult{MessageID: "m-1", Ref: tx.ID, StatusID: instore.StatusAbortedByCashier}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Transaction(ctx, tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	// WP37 comes from the cancel request only the store had.
	if got.StatusID != instore.StatusAbortedByCashier || !got.CancelRequested || got.ErrorID == nil || *got.ErrorID != 37 || got.Version != 5 {
		t.Errorf("after the outside change: status %d, cancelRequested %v, errorId %v, version %d; want 2, true, 37, 5",
			got.StatusID, got.CancelRequested, got.ErrorID, got.Version)
	}
}

// TestRunningRefusesLatePut: a state committed before the final one but
// recorded after it (a timer's change racing a terminal's) never makes a
// finished transaction look running again.
func TestRunningRefusesLatePut(t *testing.T) {
	r := service.NewRunningForTest()
	pending := &instore.Transaction{ID: "txn_1", StatusID: instore.StatusPending, Version: 4}
	final := &instore.Transaction{ID: "txn_1", StatusID: instore.StatusApproved, Version: 5}
	r.Put(final)
	r.Put(pending)
	if got := r.Get("txn_1"); got != nil {
		t.Errorf("after the final state and a late older one, get = version %d status %d; want nil (read the store)", got.Version, got.StatusID)
	}
	r.Put(&instore.Transaction{ID: "txn_2", StatusID: instore.StatusPending, Version: 1})
	if got := r.Get("txn_2"); got == nil || got.Version != 1 {
		t.Errorf("a running transaction: get = %+v", got)
	}
}

// TestTransactionEndWithoutWaitingUpdate: the end of a transaction looks
// for an update to deliver only when this node saw one waiting for it
// (TestUpdateWaitsForTransactionAndOfflineTerminal in internal/server has
// the other case); otherwise the end costs no read of the store.
func TestTransactionEndWithoutWaitingUpdate(t *testing.T) {
	synctest.Test(t, testTransactionEndWithoutWaitingUpdate)
}

func testTransactionEndWithoutWaitingUpdate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	cs := &apitest.CountingStore{Store: f.st}
	f.svc.Store = cs
	tx := &instore.Transaction{ID: f.svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
		Progress: instore.ProgressSent, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := f.st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.TerminalAcknowledged(ctx, "S-1", tx.ID); err != nil {
		t.Fatal(err)
	}
	res := instore.TerminalResult{MessageID: "m-1", Ref: tx.ID, StatusID: instore.StatusAbortedByCardholder,
		Result: instore.Result{Receipt: instore.Receipt{Customer: []string{}, Merchant: []string{}}}}
	if err := f.svc.TerminalResult(ctx, "S-1", res); err != nil {
		t.Fatal(err)
	}
	if got, err := f.st.Transaction(ctx, tx.ID); err != nil || !got.Final() {
		t.Fatalf("transaction = %+v, %v; want final", got, err)
	}
	// A delivery would run on a goroutine of its own, at once: wait
	// until every goroutine of the test is done or blocked.
	synctest.Wait()
	if n := cs.OpenUpdateReads.Load(); n != 0 {
		t.Fatalf("the transaction's end read the open update %d times, want none", n)
	}
}

// lostSession is a gateway whose device looks online but whose session is
// gone by the time a command is sent.
type lostSession struct{ instore.Gateway }

func (lostSession) Online(string) bool { return true }
func (lostSession) Ready(string) bool  { return true }
func (lostSession) SendPayment(context.Context, string, *instore.Transaction) error {
	return instore.ErrOffline
}

// TestSendFailureOwesCancel: a purchase whose command could not be sent
// answers WP23 naming its transaction, which ends TECHNICAL_ERROR with
// WP23, and the terminal is owed a cancel ACK_TIMEOUT in case the frame
// reached it all the same.
func TestSendFailureOwesCancel(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	f.svc.Gateway = lostSession{f.svc.Gateway}
	p := &instore.Principal{MerchantID: f.merchant}
	amount := int64(100)
	_, err := f.svc.Purchase(ctx, p, &instore.PurchaseRequest{TerminalID: f.terminal, Amount: &amount, Currency: "SEK"}, nil)
	var e *instore.Error
	if !errors.As(err, &e) || e.Code != instore.WP23 || e.OnlineAPIRefID == "" {
		t.Fatalf("Purchase with a lost session = %v, want WP23 naming the transaction", err)
	}
	f.wantTechnicalError(t, e.OnlineAPIRefID, instore.WP23, "the transaction")
	owed, err := f.st.OpenEffects(ctx, "S-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(owed) != 1 || owed[0].Kind != instore.EffectCancel || owed[0].Ref != e.OnlineAPIRefID || owed[0].Reason != instore.CancelAckTimeout {
		t.Errorf("owed after a lost send = %+v, want one cancel ACK_TIMEOUT of %s", owed, e.OnlineAPIRefID)
	}
}

// failExpiryOnce fails the first write of an expiry, as a store blip would.
type failExpiryOnce struct {
	instore.Store
	failed atomic.Bool
}

func (s *failExpiryOnce) Commit(ctx context.Context, ch *instore.Change) error {
	if len(ch.Effects) > 0 && s.failed.CompareAndSwap(false, true) {
		return context.DeadlineExceeded
	}
	return s.Store.Commit(ctx, ch)
}

// pendingFixture stores a PENDING purchase on f's terminal created at
// created.
func pendingFixture(t *testing.T, f *fixture, created time.Time) *instore.Transaction {
	t.Helper()
	tx := &instore.Transaction{ID: f.svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
		Progress: instore.ProgressSent, CreatedAt: created.UTC().Truncate(time.Microsecond)}
	if err := f.st.CreateTransaction(context.Background(), &instore.Change{T: tx}); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestSweepEndsOverdueTransactions: an expiry whose write failed is not
// lost: the sweep ends the transaction, WP25 with its cancel owed.
func TestSweepEndsOverdueTransactions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	f.svc.Store = &failExpiryOnce{Store: f.st}
	tx := pendingFixture(t, f, time.Now().Add(-time.Hour))
	f.svc.Sweep(ctx) // the expiry's write fails
	if got, _ := f.st.Transaction(ctx, tx.ID); got.StatusID != instore.StatusPending {
		t.Fatalf("after a failed expiry: status %d, want still PENDING (the blip)", got.StatusID)
	}
	f.svc.Sweep(ctx)
	f.wantTechnicalError(t, tx.ID, instore.WP25, "after the next sweep")
	if owed, _ := f.st.OpenEffects(ctx, "S-1"); len(owed) != 1 || owed[0].Reason != instore.CancelAckTimeout {
		t.Errorf("owed after the sweep's expiry = %+v, want one cancel ACK_TIMEOUT", owed)
	}
}

// ackDuringRecover acknowledges a transaction between Recover's read of
// the PENDING transactions and its arming of their timers.
type ackDuringRecover struct {
	instore.Store
	hook func()
}

func (s *ackDuringRecover) PendingTransactions(ctx context.Context) ([]*instore.Transaction, error) {
	ts, err := s.Store.PendingTransactions(ctx)
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return ts, err
}

// TestAckTimerOfAcknowledgedArmsDeadline: an ack timer that finds its
// transaction acknowledged (the ack came in while Recover armed it) arms
// the deadline instead of doing nothing, so the transaction still ends.
func TestAckTimerOfAcknowledgedArmsDeadline(t *testing.T) {
	synctest.Test(t, testAckTimerOfAcknowledgedArmsDeadline)
}

func testAckTimerOfAcknowledgedArmsDeadline(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	f.svc.AckTimeout, f.svc.Deadline = time.Second, 50*time.Millisecond
	tx := pendingFixture(t, f, time.Now().Add(-time.Hour)) // its ack time passed: the ack timer fires at once
	f.svc.Store = &ackDuringRecover{Store: f.st, hook: func() {
		if err := f.svc.TerminalAcknowledged(ctx, "S-1", tx.ID); err != nil {
			t.Error(err)
		}
	}}
	if err := f.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	// The deadline timer ends it, or nothing ever will: the bubble's
	// clock passes the deadline once everything else is blocked.
	synctest.Wait()
	time.Sleep(f.svc.Deadline) // the bubble's clock, not a wait in real time
	synctest.Wait()
	got, err := f.st.Transaction(ctx, tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Final() {
		t.Fatalf("an acknowledged transaction whose ack timer fired never ended")
	}
	wp36, _ := f.svc.Metadata.ErrorCode(instore.WP36)
	if got.ErrorID == nil || *got.ErrorID != wp36.ID {
		t.Errorf("ended with error %v, want WP36 (its deadline)", got.ErrorID)
	}
}

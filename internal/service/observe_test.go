package service_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/metrics"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testmetrics"
)

// sample returns the metric name in reg whose labels include want, or nil.
func sample(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if m := testmetrics.Find(mf, want); m != nil {
			return m
		}
	}
	return nil
}

// counter is the value of the counter name{want} in reg (0: none).
func counter(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	return sample(t, reg, name, want).GetCounter().GetValue()
}

// histogramCount is the number of observations of the histogram
// name{type=typ} in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, typ instore.TransactionType) uint64 {
	t.Helper()
	return sample(t, reg, name, map[string]string{"type": string(typ)}).GetHistogram().GetSampleCount()
}

// TestTransactionEndedOnce: every path that ends a transaction reports it
// once, with one "transaction ended" log line that holds the terminal's and
// the merchant's fingerprints, never their ids; a resent result and a late
// approval turned REVERSED do not end it again.
func TestTransactionEndedOnce(t *testing.T) { synctest.Test(t, testTransactionEndedOnce) }

func testTransactionEndedOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "NORMAL", "S-1")
	reg := prometheus.NewRegistry()
	m := metrics.NewTransactions(reg)
	logs := &testlog.Buffer{}
	key := []byte("0123456789abcdef0123456789abcdef")
	f.svc.Observer = m
	f.svc.Logger = logging.New(logs, logging.Options{Format: logging.FormatJSON, FingerprintKey: key})
	ended := func(typ instore.TransactionType, status, code string) float64 {
		return counter(t, reg, "instore_transactions_ended_total", map[string]string{"type": string(typ), "status": status, "code": code})
	}
	newTx := func(created time.Time) *instore.Transaction {
		tx := &instore.Transaction{ID: f.svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
			Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
			Progress: instore.ProgressSent, CreatedAt: created.UTC().Truncate(time.Microsecond)}
		if err := f.st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	approved := func(id, ref string) instore.TerminalResult {
		return instore.TerminalResult{MessageID: id, Ref: ref, StatusID: instore.StatusApproved,
			Result: instore.Result{Receipt: instore.Receipt{Customer: []string{}, Merchant: []string{}}}}
	}

	// The terminal's result; then the same result resent.
	tx1 := newTx(time.Now())
	if err := f.svc.TerminalAcknowledged(ctx, "S-1", tx1.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.svc.TerminalResult(ctx, "S-1", approved("m-1", tx1.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if got := ended(instore.TypePurchase, "APPROVED", metrics.NoCode); got != 1 {
		t.Errorf("ended{PURCHASE,APPROVED,none} = %v after a result and its resend, want 1", got)
	}

	// The ack time-out, run by the timer Recover arms for a transaction
	// whose ack time has passed; then the terminal's late approval.
	tx2 := newTx(time.Now().Add(-time.Hour))
	if err := f.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // the timer runs at once, on a goroutine of its own
	if ended(instore.TypePurchase, "TECHNICAL_ERROR", instore.WP25) != 1 {
		t.Fatalf("the ack time-out of %s was not reported", tx2.ID)
	}
	if err := f.svc.TerminalResult(ctx, "S-1", approved("m-2", tx2.ID)); err != nil {
		t.Fatal(err)
	}
	if got, err := f.st.Transaction(ctx, tx2.ID); err != nil || got.StatusID != instore.StatusReversed {
		t.Fatalf("late approval: transaction = %+v, %v; want REVERSED", got, err)
	}
	if got := counter(t, reg, "instore_late_approvals_reversed_total", map[string]string{"type": string(instore.TypePurchase)}); got != 1 {
		t.Errorf("late_approvals_reversed_total{PURCHASE} = %v, want 1", got)
	}
	if got := ended(instore.TypePurchase, "TECHNICAL_ERROR", instore.WP25); got != 1 {
		t.Errorf("ended{PURCHASE,TECHNICAL_ERROR,WP25} = %v after the late approval, want still 1", got)
	}
	if got := ended(instore.TypePurchase, "REVERSED", instore.WP25); got != 0 {
		t.Errorf("ended{PURCHASE,REVERSED,WP25} = %v, want 0: a transaction ends once", got)
	}
	// tx1 was acknowledged, tx2 never was; both ended.
	if got := histogramCount(t, reg, "instore_transaction_ack_seconds", instore.TypePurchase); got != 1 {
		t.Errorf("ack observations = %d, want 1", got)
	}
	if got := histogramCount(t, reg, "instore_transaction_result_seconds", instore.TypePurchase); got != 2 {
		t.Errorf("result observations = %d, want 2", got)
	}

	out := logs.String()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"msg":"transaction ended"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d transaction ended lines, want 2:\n%s", len(lines), out)
	}
	for i, want := range []string{`"ref":"` + tx1.ID + `","type":"PURCHASE","status":"APPROVED","errorCode":""`,
		`"ref":"` + tx2.ID + `","type":"PURCHASE","status":"TECHNICAL_ERROR","errorCode":"WP25"`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"durationMs":`) {
			t.Errorf("line %d = %s, want %s and durationMs", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], `"ackMs":`) || strings.Contains(lines[1], `"ackMs":`) {
		t.Errorf("ackMs: want it on the acknowledged transaction's line only:\n%s\n%s", lines[0], lines[1])
	}
	for _, l := range lines {
		if !strings.Contains(l, `"terminalId":"`+logging.Fingerprint(key, f.terminal)+`"`) ||
			!strings.Contains(l, `"merchantId":"`+logging.Fingerprint(key, f.merchant)+`"`) {
			t.Errorf("line without the terminal's and merchant's fingerprints: %s", l)
		}
	}
	for _, id := range []string{f.terminal, f.merchant} {
		if strings.Contains(out, id) {
			t.Errorf("logs contain the identifier %s in clear:\n%s", id, out)
		}
	}
}

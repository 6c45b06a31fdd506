package instore_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

func item(ref string, typ instore.TransactionType, st instore.TransactionStatus, amount int64, cur string) instore.BatchItem {
	return instore.BatchItem{Ref: ref, Type: typ, StatusID: st, Amount: amount, Currency: cur}
}

func TestCompareBatch(t *testing.T) {
	p1 := item("txn_1", instore.TypePurchase, instore.StatusApproved, 1000, "SEK")
	p2 := item("txn_2", instore.TypePurchase, instore.StatusApproved, 2500, "SEK")
	r1 := item("txn_3", instore.TypeRefund, instore.StatusApproved, 300, "SEK")
	eur := item("txn_4", instore.TypePurchase, instore.StatusApproved, 700, "EUR")
	declined := item("txn_5", instore.TypePurchase, instore.StatusTransactionDeclined, 1100, "SEK")
	own := item("T-0001", instore.TypePurchase, instore.StatusApproved, 1000, "SEK")
	with := func(it instore.BatchItem, f func(*instore.BatchItem)) instore.BatchItem { f(&it); return it }
	p1Reversed := with(p1, func(i *instore.BatchItem) { i.StatusID = instore.StatusReversed })
	p1More := with(p1, func(i *instore.BatchItem) { i.Amount = 1150 })
	p1EUR := with(p1, func(i *instore.BatchItem) { i.Currency = "EUR" })
	p1Refund := with(p1, func(i *instore.BatchItem) { i.Type = instore.TypeRefund })
	p1Both := with(p1, func(i *instore.BatchItem) { i.StatusID, i.Amount = instore.StatusReversed, 5 })

	tests := []struct {
		name              string
		terminal, service []instore.BatchItem
		wantDiffs         []instore.BatchDifference
	}{
		{name: "both empty", wantDiffs: []instore.BatchDifference{}},
		{name: "equal, other order", terminal: []instore.BatchItem{p2, p1, r1, declined, eur}, service: []instore.BatchItem{p1, p2, declined, eur, r1},
			wantDiffs: []instore.BatchDifference{}},
		{name: "missing in service", terminal: []instore.BatchItem{p1, own}, service: []instore.BatchItem{p1},
			wantDiffs: []instore.BatchDifference{{Kind: instore.MissingInService, Ref: "T-0001", Terminal: &own}}},
		{name: "missing on terminal", terminal: []instore.BatchItem{p1}, service: []instore.BatchItem{p1, p2},
			wantDiffs: []instore.BatchDifference{{Kind: instore.MissingOnTerminal, Ref: "txn_2", Service: &p2}}},
		{name: "status", terminal: []instore.BatchItem{p1}, service: []instore.BatchItem{p1Reversed},
			wantDiffs: []instore.BatchDifference{{Kind: instore.DifferenceStatus, Ref: "txn_1", Terminal: &p1, Service: &p1Reversed}}},
		{name: "type is a status difference", terminal: []instore.BatchItem{p1Refund}, service: []instore.BatchItem{p1},
			wantDiffs: []instore.BatchDifference{{Kind: instore.DifferenceStatus, Ref: "txn_1", Terminal: &p1Refund, Service: &p1}}},
		{name: "amount", terminal: []instore.BatchItem{p1More}, service: []instore.BatchItem{p1},
			wantDiffs: []instore.BatchDifference{{Kind: instore.DifferenceAmount, Ref: "txn_1", Terminal: &p1More, Service: &p1}}},
		{name: "currency is an amount difference", terminal: []instore.BatchItem{p1}, service: []instore.BatchItem{p1EUR},
			wantDiffs: []instore.BatchDifference{{Kind: instore.DifferenceAmount, Ref: "txn_1", Terminal: &p1, Service: &p1EUR}}},
		{name: "status before amount, once", terminal: []instore.BatchItem{p1Both}, service: []instore.BatchItem{p1},
			wantDiffs: []instore.BatchDifference{{Kind: instore.DifferenceStatus, Ref: "txn_1", Terminal: &p1Both, Service: &p1}}},
		{name: "several, by reference", terminal: []instore.BatchItem{own, p2, p1More}, service: []instore.BatchItem{r1, p1, p2},
			wantDiffs: []instore.BatchDifference{
				{Kind: instore.MissingInService, Ref: "T-0001", Terminal: &own},
				{Kind: instore.DifferenceAmount, Ref: "txn_1", Terminal: &p1More, Service: &p1},
				{Kind: instore.MissingOnTerminal, Ref: "txn_3", Service: &r1},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := instore.CompareBatch(tt.terminal, tt.service)
			if diff := cmp.Diff(tt.wantDiffs, got.Differences); diff != "" {
				t.Errorf("CompareBatch differences (-want +got):\n%s", diff)
			}
			if want := len(tt.wantDiffs) == 0; got.Matched != want {
				t.Errorf("CompareBatch matched = %v, want %v", got.Matched, want)
			}
			if diff := cmp.Diff(instore.BatchTotals(tt.terminal), got.TerminalTotals); diff != "" {
				t.Errorf("terminal totals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(instore.BatchTotals(tt.service), got.ServiceTotals); diff != "" {
				t.Errorf("service totals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBatchTotals(t *testing.T) {
	items := []instore.BatchItem{
		item("a", instore.TypePurchase, instore.StatusApproved, 1000, "SEK"),
		item("b", instore.TypePurchase, instore.StatusApproved, 250, "SEK"),
		item("c", instore.TypeRefund, instore.StatusApproved, 300, "SEK"),
		item("d", instore.TypePurchase, instore.StatusApproved, 700, "EUR"),
		item("e", instore.TypePurchase, instore.StatusTransactionDeclined, 999, "SEK"),
		item("f", instore.TypePurchase, instore.StatusReversed, 888, "SEK"),
	}
	want := []instore.BatchTotal{
		{Currency: "EUR", Type: instore.TypePurchase, Count: 1, Amount: 700},
		{Currency: "SEK", Type: instore.TypePurchase, Count: 2, Amount: 1250},
		{Currency: "SEK", Type: instore.TypeRefund, Count: 1, Amount: 300},
	}
	if diff := cmp.Diff(want, instore.BatchTotals(items)); diff != "" {
		t.Errorf("BatchTotals (-want +got):\n%s", diff)
	}
	if got := instore.BatchTotals(nil); got == nil || len(got) != 0 {
		t.Errorf("BatchTotals(nil) = %#v, want an empty list", got)
	}
}

func TestInBatch(t *testing.T) {
	from := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Hour)
	at := func(d time.Duration) *time.Time { v := from.Add(d); return &v }
	ack := at(time.Minute)
	tests := []struct {
		name string
		t    instore.Transaction
		want bool
	}{
		{"approved in the window", instore.Transaction{StatusID: instore.StatusApproved, AcknowledgedAt: ack, ResultMessageID: "m1", CompletedAt: at(time.Hour)}, true},
		{"at the window's end", instore.Transaction{StatusID: instore.StatusApproved, AcknowledgedAt: ack, CompletedAt: at(10 * time.Hour)}, true},
		{"at the window's start", instore.Transaction{StatusID: instore.StatusApproved, AcknowledgedAt: ack, CompletedAt: at(0)}, false},
		{"after the window", instore.Transaction{StatusID: instore.StatusApproved, AcknowledgedAt: ack, CompletedAt: at(11 * time.Hour)}, false},
		{"pending", instore.Transaction{StatusID: instore.StatusPending, AcknowledgedAt: ack}, false},
		{"deadline passed, acknowledged", instore.Transaction{StatusID: instore.StatusTechnicalError, AcknowledgedAt: ack, CompletedAt: at(time.Hour)}, true},
		{"never acknowledged, no result (WP25, WP23)", instore.Transaction{StatusID: instore.StatusTechnicalError, CompletedAt: at(time.Hour)}, false},
		{"busy at once, result without ack", instore.Transaction{StatusID: instore.StatusTerminalIsBusy, ResultMessageID: "m2", CompletedAt: at(time.Hour)}, true},
	}
	for _, tt := range tests {
		if got := instore.InBatch(&tt.t, from, to); got != tt.want {
			t.Errorf("InBatch(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

var booksTests = []test{
	{"Totals", testTotals},
	{"BookEntries", testBookEntries},
}

// seedBooks is seedListing with, on top, purchases in EUR with tips and
// plain refunds in SEK, so that the groups differ in currency and type
// and the sums count tips.
func seedBooks(t *testing.T, s instore.Store) *listFixture {
	t.Helper()
	f := seedListing(t, s)
	for i := range 8 {
		tx := newTransaction(fmt.Sprintf("txn_books_%d", i), "mer_1", f.terminals[i%3], "", instore.StatusApproved, at(i*3).Add(time.Second))
		if i%2 == 0 {
			tx.Currency, tx.Amount, tx.TipAmount = "EUR", int64(1000*(i+1)), int64(10*i)
		} else {
			tx.Type, tx.Amount = instore.TypeRefund, int64(300+i)
		}
		f.txs = append(f.txs, mustCreateTransaction(t, s, tx))
	}
	return f
}

// wantTotals sums txs as Totals must: those of f's window (and terminal),
// by currency, type and status, in that order.
func wantTotals(txs []*instore.Transaction, f instore.TotalsFilter) []instore.Total {
	byKey := map[instore.Total]*instore.Total{}
	var out []instore.Total
	for _, tx := range selected(txs, f) {
		k := instore.Total{Currency: tx.Currency, Type: tx.Type, StatusID: tx.StatusID}
		if byKey[k] == nil {
			byKey[k] = &instore.Total{Currency: tx.Currency, Type: tx.Type, StatusID: tx.StatusID}
		}
		byKey[k].Count++
		byKey[k].Amount += tx.TotalAmount()
	}
	for _, v := range byKey {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b instore.Total) int {
		return cmp.Or(cmp.Compare(a.Currency, b.Currency), cmp.Compare(a.Type, b.Type), cmp.Compare(a.StatusID, b.StatusID))
	})
	return out
}

// selected is the transactions of txs that f selects, oldest first
// (created, then id).
func selected(txs []*instore.Transaction, f instore.TotalsFilter) []*instore.Transaction {
	var out []*instore.Transaction
	for _, tx := range txs {
		if tx.MerchantID == f.MerchantID && !tx.CreatedAt.Before(f.From) && tx.CreatedAt.Before(f.To) &&
			(f.TerminalID == "" || tx.TerminalID == f.TerminalID) {
			out = append(out, tx)
		}
	}
	slices.SortFunc(out, byCreated)
	return out
}

// byCreated orders transactions oldest first: created, then id (a
// listing's order, newest first, is its reverse).
func byCreated(a, b *instore.Transaction) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// booksFilters are windows of seedBooks: everything, a part whose ends
// fall on creation times (from included, to excluded), one terminal, an
// empty window, another merchant's.
func booksFilters(f *listFixture) []instore.TotalsFilter {
	return []instore.TotalsFilter{
		{MerchantID: "mer_1", From: at(0), To: at(60)},
		{MerchantID: "mer_1", From: at(5), To: at(17)},
		{MerchantID: "mer_1", From: at(0), To: at(60), TerminalID: f.terminals[1]},
		{MerchantID: "mer_1", From: at(3), To: at(9), TerminalID: f.terminals[2]},
		{MerchantID: "mer_1", From: at(100), To: at(200)},
		{MerchantID: "mer_2", From: at(0), To: at(60)},
	}
}

func testTotals(t *testing.T, s instore.Store) {
	f := seedBooks(t, s)
	for _, flt := range booksFilters(f) {
		got, err := s.Totals(t.Context(), flt)
		if err != nil {
			t.Fatalf("Totals(%+v) = %v", flt, err)
		}
		if flt.MerchantID == "mer_2" {
			if len(got) == 0 {
				t.Errorf("Totals of mer_2 are empty; it has transactions")
			}
			continue
		}
		if d := diff(wantTotals(f.txs, flt), got); d != "" {
			t.Errorf("Totals(%s, [%v, %v)) (-want +got):\n%s", flt.TerminalID, flt.From, flt.To, d)
		}
	}
	// Every currency and type appears in the whole window, and a tip is
	// counted: the EUR purchases sum their amounts and tips.
	all, err := s.Totals(t.Context(), booksFilters(f)[0])
	if err != nil {
		t.Fatal(err)
	}
	var eur int64
	for _, g := range all {
		if g.Currency == "EUR" {
			eur += g.Amount
		}
	}
	if want := int64(1000 + 3000 + 5000 + 7000 + 0 + 20 + 40 + 60); eur != want {
		t.Errorf("EUR total %d, want %d (amounts and tips)", eur, want)
	}
}

func testBookEntries(t *testing.T, s instore.Store) {
	f := seedBooks(t, s)
	for _, flt := range booksFilters(f) {
		got, err := s.BookEntries(t.Context(), flt, 1000)
		if err != nil {
			t.Fatalf("BookEntries(%+v) = %v", flt, err)
		}
		if flt.MerchantID == "mer_2" {
			for _, e := range got {
				if e.TerminalID == f.terminals[0] || e.TerminalID == f.terminals[1] || e.TerminalID == f.terminals[2] {
					t.Errorf("mer_2's entries hold %s of mer_1", e.OnlineAPIRefID)
				}
			}
			continue
		}
		var want []instore.BookEntry
		for _, tx := range selected(f.txs, flt) {
			want = append(want, instore.BookEntry{OnlineAPIRefID: tx.ID, ECRReference: instore.NullString(tx.ECRReference), TerminalID: tx.TerminalID,
				Type: tx.Type, Amount: tx.TotalAmount(), Currency: tx.Currency, StatusID: tx.StatusID, CreatedAt: stored(tx.CreatedAt)})
		}
		if d := diff(want, got); d != "" {
			t.Errorf("BookEntries(%s, [%v, %v)) (-want +got):\n%s", flt.TerminalID, flt.From, flt.To, d)
		}
		if len(want) > 3 {
			few, err := s.BookEntries(t.Context(), flt, 3)
			if err != nil || len(few) != 3 || few[2].OnlineAPIRefID != want[2].OnlineAPIRefID {
				t.Errorf("BookEntries with limit 3 = %d entries, %v; want the first 3", len(few), err)
			}
		}
	}
}

package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// listFixture is what seedListing stored: mer_1's transactions (in creation
// order) and its terminal IDs.
type listFixture struct {
	terminals []string
	txs       []*instore.Transaction
}

// listStatuses are the statuses seedListing cycles through. PENDING is
// given to one transaction only (one per terminal ID).
var listStatuses = []instore.TransactionStatus{
	instore.StatusApproved, instore.StatusTransactionDeclined, instore.StatusAbortedByCardholder,
	instore.StatusApproved, instore.StatusTechnicalError,
}

// seedListing stores 50 transactions of mer_1 over three terminal IDs, five
// statuses (and one PENDING), two ECR references (and none) and 25
// creation times, two transactions per time, whose ids do not sort like
// their creation order; and 6 transactions of mer_2 at the same times,
// which no listing of mer_1 may show.
func seedListing(t *testing.T, s instore.Store) *listFixture {
	t.Helper()
	f := &listFixture{terminals: []string{seed(t, s), seedTerminal(t, s, "SN-2"), seedTerminal(t, s, "SN-3")}}
	serials := []string{"SN-1", "SN-2", "SN-3"}
	for i := range 50 {
		status := listStatuses[i%len(listStatuses)]
		if i == 25 {
			status = instore.StatusPending
		}
		// 37 is prime to 50: the ids are a permutation of 00..49.
		tx := newTransaction(fmt.Sprintf("txn_%02d", i*37%50), "mer_1", f.terminals[i%3], serials[i%3], status, at(i/2))
		if i%4 == 0 {
			tx.ECRReference = fmt.Sprintf("ECR-%d", i/4%2)
		}
		tx.Amount = int64(100 + i)
		f.txs = append(f.txs, mustCreateTransaction(t, s, tx))
	}
	mustCreateMerchant(t, s, "mer_2", "cus_1", at(0))
	other := mustAllocateTerminal(t, s, "cus_1", "mer_2", at(0)).TerminalID
	for i := range 6 {
		tx := newTransaction(fmt.Sprintf("txn_m2_%d", i), "mer_2", other, "", listStatuses[i%len(listStatuses)], at(i*4))
		tx.ECRReference = "ECR-0"
		mustCreateTransaction(t, s, tx)
	}
	return f
}

// listWant returns the stored transactions of txs that f selects, newest first,
// ignoring f.Limit and f.After.
func listWant(txs []*instore.Transaction, f instore.TransactionFilter) []*instore.Transaction {
	var out []*instore.Transaction
	for _, tx := range txs {
		c := stored(tx.CreatedAt)
		if tx.MerchantID != f.MerchantID || c.Before(stored(f.From)) || !c.Before(stored(f.To)) ||
			f.TerminalID != "" && tx.TerminalID != f.TerminalID ||
			f.StatusID != nil && tx.StatusID != *f.StatusID ||
			f.ECRReference != "" && tx.ECRReference != f.ECRReference {
			continue
		}
		out = append(out, asStored(tx))
	}
	slices.SortFunc(out, func(a, b *instore.Transaction) int { return byCreated(b, a) })
	return out
}

// cursorOf is the position after tx in a listing.
func cursorOf(tx *instore.Transaction) *instore.TransactionCursor {
	return &instore.TransactionCursor{CreatedAt: tx.CreatedAt, ID: tx.ID}
}

func mustList(t *testing.T, s instore.Store, f instore.TransactionFilter) []*instore.Transaction {
	t.Helper()
	got, err := s.ListTransactions(t.Context(), f)
	if err != nil {
		t.Fatalf("ListTransactions(%s) = %v", describeFilter(f), err)
	}
	return got
}

func describeFilter(f instore.TransactionFilter) string {
	s := fmt.Sprintf("merchant %s, [%s, %s), limit %d", f.MerchantID,
		f.From.UTC().Format(time.TimeOnly), f.To.UTC().Format(time.TimeOnly), f.Limit)
	if f.TerminalID != "" {
		s += ", terminal " + f.TerminalID
	}
	if f.StatusID != nil {
		s += fmt.Sprintf(", status %d", *f.StatusID)
	}
	if f.ECRReference != "" {
		s += ", ECR reference " + f.ECRReference
	}
	if f.After != nil {
		s += fmt.Sprintf(", after (%s, %s)", f.After.CreatedAt.UTC().Format(time.TimeOnly+".000000"), f.After.ID)
	}
	return s
}

// ids lists the ids of txs, for readable failures about order.
func ids(txs []*instore.Transaction) []string {
	out := make([]string, len(txs))
	for i, tx := range txs {
		out[i] = tx.ID
	}
	return out
}

// listFilters are the filters the listing tests check, on f's terminals:
// each filter alone and in every combination, over the whole time and over
// a part of it, plus filters nothing matches.
func listFilters(f *listFixture) []instore.TransactionFilter {
	everything := instore.TransactionFilter{MerchantID: "mer_1", From: at(-60), To: at(60)}
	var out []instore.TransactionFilter
	for _, r := range []struct{ from, to time.Time }{
		{at(-60), at(60)},
		// From is inclusive and To exclusive: at(5) is in, at(20) is out,
		// with two transactions at each.
		{at(5), at(20)},
	} {
		for _, terminal := range []string{"", f.terminals[1]} {
			for _, status := range []*instore.TransactionStatus{nil, ptr(instore.StatusApproved), ptr(instore.StatusPending)} {
				for _, ecr := range []string{"", "ECR-1"} {
					out = append(out, instore.TransactionFilter{
						MerchantID: "mer_1", From: r.from, To: r.to,
						TransactionSelection: instore.TransactionSelection{TerminalID: terminal, StatusID: status, ECRReference: ecr},
					})
				}
			}
		}
	}
	none := func(change func(*instore.TransactionFilter)) instore.TransactionFilter {
		f := everything
		change(&f)
		return f
	}
	return append(out,
		none(func(f *instore.TransactionFilter) { f.MerchantID = "mer_missing" }),
		none(func(f *instore.TransactionFilter) { f.TerminalID = "99999998" }),
		none(func(f *instore.TransactionFilter) { f.StatusID = ptr(instore.StatusWrongPIN) }),
		none(func(f *instore.TransactionFilter) { f.ECRReference = "ECR-MISSING" }),
		none(func(f *instore.TransactionFilter) { f.ECRReference = "ecr-1" }), // exact match
		none(func(f *instore.TransactionFilter) { f.From, f.To = at(100), at(200) }),
		none(func(f *instore.TransactionFilter) { f.From, f.To = at(5), at(5) }),
	)
}

var listingTests = []test{
	{"Filters", func(t *testing.T, s instore.Store) {
		f := seedListing(t, s)
		for _, filter := range listFilters(f) {
			want := listWant(f.txs, filter)
			filter.Limit = 1000
			got := mustList(t, s, filter)
			if d := diff(want, got); d != "" {
				t.Errorf("ListTransactions(%s) mismatch (-want +got):\n%s", describeFilter(filter), d)
			}
		}
		// The filters do select something: the checks above are not all
		// of empty lists.
		all := listWant(f.txs, instore.TransactionFilter{MerchantID: "mer_1", From: at(-60), To: at(60)})
		if len(all) != 50 {
			t.Fatalf("fixture: %d transactions of mer_1, want 50", len(all))
		}
		for _, filter := range []instore.TransactionFilter{
			{MerchantID: "mer_1", From: at(-60), To: at(60), TransactionSelection: instore.TransactionSelection{TerminalID: f.terminals[1], StatusID: ptr(instore.StatusApproved), ECRReference: "ECR-1"}},
			{MerchantID: "mer_1", From: at(5), To: at(20), TransactionSelection: instore.TransactionSelection{StatusID: ptr(instore.StatusPending)}},
		} {
			if len(listWant(f.txs, filter)) == 0 {
				t.Errorf("fixture: nothing matches %s", describeFilter(filter))
			}
		}
	}},
	{"Order", func(t *testing.T, s instore.Store) {
		f := seedListing(t, s)
		got := mustList(t, s, instore.TransactionFilter{MerchantID: "mer_1", From: at(-60), To: at(60), Limit: 1000})
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			if a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.ID <= b.ID {
				t.Errorf("ListTransactions() lists %s (%v) before %s (%v): want created_at, then id, descending",
					a.ID, a.CreatedAt, b.ID, b.CreatedAt)
			}
		}
		// Spelled out for the newest three times, two transactions each.
		want := []string{"txn_26", "txn_13", "txn_39", "txn_02", "txn_28", "txn_15"}
		if d := diff(want, ids(got[:6])); d != "" {
			t.Errorf("ListTransactions() newest six mismatch (-want +got):\n%s", d)
		}
		if len(got) != len(f.txs) {
			t.Errorf("ListTransactions() = %d transactions, want %d", len(got), len(f.txs))
		}
	}},
	{"Limit", func(t *testing.T, s instore.Store) {
		f := seedListing(t, s)
		for _, filter := range listFilters(f) {
			want := listWant(f.txs, filter)
			for _, limit := range []int{1, 3, len(want), len(want) + 1} {
				if limit < 1 {
					continue
				}
				filter.Limit = limit
				got := mustList(t, s, filter)
				w := want[:min(limit, len(want))]
				if d := diff(w, got); d != "" {
					t.Errorf("ListTransactions(%s) mismatch (-want +got):\n%s", describeFilter(filter), d)
				}
			}
		}
	}},
	{"Paging", func(t *testing.T, s instore.Store) {
		f := seedListing(t, s)
		for _, filter := range listFilters(f) {
			want := listWant(f.txs, filter)
			for _, limit := range []int{1, 4, 7} {
				filter.Limit, filter.After = limit, nil
				var all []*instore.Transaction
				for page := 0; ; page++ {
					if page > len(want) {
						t.Fatalf("ListTransactions(%s): paging does not end", describeFilter(filter))
					}
					got := mustList(t, s, filter)
					w := want[min(page*limit, len(want)):min((page+1)*limit, len(want))]
					if d := diff(w, got); d != "" {
						t.Errorf("ListTransactions(%s) page %d mismatch (-want +got):\n%s", describeFilter(filter), page, d)
					}
					all = append(all, got...)
					if len(got) < limit {
						break
					}
					filter.After = cursorOf(got[len(got)-1])
				}
				// Every transaction exactly once, in order.
				if d := diff(ids(want), ids(all)); d != "" {
					t.Errorf("ListTransactions(%s) pages together mismatch (-want +got):\n%s", describeFilter(filter), d)
				}
			}
		}

		// A cursor need not be a listed transaction: it is a position.
		filter := instore.TransactionFilter{MerchantID: "mer_1", From: at(-60), To: at(60), Limit: 1000}
		all := listWant(f.txs, filter)
		for _, c := range []instore.TransactionCursor{
			{CreatedAt: at(10), ID: "txn_zz"}, // after every id at at(10): both are listed
			{CreatedAt: at(10), ID: ""},       // before every id at at(10): neither is
			{CreatedAt: at(10).Add(30 * time.Second), ID: "txn_00"},
			{CreatedAt: at(100), ID: "txn_00"}, // after To: To bounds the page
			{CreatedAt: at(-100), ID: "txn_zz"},
		} {
			filter.After = &c
			var want []*instore.Transaction
			for _, tx := range all {
				if tx.CreatedAt.Before(stored(c.CreatedAt)) || tx.CreatedAt.Equal(stored(c.CreatedAt)) && tx.ID < c.ID {
					want = append(want, tx)
				}
			}
			if d := diff(ids(want), ids(mustList(t, s, filter))); d != "" {
				t.Errorf("ListTransactions(%s) mismatch (-want +got):\n%s", describeFilter(filter), d)
			}
		}
	}},
	{"StableUnderInserts", func(t *testing.T, s instore.Store) {
		f := seedListing(t, s)
		for _, filter := range []instore.TransactionFilter{
			{MerchantID: "mer_1", From: at(-60), To: at(1000), Limit: 6},
			{MerchantID: "mer_1", From: at(-60), To: at(1000), Limit: 2, TransactionSelection: instore.TransactionSelection{TerminalID: f.terminals[2]}},
			{MerchantID: "mer_1", From: at(-60), To: at(1000), Limit: 3, TransactionSelection: instore.TransactionSelection{StatusID: ptr(instore.StatusApproved)}},
			{MerchantID: "mer_1", From: at(-60), To: at(1000), Limit: 1, TransactionSelection: instore.TransactionSelection{ECRReference: "ECR-1"}},
		} {
			want := listWant(f.txs, filter)
			name := describeFilter(filter)
			var all []*instore.Transaction
			for page := 0; ; page++ {
				if page > len(want) {
					t.Fatalf("ListTransactions(%s): paging does not end", name)
				}
				got := mustList(t, s, filter)
				all = append(all, got...)
				if len(got) < filter.Limit {
					break
				}
				last := got[len(got)-1]
				filter.After = cursorOf(last)
				// Between two pages, matching transactions arrive: newer
				// ones, and one at the cursor's very time whose id sorts
				// after the cursor's (so before it in the listing).
				for _, created := range []time.Time{at(200 + len(f.txs)), last.CreatedAt} {
					// "txn_z" and a growing number sort after every id
					// listed so far.
					tx := newTransaction(fmt.Sprintf("txn_z%03d", len(f.txs)), "mer_1",
						f.terminals[2], "SN-3", instore.StatusApproved, created)
					tx.ECRReference = "ECR-1"
					mustCreateTransaction(t, s, tx)
					f.txs = append(f.txs, tx)
				}
			}
			// The pages after the first return the rows that were there:
			// none twice, none left out, in order.
			if d := diff(ids(want), ids(all)); d != "" {
				t.Errorf("ListTransactions(%s) paged during inserts mismatch (-want +got):\n%s", name, d)
			}
			// A new listing shows the new ones first.
			filter.After, filter.Limit = nil, 1000
			if d := diff(ids(listWant(f.txs, filter)), ids(mustList(t, s, filter))); d != "" {
				t.Errorf("ListTransactions(%s) after the inserts mismatch (-want +got):\n%s", name, d)
			}
		}
	}},
}

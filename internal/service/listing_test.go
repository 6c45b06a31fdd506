package service_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/service"
)

// listFixture is a fixture with five APPROVED transactions of its merchant
// (newest last in refs), a second merchant, and a second Service on the
// same store (another node, or the same after a restart).
type listFixture struct {
	*fixture
	refs  []string
	other string
	node2 *service.Service
}

func newListFixture(t *testing.T) *listFixture {
	t.Helper()
	ctx := context.Background()
	f := &listFixture{fixture: newFixture(t, "NORMAL", "S-1")}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 5 {
		tx := &instore.Transaction{
			ID: fmt.Sprintf("txn_%02d", i), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "S-1",
			Type: instore.TypePurchase, Amount: 100, Currency: "SEK", StatusID: instore.StatusApproved,
			Progress: instore.ProgressFinal, ECRReference: "shift-1", CreatedAt: now.Add(time.Duration(i-10) * time.Minute),
		}
		if err := f.st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
			t.Fatal(err)
		}
		f.refs = append(f.refs, tx.ID)
	}
	ad := admin.New(f.st)
	cus, _ := ad.CreateCustomer(ctx, "c2")
	mer, err := ad.CreateMerchant(ctx, cus.ID, "m2", true)
	if err != nil {
		t.Fatal(err)
	}
	f.other = mer.ID
	meta := instore.DefaultMetadata()
	f.node2 = &service.Service{Store: f.st, Metadata: &meta, Gateway: instore.NoGateway{}}
	return f
}

func (f *listFixture) principal(merchantID string) *instore.Principal {
	return &instore.Principal{Surface: instore.SurfaceOnline, MerchantID: merchantID}
}

// page lists one page and returns its refs and the next cursor.
func (f *listFixture) page(t *testing.T, svc *service.Service, merchantID string, q instore.ListQuery) ([]string, string, error) {
	t.Helper()
	ts, next, err := svc.Transactions(context.Background(), f.principal(merchantID), q)
	var refs []string
	for _, tx := range ts {
		refs = append(refs, tx.ID)
	}
	return refs, next, err
}

func TestTransactionsCursor(t *testing.T) {
	f := newListFixture(t)
	first, cursor, err := f.page(t, f.svc, f.merchant, instore.ListQuery{Limit: 2, TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}})
	if err != nil || cursor == "" {
		t.Fatalf("first page = %v, cursor %q, %v; want a cursor", first, cursor, err)
	}
	if diff := cmp.Diff([]string{f.refs[4], f.refs[3]}, first); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	// The next page, on another node (or after a restart), with another
	// page size: the cursor is bound to the query, not to the limit.
	second, _, err := f.page(t, f.node2, f.merchant, instore.ListQuery{Limit: 3, TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: cursor})
	if err != nil {
		t.Fatalf("second page: %v", err)
	}
	if diff := cmp.Diff([]string{f.refs[2], f.refs[1], f.refs[0]}, second); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}

	payload, _, _ := strings.Cut(cursor, ".")
	forged := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	status := instore.StatusApproved
	from := time.Now().Add(-time.Hour)
	bad := []struct {
		name       string
		merchantID string
		q          instore.ListQuery
	}{
		// What the service issued before cursors were signed, and still
		// took: base64url JSON with a ref-shaped id.
		{"unsigned", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: forged(`{"t":1,"i":"txn_04"}`)}},
		{"payload alone", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: payload}},
		{"payload changed", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: forged(`{"t":1,"i":"txn_04","f":0,"u":1}`) + cursor[len(payload):]}},
		{"signature changed", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: cursor[:len(cursor)-2] + "AA"}},
		{"garbage", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: "!!.!!"}},
		{"another merchant", f.other, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, Cursor: cursor}},
		{"another ecrReference", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-2"}, Cursor: cursor}},
		{"ecrReference dropped", f.merchant, instore.ListQuery{Cursor: cursor}},
		{"terminalId added", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1", TerminalID: f.terminal}, Cursor: cursor}},
		{"statusId added", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1", StatusID: &status}, Cursor: cursor}},
		{"from added", f.merchant, instore.ListQuery{TransactionSelection: instore.TransactionSelection{ECRReference: "shift-1"}, From: &from, Cursor: cursor}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			refs, _, err := f.page(t, f.svc, tt.merchantID, tt.q)
			if diff := cmp.Diff([]string{"cursor"}, apitest.FieldsOf(t, err)); diff != "" || refs != nil {
				t.Errorf("Transactions(%+v) = %v, %v; want a validation error on cursor: (-want +got)\n%s", tt.q, refs, err, diff)
			}
		})
	}
}

// TestTransactionsCursorKeepsRange: the pages of a listing of the default
// range (the last 24 hours) keep the range of the first page, whatever the
// clock says when the next page is asked.
func TestTransactionsCursorKeepsRange(t *testing.T) {
	f := newListFixture(t)
	_, cursor, err := f.page(t, f.svc, f.merchant, instore.ListQuery{Limit: 4})
	if err != nil || cursor == "" {
		t.Fatalf("first page: cursor %q, %v", cursor, err)
	}
	// 23 h 55 min later the last transaction (created 6 min before the
	// first page) has left the default range; the listing still shows it.
	later := time.Now().Add(24*time.Hour - 5*time.Minute)
	f.node2.Clock = clocktest.New(later)
	refs, next, err := f.page(t, f.node2, f.merchant, instore.ListQuery{Limit: 4, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{f.refs[0]}, refs); diff != "" || next != "" {
		t.Errorf("second page (-want +got), next %q:\n%s", next, diff)
	}
}

package instore

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func entry(id, ref string, typ TransactionType, amount int64, status TransactionStatus) BookEntry {
	md := DefaultMetadata()
	c, _ := md.TransactionStatus(status)
	return BookEntry{OnlineAPIRefID: id, ECRReference: NullString(ref), TerminalID: "10000001", Type: typ, Amount: amount,
		Currency: "SEK", StatusID: status, Status: c.Code, CreatedAt: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
}

func line(id, ref string, typ TransactionType, amount int64, currency, status string) ReconcileLine {
	return ReconcileLine{OnlineAPIRefID: id, ECRReference: ref, Type: typ, Amount: &amount, Currency: currency, Status: status}
}

func TestReconcile(t *testing.T) {
	sale := entry("txn_1", "ORDER-1", TypePurchase, 1250, StatusApproved)
	refund := entry("txn_2", "RET-1", TypeRefund, 500, StatusApproved)
	declined := entry("txn_3", "ORDER-2", TypePurchase, 900, StatusTransactionDeclined)
	retry := entry("txn_4", "ORDER-2", TypePurchase, 900, StatusApproved)
	reversed := entry("txn_5", "", TypePurchase, 700, StatusReversed)
	pending := entry("txn_6", "ORDER-3", TypePurchase, 100, StatusPending)
	type want struct {
		matched                                          bool
		okLines, mismatchedLines, missingSvc, missingECR int
		mismatches                                       []string // "index field ecr service"
		missingECRIDs                                    []string
	}
	for _, tc := range []struct {
		name    string
		lines   []ReconcileLine
		service []BookEntry
		want    want
	}{
		{"both empty", nil, nil, want{matched: true}},
		{"all agree, by id and by reference",
			[]ReconcileLine{line("txn_1", "", TypePurchase, 1250, "SEK", "APPROVED"), line("", "RET-1", TypeRefund, 500, "SEK", "APPROVED")},
			[]BookEntry{sale, refund}, want{matched: true, okLines: 2}},
		{"the id wins over the reference",
			[]ReconcileLine{line("txn_1", "RET-1", TypePurchase, 1250, "SEK", "APPROVED")},
			[]BookEntry{sale, refund}, want{okLines: 1, missingECR: 1, missingECRIDs: []string{"txn_2"}}},
		{"amount and status differ",
			[]ReconcileLine{line("txn_1", "", TypePurchase, 1200, "SEK", "REVERSED")},
			[]BookEntry{sale}, want{mismatchedLines: 1, mismatches: []string{"0 amount 1200 1250", "0 status REVERSED APPROVED"}}},
		{"type and currency differ",
			[]ReconcileLine{line("txn_2", "", TypePurchase, 500, "EUR", "APPROVED")},
			[]BookEntry{refund}, want{mismatchedLines: 1, mismatches: []string{"0 type PURCHASE REFUND", "0 currency EUR SEK"}}},
		{"a line the service does not have",
			[]ReconcileLine{line("txn_9", "", TypePurchase, 1250, "SEK", "APPROVED"), line("", "NOPE", TypePurchase, 1, "SEK", "APPROVED")},
			[]BookEntry{sale}, want{missingSvc: 2, missingECR: 1, missingECRIDs: []string{"txn_1"}}},
		{"only what moved money is missing in the ECR",
			nil, []BookEntry{sale, declined, reversed, pending},
			want{missingECR: 2, missingECRIDs: []string{"txn_1", "txn_5"}}},
		{"a declined attempt and its retry under one reference: the retry pairs",
			[]ReconcileLine{line("", "ORDER-2", TypePurchase, 900, "SEK", "APPROVED")},
			[]BookEntry{declined, retry}, want{matched: true, okLines: 1}},
		{"both booked under one reference, in any order",
			[]ReconcileLine{line("", "ORDER-2", TypePurchase, 900, "SEK", "APPROVED"), line("", "ORDER-2", TypePurchase, 900, "SEK", "TRANSACTION_DECLINED")},
			[]BookEntry{declined, retry}, want{matched: true, okLines: 2}},
		{"a reference booked twice, once too often",
			[]ReconcileLine{line("", "RET-1", TypeRefund, 500, "SEK", "APPROVED"), line("", "RET-1", TypeRefund, 500, "SEK", "APPROVED")},
			[]BookEntry{refund}, want{okLines: 1, missingSvc: 1}},
		{"by reference, the same type before the oldest",
			[]ReconcileLine{line("", "ORDER-2", TypeRefund, 900, "SEK", "APPROVED")},
			[]BookEntry{declined, entry("txn_7", "ORDER-2", TypeRefund, 800, StatusApproved)},
			want{mismatchedLines: 1, mismatches: []string{"0 amount 900 800"}}},
		{"by reference, another type if nothing else",
			[]ReconcileLine{line("", "ORDER-1", TypeRefund, 1250, "SEK", "APPROVED")},
			[]BookEntry{sale}, want{mismatchedLines: 1, mismatches: []string{"0 type REFUND PURCHASE"}}},
		{"a pending transaction booked as approved",
			[]ReconcileLine{line("txn_6", "", TypePurchase, 100, "SEK", "APPROVED")},
			[]BookEntry{pending}, want{mismatchedLines: 1, mismatches: []string{"0 status APPROVED PENDING"}}},
		{"an id line does not take a transaction a reference line wants",
			[]ReconcileLine{line("", "ORDER-1", TypePurchase, 1250, "SEK", "APPROVED"), line("txn_1", "", TypePurchase, 1250, "SEK", "APPROVED")},
			[]BookEntry{sale}, want{okLines: 1, missingSvc: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Reconcile(tc.lines, tc.service)
			var mm []string
			for _, m := range got.Mismatched {
				mm = append(mm, fmt.Sprintf("%d %s %v %v", m.Index, m.Field, m.ECR, m.Service))
			}
			var ids []string
			for _, e := range got.MissingInECR {
				ids = append(ids, e.OnlineAPIRefID)
			}
			c := got.Counts
			g := want{got.Matched, c.Matched, c.Mismatched, c.MissingInService, c.MissingInECR, mm, ids}
			if d := cmp.Diff(tc.want, g, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if c.ECRLines != len(tc.lines) || c.ServiceTransactions != len(tc.service) || c.MissingInService != len(got.MissingInService) ||
				c.Matched+c.Mismatched+c.MissingInService != len(tc.lines) {
				t.Errorf("counts %+v do not add up over %d lines and %d transactions", c, len(tc.lines), len(tc.service))
			}
			if got.MissingInService == nil || got.MissingInECR == nil || got.Mismatched == nil {
				t.Errorf("a list is nil (null on the wire): %+v", got)
			}
		})
	}
}

func TestReconcileRequestValidate(t *testing.T) {
	md := DefaultMetadata()
	ok := func() *ReconcileRequest {
		return &ReconcileRequest{From: "2026-11-27T00:00:00Z", To: "2026-11-28T00:00:00+01:00",
			Transactions: []ReconcileLine{line("txn_1", "", TypePurchase, 1250, "SEK", "APPROVED"), line("", "ORDER-1", TypeRefund, 0, "EUR", "REVERSED")}}
	}
	if err := ok().Validate(&md); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
	r := ok()
	r.Validate(&md)
	if from, to := r.Window(); !from.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) || !to.Equal(time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)) || to.Location() != time.UTC {
		t.Errorf("window = %v, %v", from, to)
	}
	for name, tc := range map[string]struct {
		edit  func(r *ReconcileRequest)
		field string
	}{
		"no from":          {func(r *ReconcileRequest) { r.From = "" }, "/from"},
		"bad to":           {func(r *ReconcileRequest) { r.To = "tomorrow" }, "/to"},
		"from after to":    {func(r *ReconcileRequest) { r.From, r.To = r.To, r.From }, "/from"},
		"terminal":         {func(r *ReconcileRequest) { r.TerminalID = "123" }, "/terminalId"},
		"no reference":     {func(r *ReconcileRequest) { r.Transactions[1].ECRReference = "" }, "/transactions/1"},
		"bad id":           {func(r *ReconcileRequest) { r.Transactions[0].OnlineAPIRefID = "txn 1" }, "/transactions/0/onlineAPIRefId"},
		"duplicate id":     {func(r *ReconcileRequest) { r.Transactions[1].OnlineAPIRefID = "txn_1" }, "/transactions/1/onlineAPIRefId"},
		"control in ref":   {func(r *ReconcileRequest) { r.Transactions[1].ECRReference = "A\nB" }, "/transactions/1/ecrReference"},
		"type":             {func(r *ReconcileRequest) { r.Transactions[0].Type = "SALE" }, "/transactions/0/type"},
		"no type":          {func(r *ReconcileRequest) { r.Transactions[0].Type = "" }, "/transactions/0/type"},
		"negative amount":  {func(r *ReconcileRequest) { r.Transactions[0].Amount = ptrTo(int64(-1)) }, "/transactions/0/amount"},
		"amount too large": {func(r *ReconcileRequest) { r.Transactions[0].Amount = ptrTo(int64(MaxTotalAmount + 1)) }, "/transactions/0/amount"},
		"no amount":        {func(r *ReconcileRequest) { r.Transactions[0].Amount = nil }, "/transactions/0/amount"},
		"currency":         {func(r *ReconcileRequest) { r.Transactions[0].Currency = "sek" }, "/transactions/0/currency"},
		"status":           {func(r *ReconcileRequest) { r.Transactions[0].Status = "OK" }, "/transactions/0/status"},
		"status as id":     {func(r *ReconcileRequest) { r.Transactions[0].Status = "0" }, "/transactions/0/status"},
	} {
		r := ok()
		tc.edit(r)
		err := r.Validate(&md)
		e, isErr := err.(*Error)
		if !isErr || e.Code != EValidation || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
			t.Errorf("%s: %v, want one field error at %s", name, err, tc.field)
		}
	}
	r = ok()
	r.Transactions = make([]ReconcileLine, MaxReconcileLines+1)
	err := r.Validate(&md)
	if e, isErr := err.(*Error); !isErr || e.Code != EValidation || !strings.Contains(e.Detail, "at most 10000 lines") || e.Fields[0].Field != "/transactions" {
		t.Errorf("%d lines: %v", MaxReconcileLines+1, err)
	}
	r.Transactions = r.Transactions[:MaxReconcileLines] // every line invalid: the errors are capped
	if e := r.Validate(&md).(*Error); len(e.Fields) > maxReconcileFieldErrors+5 || !strings.Contains(e.Detail, "the first") {
		t.Errorf("%d invalid lines: %d field errors, detail %q", MaxReconcileLines, len(e.Fields), e.Detail)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestBooksLimitsDocumented checks that the OpenAPI document and
// docs/accounting.md state the limits the code has.
func TestBooksLimitsDocumented(t *testing.T) {
	for file, wants := range map[string][]string{
		"api/online-api.yaml": {fmt.Sprintf("up to\n        %d bytes", MaxReconcileBodyBytes), fmt.Sprintf("%d for `POST /reconciliation`", MaxReconcileBodyBytes),
			"maxItems: 10000", fmt.Sprintf("maximum: %d", MaxTotalAmount), "more than 50,000"},
		"docs/accounting.md": {"6,404,096 bytes", fmt.Sprintf("%d bytes a line", MaxReconcileLineBytes), "**10,000 lines**", "**50,000 of the service's transactions**"},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not say %q", file, w)
			}
		}
	}
	if MaxReconcileBodyBytes != 6404096 || MaxReconcileLines != 10000 || MaxReconcileService != 50000 {
		t.Errorf("a limit changed: update the documents and this test")
	}
}

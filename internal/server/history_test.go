package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/internal/wallclock"
)

type txFull struct {
	txJSON
	Reverses   *string `json:"reverses"`
	ReversedBy *string `json:"reversedBy"`
	Currency   string  `json:"currency"`
}

func (s *sandbox) approved(t *testing.T, body map[string]any) txJSON {
	t.Helper()
	tx := s.post(t, "/in-store/api/v1/purchase", body, nil).tx(t, 201)
	if got := s.final(t, tx.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
		t.Fatalf("purchase %v ended %d, want APPROVED", body, got.StatusID)
	}
	return tx
}

func TestRefunds(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	orig := s.approved(t, map[string]any{"terminalId": term, "amount": 5000, "currency": "SEK"})
	refund := func(amount int64, extra map[string]any) reply {
		body := map[string]any{"terminalId": term, "amount": amount, "currency": "SEK", "originalOnlineAPIRefId": orig.OnlineAPIRefID}
		for k, v := range extra {
			body[k] = v
		}
		return s.post(t, "/in-store/api/v1/refund", body, nil)
	}
	r1 := refund(2000, nil).tx(t, 201)
	if r1.Type != "REFUND" {
		t.Errorf("refund type = %q", r1.Type)
	}
	if got := s.final(t, r1.OnlineAPIRefID); got.StatusID != instore.StatusApproved || got.Result == nil || len(got.Result.Receipt.Customer) == 0 {
		t.Fatalf("refund ended %+v, want APPROVED with a receipt", got)
	}
	p := refund(3500, nil).problem(t, 400, "validation")
	if len(p.Errors) == 0 || p.Errors[0].Field != "/amount" {
		t.Errorf("over-refund problem = %+v, want /amount", p)
	}
	r2 := refund(3000, nil).tx(t, 201)
	s.final(t, r2.OnlineAPIRefID)
	refund(1, nil).problem(t, 400, "validation")
	// A refund that names no original is a plain refund to a card.
	plain := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 999999, "currency": "SEK"}, nil).tx(t, 201)
	s.final(t, plain.OnlineAPIRefID)
	// Errors: unknown original, another currency, a declined original.
	s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 1, "currency": "SEK", "originalOnlineAPIRefId": "txn_nope"}, nil).problem(t, 404, "WP04")
	refund(1, map[string]any{"currency": "EUR"}).problem(t, 400, "validation")
	declined := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 1011, "currency": "SEK"}, nil).tx(t, 201)
	s.final(t, declined.OnlineAPIRefID)
	s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 1, "currency": "SEK", "originalOnlineAPIRefId": declined.OnlineAPIRefID}, nil).problem(t, 409, "conflict")
}

func TestRefundPaymentMethodRule(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[1]
	orig := s.approved(t, map[string]any{"terminalId": term, "amount": 4000, "currency": "SEK", "paymentMethodId": 0})
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"terminalId": term, "amount": 1000, "currency": "SEK"}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for name, body := range map[string]map[string]any{
		"card refund of an app payment": base(map[string]any{"originalOnlineAPIRefId": orig.OnlineAPIRefID}),
		"other method":                  base(map[string]any{"originalOnlineAPIRefId": orig.OnlineAPIRefID, "paymentMethodId": 1}),
		"method without original":       base(map[string]any{"paymentMethodId": 0}),
		"method not in the list":        base(map[string]any{"originalOnlineAPIRefId": orig.OnlineAPIRefID, "paymentMethodId": 9}),
	} {
		p := s.post(t, "/in-store/api/v1/refund", body, nil).problem(t, 400, "WP22")
		if p.Title != "PaymentMethod received from ECR is invalid" {
			t.Errorf("%s: title %q", name, p.Title)
		}
	}
	ok := s.post(t, "/in-store/api/v1/refund", base(map[string]any{"originalOnlineAPIRefId": orig.OnlineAPIRefID, "paymentMethodId": 0}), nil).tx(t, 201)
	got := s.final(t, ok.OnlineAPIRefID)
	if got.StatusID != instore.StatusApproved || got.Result.PaymentMethod == nil || got.Result.PaymentMethod.Code != "SWISH" {
		t.Errorf("same-method refund = %+v", got)
	}
}

func TestReversal(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	older := s.approved(t, map[string]any{"terminalId": term, "amount": 1500, "currency": "SEK"})
	orig := s.approved(t, map[string]any{"terminalId": term, "amount": 2500, "currency": "SEK"})
	p := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": older.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
	_ = p
	rev := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig.OnlineAPIRefID}, nil).tx(t, 201)
	if rev.Type != "REVERSAL" || rev.Amount != 2500 {
		t.Errorf("reversal = %+v", rev)
	}
	s.final(t, rev.OnlineAPIRefID)
	var o, r txFull
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/transaction/"+orig.OnlineAPIRefID).body, &o))
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/transaction/"+rev.OnlineAPIRefID).body, &r))
	if o.StatusID != instore.StatusReversed || o.Status != "REVERSED" || o.ReversedBy == nil || *o.ReversedBy != rev.OnlineAPIRefID {
		t.Errorf("original after reversal = %+v, want REVERSED, reversedBy %s", o, rev.OnlineAPIRefID)
	}
	if r.StatusID != instore.StatusApproved || r.Reverses == nil || *r.Reverses != orig.OnlineAPIRefID {
		t.Errorf("reversal = %+v, want APPROVED reversing %s", r, orig.OnlineAPIRefID)
	}
	s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
	declined := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 1011, "currency": "SEK"}, nil).tx(t, 201)
	s.final(t, declined.OnlineAPIRefID)
	s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": declined.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
	s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": "txn_nope"}, nil).problem(t, 404, "WP04")
	s.post(t, "/in-store/api/v1/reversal", map[string]any{}, nil).problem(t, 400, "validation")
}

// TestListing runs on a clock 200 days ahead of the wall clock, so the 30-
// and 90-day rules are checked against an injected clock.
func TestListing(t *testing.T) {
	offset := 200 * 24 * time.Hour
	s := startSandbox(t, func(c *server.Config) { c.Clock = clocktest.Shift(wallclock.Clock{}, offset) })
	now := time.Now().Add(offset).UTC()
	var made []string
	for i, tc := range []struct {
		term   int
		amount int64
		ref    string
	}{{0, 1000, "A-1"}, {1, 1011, "A-2"}, {0, 1012, "B-1"}, {2, 1000, "B-2"}, {0, 1000, "B-3"}} {
		tx := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": s.terminals[tc.term], "amount": tc.amount, "currency": "SEK", "ecrReference": tc.ref}, nil).tx(t, 201)
		s.final(t, tx.OnlineAPIRefID)
		made = append(made, tx.OnlineAPIRefID)
		_ = i
	}
	list := func(q url.Values) ([]string, string) {
		t.Helper()
		r := s.get(t, "/in-store/api/v1/transactions?"+q.Encode())
		if r.resp.StatusCode != 200 {
			t.Fatalf("GET /transactions?%s = %d %s", q.Encode(), r.resp.StatusCode, r.body)
		}
		return listPage(t, r.body)
	}
	rev := func(l []string) []string {
		out := make([]string, len(l))
		for i, v := range l {
			out[len(l)-1-i] = v
		}
		return out
	}
	all, next := list(url.Values{})
	if fmt.Sprint(all) != fmt.Sprint(rev(made)) || next != "" {
		t.Errorf("default listing = %v (next %q), want newest first %v", all, next, rev(made))
	}
	// Pages of 2 cover everything once, in order, even with inserts
	// between pages.
	var paged []string
	q := url.Values{"limit": {"2"}}
	page, cur := list(q)
	paged = append(paged, page...)
	newer := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": s.terminals[1], "amount": 1000, "currency": "SEK"}, nil).tx(t, 201)
	s.final(t, newer.OnlineAPIRefID)
	for cur != "" {
		q.Set("cursor", cur)
		page, cur = list(q)
		paged = append(paged, page...)
	}
	if fmt.Sprint(paged) != fmt.Sprint(rev(made)) {
		t.Errorf("paged = %v, want %v", paged, rev(made))
	}
	if got, _ := list(url.Values{"terminalId": {s.terminals[0]}}); fmt.Sprint(got) != fmt.Sprint([]string{made[4], made[2], made[0]}) {
		t.Errorf("by terminal = %v", got)
	}
	if got, _ := list(url.Values{"statusId": {"12"}}); fmt.Sprint(got) != fmt.Sprint([]string{made[2]}) {
		t.Errorf("by status 12 = %v", got)
	}
	if got, _ := list(url.Values{"ecrReference": {"B-2"}}); fmt.Sprint(got) != fmt.Sprint([]string{made[3]}) {
		t.Errorf("by ecrReference = %v", got)
	}
	// A range in the past holds none of them.
	if got, _ := list(url.Values{"from": {now.Add(-48 * time.Hour).Format(time.RFC3339)}, "to": {now.Add(-24 * time.Hour).Format(time.RFC3339)}}); len(got) != 0 {
		t.Errorf("yesterday = %v, want none", got)
	}
	f := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	day := 24 * time.Hour
	s.get(t, "/in-store/api/v1/transactions?"+url.Values{"from": {f(-31 * day)}, "to": {f(0)}}.Encode()).problem(t, 400, "WP26")
	s.get(t, "/in-store/api/v1/transactions?"+url.Values{"from": {f(-30 * day)}, "to": {f(0)}}.Encode())
	s.get(t, "/in-store/api/v1/transactions?"+url.Values{"from": {f(-91 * day)}, "to": {f(-89 * day)}}.Encode()).problem(t, 400, "WP27")
	if r := s.get(t, "/in-store/api/v1/transactions?"+url.Values{"from": {f(-89 * day)}, "to": {f(-88 * day)}}.Encode()); r.resp.StatusCode != 200 {
		t.Errorf("89 days ago = %d %s", r.resp.StatusCode, r.body)
	}
	for _, bad := range []url.Values{{"limit": {"1001"}}, {"limit": {"x"}}, {"from": {"yesterday"}}, {"cursor": {"!!"}}, {"statusId": {"99"}}, {"ecrReference": {strings.Repeat("é", 65)}}} {
		s.get(t, "/in-store/api/v1/transactions?"+bad.Encode()).problem(t, 400, "validation")
	}
	s.get(t, "/in-store/api/v1/transactions?terminalId=99999999").problem(t, 403, "WP16")
}

func (r reply) job(t *testing.T) instore.PrintJobWire {
	t.Helper()
	if r.resp.StatusCode != 200 {
		t.Fatalf("print = %d %s", r.resp.StatusCode, r.body)
	}
	var j instore.PrintJobWire
	must(t, json.Unmarshal(r.body, &j))
	if j.StatusID == nil || j.Status == "" {
		t.Fatalf("print job without a final status: %s", r.body)
	}
	return j
}

func TestPrinting(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock, func(c *server.Config) { c.PrintTimeout = 45 * time.Second })
	counter, mobile, pinpad := s.terminals[0], s.terminals[1], s.terminals[2]
	lines := map[string]any{"lines": []string{"Thank you for shopping", "", "See you soon"}}
	printOn := func(term string, body map[string]any) reply {
		b := map[string]any{"terminalId": term}
		for k, v := range body {
			b[k] = v
		}
		return s.post(t, "/in-store/api/v1/print", b, nil)
	}
	want := func(j instore.PrintJobWire, code string) {
		t.Helper()
		if string(j.Status) != code {
			t.Errorf("print status = %s, want %s", j.Status, code)
		}
	}
	ok := printOn(counter, lines).job(t)
	want(ok, "SUCCESS")
	got := s.get(t, "/in-store/api/v1/print/"+ok.PrintID).job(t)
	if got.PrintID != ok.PrintID || got.Status != "SUCCESS" {
		t.Errorf("GET /print = %+v", got)
	}
	want(printOn(pinpad, lines).job(t), "ERROR")
	for _, tc := range []struct {
		term   string
		status int
		code   string
	}{{counter, 2, "OUT_OF_PAPER"}, {mobile, 3, "LOW_BATTERY"}, {counter, 5, "CANCELLED"}} {
		s.post(t, "/sandbox/v1/terminals/"+tc.term+"/printer", map[string]any{"statusId": tc.status}, nil)
		want(printOn(tc.term, lines).job(t), tc.code)
	}
	// BUSY while a transaction runs; the transaction is not disturbed.
	tx := s.purchase(t, counter, 1094).tx(t, 201)
	want(printOn(counter, lines).job(t), "BUSY")
	if got := s.final(t, tx.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
		t.Errorf("purchase beside a print ended %d", got.StatusID)
	}
	// A stored receipt, either copy.
	want(printOn(counter, map[string]any{"onlineAPIRefId": tx.OnlineAPIRefID, "copy": "MERCHANT"}).job(t), "SUCCESS")
	want(printOn(counter, map[string]any{"onlineAPIRefId": tx.OnlineAPIRefID, "copy": "CUSTOMER"}).job(t), "SUCCESS")
	// printReceipt prints the customer copy: it consumes the next print
	// outcome set before the purchase.
	s.post(t, "/sandbox/v1/terminals/"+mobile+"/printer", map[string]any{"statusId": 2}, nil)
	rtx := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": mobile, "amount": 700, "currency": "SEK", "printReceipt": true}, nil).tx(t, 201)
	s.final(t, rtx.OnlineAPIRefID)
	testwait.For(t, "a print to succeed after the receipt took the OUT_OF_PAPER outcome", func() bool {
		j := printOn(mobile, lines).job(t)
		if j.Status != "SUCCESS" && j.Status != "OUT_OF_PAPER" && j.Status != "BUSY" {
			t.Fatalf("after a printReceipt purchase the next print is %s; the receipt did not take the OUT_OF_PAPER outcome", j.Status)
		}
		return j.Status == "SUCCESS"
	})
	// The terminal never answers: the print time-out ends it. (Last: the
	// clock moves, and the virtual terminals take their time from the
	// deadlines it dates.)
	s.post(t, "/sandbox/v1/terminals/"+counter+"/printer", map[string]any{"statusId": 6}, nil)
	timedOut := make(chan reply, 1)
	go func() { timedOut <- printOn(counter, lines) }()
	advance(t, ck, 45*time.Second)
	want((<-timedOut).job(t), "TIMEOUT")
	// Errors.
	printOn(counter, map[string]any{}).problem(t, 400, "validation")
	printOn(counter, map[string]any{"lines": []string{strings.Repeat("x", 65)}}).problem(t, 400, "validation")
	printOn(counter, map[string]any{"lines": []string{"a\u0007b"}}).problem(t, 400, "validation")
	printOn(counter, map[string]any{"onlineAPIRefId": tx.OnlineAPIRefID, "copy": "BOTH"}).problem(t, 400, "validation")
	printOn(counter, map[string]any{"onlineAPIRefId": "txn_nope", "copy": "CUSTOMER"}).problem(t, 404, "WP04")
	printOn("99999999", lines).problem(t, 403, "WP16")
	s.get(t, "/in-store/api/v1/print/prt_nope").problem(t, 404, "not-found")
}

// listPage reads a page of GET /transactions: its transactions'
// onlineAPIRefIds in order and its next cursor ("" when there is none).
func listPage(t testing.TB, body []byte) (refs []string, next string) {
	t.Helper()
	var out struct {
		Transactions []txJSON `json:"transactions"`
		NextCursor   *string  `json:"nextCursor"`
	}
	must(t, json.Unmarshal(body, &out))
	for _, x := range out.Transactions {
		refs = append(refs, x.OnlineAPIRefID)
	}
	if out.NextCursor != nil {
		next = *out.NextCursor
	}
	return refs, next
}

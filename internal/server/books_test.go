package server_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// booksDay is a sandbox with a day of transactions: approved purchases
// (one with a tip, one whose ecrReference a spreadsheet would read as a
// formula), a declined one, a plain refund, and a purchase reversed.
type booksDay struct {
	*sandbox
	from, to string
	txs      []txJSON // final, oldest first
}

func startBooksDay(t *testing.T, store func(*server.Config)) *booksDay {
	t.Helper()
	s := startSandbox(t, store)
	d := &booksDay{sandbox: s}
	d.from = time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	a, b := s.terminals[0], s.terminals[1]
	for _, body := range []map[string]any{
		{"terminalId": a, "amount": 1250, "currency": "SEK", "ecrReference": "ORDER-1"},
		{"terminalId": a, "amount": 2000, "currency": "SEK", "ecrReference": "ORDER-2", "tip": map[string]any{"mode": "FIXED", "amount": 200}},
		{"terminalId": a, "amount": 1011, "currency": "SEK", "ecrReference": "ORDER-3"},
		{"terminalId": a, "amount": 300, "currency": "SEK", "ecrReference": "=HYPERLINK(\"http://x\")"},
	} {
		d.txs = append(d.txs, s.final(t, s.post(t, "/in-store/api/v1/purchase", body, nil).tx(t, 201).OnlineAPIRefID))
	}
	refund := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": a, "amount": 500, "currency": "SEK", "ecrReference": "RET-1"}, nil).tx(t, 201)
	d.txs = append(d.txs, s.final(t, refund.OnlineAPIRefID))
	sale := s.approved(t, map[string]any{"terminalId": b, "amount": 700, "currency": "SEK"})
	rev := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": sale.OnlineAPIRefID}, nil).tx(t, 201)
	s.final(t, rev.OnlineAPIRefID)
	d.txs = append(d.txs, s.final(t, sale.OnlineAPIRefID), s.final(t, rev.OnlineAPIRefID))
	d.to = time.Now().UTC().Add(time.Minute).Format(time.RFC3339)
	if d.txs[1].TotalAmount != 2200 || d.txs[2].StatusID != instore.StatusTransactionDeclined || d.txs[5].StatusID != instore.StatusReversed {
		t.Fatalf("the day is not as planned: %+v", d.txs)
	}
	return d
}

func (d *booksDay) window() string {
	return "from=" + url.QueryEscape(d.from) + "&to=" + url.QueryEscape(d.to)
}

func TestBooksEndToEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		d := startBooksDay(t, store)
		t.Run("totals", func(t *testing.T) { d.checkTotals(t) })
		t.Run("reconciliation", func(t *testing.T) { d.checkReconciliation(t) })
		t.Run("csv", func(t *testing.T) { d.checkCSV(t) })
		t.Run("refusals", func(t *testing.T) { d.checkRefusals(t) })
	})
}

func (d *booksDay) checkTotals(t *testing.T) {
	var got instore.TotalsWire
	r := d.get(t, "/in-store/api/v1/totals?"+d.window())
	if r.resp.StatusCode != 200 {
		t.Fatalf("GET /totals = %d %s", r.resp.StatusCode, r.body)
	}
	must(t, json.Unmarshal(r.body, &got))
	want := []string{
		"SEK PURCHASE APPROVED 3 3750",             // 1250, 2000 + 200 tip, 300
		"SEK PURCHASE TRANSACTION_DECLINED 1 1011", //
		"SEK PURCHASE REVERSED 1 700",              //
		"SEK REFUND APPROVED 1 500",                //
		"SEK REVERSAL APPROVED 1 700",              //
	}
	var lines []string
	for _, g := range got.Totals {
		lines = append(lines, fmt.Sprintf("%s %s %s %d %d", g.Currency, g.Type, g.Status, g.Count, g.Amount))
	}
	if !slices.Equal(want, lines) {
		t.Errorf("totals = %q, want %q", lines, want)
	}
	if got.From.Format(time.RFC3339) != d.from || got.TerminalID != "" {
		t.Errorf("totals window = %v, terminal %q; want from %s, all terminals", got.From, got.TerminalID, d.from)
	}
	// One terminal: the reversed sale and its reversal only.
	r = d.get(t, "/in-store/api/v1/totals?"+d.window()+"&terminalId="+d.terminals[1])
	must(t, json.Unmarshal(r.body, &got))
	if len(got.Totals) != 2 || got.Totals[0].Status != "REVERSED" || got.Totals[1].Type != instore.TypeReversal || string(got.TerminalID) != d.terminals[1] {
		t.Errorf("totals of %s = %s", d.terminals[1], r.body)
	}
	// The default window (the last 24 hours) holds the whole day too.
	r = d.get(t, "/in-store/api/v1/totals")
	must(t, json.Unmarshal(r.body, &got))
	if len(got.Totals) != 5 || got.To.Sub(got.From) != 24*time.Hour {
		t.Errorf("default totals = %s", r.body)
	}
}

// books is the ECR's books of the day as it would keep them: every
// transaction that moved money, by onlineAPIRefId, the refund by its
// ecrReference alone.
func (d *booksDay) books() []map[string]any {
	var lines []map[string]any
	for _, tx := range d.txs {
		if !instore.MovedMoney(tx.StatusID) {
			continue
		}
		l := map[string]any{"type": tx.Type, "amount": tx.TotalAmount, "currency": tx.Currency, "status": tx.Status}
		if tx.Type == instore.TypeRefund {
			l["ecrReference"] = string(tx.ECRReference)
		} else {
			l["onlineAPIRefId"] = tx.OnlineAPIRefID
		}
		lines = append(lines, l)
	}
	return lines
}

func (d *booksDay) reconcile(t *testing.T, lines []map[string]any) instore.ReconcileResult {
	t.Helper()
	r := d.post(t, "/in-store/api/v1/reconciliation", map[string]any{"from": d.from, "to": d.to, "transactions": lines}, nil)
	if r.resp.StatusCode != 200 {
		t.Fatalf("POST /reconciliation = %d %s", r.resp.StatusCode, r.body)
	}
	var res instore.ReconcileResult
	must(t, json.Unmarshal(r.body, &res))
	return res
}

func (d *booksDay) checkReconciliation(t *testing.T) {
	books := d.books()
	res := d.reconcile(t, books)
	if !res.Matched || res.Counts.Matched != len(books) || res.Counts.ServiceTransactions != len(d.txs) {
		t.Errorf("the books as they are: %+v, want matched, %d lines", res, len(books))
	}
	// Errors in the books: a wrong amount, a sale left out, a line the
	// service never saw.
	books[0]["amount"] = 1200
	left := books[1]["onlineAPIRefId"]
	books = append(books[:1], books[2:]...)
	books = append(books, map[string]any{"ecrReference": "CASH-9", "type": "PURCHASE", "amount": 990, "currency": "SEK", "status": "APPROVED"})
	res = d.reconcile(t, books)
	c := res.Counts
	if res.Matched || c.Mismatched != 1 || c.MissingInService != 1 || c.MissingInECR != 1 || c.Matched != len(books)-2 {
		t.Fatalf("with three errors: %+v", res)
	}
	if m := res.Mismatched[0]; m.OnlineAPIRefID != d.txs[0].OnlineAPIRefID || m.Field != "amount" || m.ECR != float64(1200) || m.Service != float64(1250) {
		t.Errorf("mismatch = %+v", m)
	}
	if res.MissingInECR[0].OnlineAPIRefID != left || res.MissingInECR[0].Amount != 2200 {
		t.Errorf("missing in the ECR = %+v, want %v of 2200", res.MissingInECR, left)
	}
	if m := res.MissingInService[0]; m.ECRReference != "CASH-9" || m.Index != len(books)-1 {
		t.Errorf("missing in the service = %+v", m)
	}
	// Per terminal: only its transactions are compared.
	r := d.post(t, "/in-store/api/v1/reconciliation", map[string]any{"from": d.from, "to": d.to, "terminalId": d.terminals[1], "transactions": []any{}}, nil)
	var one instore.ReconcileResult
	must(t, json.Unmarshal(r.body, &one))
	if one.Counts.ServiceTransactions != 2 || one.Counts.MissingInECR != 2 {
		t.Errorf("terminal %s with no lines: %s", d.terminals[1], r.body)
	}
}

func (d *booksDay) checkCSV(t *testing.T) {
	page := func(path string) ([][]string, string) {
		t.Helper()
		h := d.auth(d.token, d.key)
		h["Accept"] = "text/csv"
		resp, body := d.do(t, "GET", d.online+path, nil, h)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("GET %s as CSV = %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if !strings.Contains(string(body), "\r\n") {
			t.Errorf("CSV without CRLF line ends (RFC 4180)")
		}
		rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		must(t, err)
		next := ""
		if link := resp.Header.Get("Link"); link != "" {
			target, rel, _ := strings.Cut(link, ">; ")
			if rel != `rel="next"` {
				t.Fatalf("Link = %q", link)
			}
			next = strings.TrimPrefix(target, "<")
		}
		return rows, next
	}
	rows, next := page("/in-store/api/v1/transactions?limit=4&" + d.window())
	if len(rows) != 5 || rows[0][0] != "onlineAPIRefId" || rows[0][6] != "totalAmount" || next == "" {
		t.Fatalf("first page: %d rows, header %q, next %q", len(rows), rows[0], next)
	}
	more, last := page(next)
	if len(more) != 1+len(d.txs)-4 || last != "" {
		t.Fatalf("second page: %d rows, next %q", len(more), last)
	}
	// The pages are the JSON listing's, newest first, cell for cell where
	// the two share a field.
	var ids []string
	cells := map[string][]string{}
	for _, row := range append(rows[1:], more[1:]...) {
		ids = append(ids, row[0])
		cells[row[0]] = row
	}
	for i, tx := range d.txs {
		if ids[len(ids)-1-i] != tx.OnlineAPIRefID {
			t.Errorf("CSV row %d is %s, want %s (newest first)", len(ids)-1-i, ids[len(ids)-1-i], tx.OnlineAPIRefID)
		}
		row := cells[tx.OnlineAPIRefID]
		if row[6] != fmt.Sprint(tx.TotalAmount) || row[13] != tx.Status || row[2] != tx.TerminalID {
			t.Errorf("CSV row of %s = %q", tx.OnlineAPIRefID, row)
		}
	}
	// A formula in a text cell is defused with an apostrophe; a plain one
	// is left as it is.
	if got := cells[d.txs[3].OnlineAPIRefID][10]; got != `'=HYPERLINK("http://x")` {
		t.Errorf("ecrReference cell = %q, want it defused", got)
	}
	if got := cells[d.txs[0].OnlineAPIRefID][10]; got != "ORDER-1" {
		t.Errorf("ecrReference cell = %q, want ORDER-1", got)
	}
	// JSON stays the default, and wins when listed first.
	h := d.auth(d.token, d.key)
	h["Accept"] = "application/json, text/csv"
	if resp, _ := d.do(t, "GET", d.online+"/in-store/api/v1/transactions", nil, h); !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("Accept: application/json, text/csv answered %s", resp.Header.Get("Content-Type"))
	}
}

func (d *booksDay) checkRefusals(t *testing.T) {
	old := time.Now().UTC().Add(-91 * 24 * time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"from=yesterday", 400, "validation"},
		{"from=" + url.QueryEscape(d.to) + "&to=" + url.QueryEscape(d.from), 400, "validation"},
		{"terminalId=123", 400, "validation"},
		{"from=2026-01-01T00:00:00Z&from=2026-01-02T00:00:00Z", 400, "validation"},
		{"from=" + url.QueryEscape(time.Now().UTC().Add(-31*24*time.Hour).Format(time.RFC3339)), 400, "WP26"},
		{"from=" + url.QueryEscape(old) + "&to=" + url.QueryEscape(time.Now().UTC().Add(-89*24*time.Hour).Format(time.RFC3339)), 400, "WP27"},
		{"terminalId=99999999", 403, "WP16"},
	} {
		d.get(t, "/in-store/api/v1/totals?"+tc.query).problem(t, tc.status, tc.code)
	}

	line := `{"onlineAPIRefId":"txn_1","type":"PURCHASE","amount":100,"currency":"SEK","status":"APPROVED"}`
	body := func(from, to, lines string) string {
		return `{"from":"` + from + `","to":"` + to + `","transactions":[` + lines + `]}`
	}
	many := strings.TrimSuffix(strings.Repeat(`{"ecrReference":"R","type":"PURCHASE","amount":1,"currency":"SEK","status":"APPROVED"},`, instore.MaxReconcileLines+1), ",")
	for name, tc := range map[string]struct {
		body, field string
		status      int
		code        string
	}{
		"duplicate key":      {`{"from":"` + d.from + `","from":"` + d.from + `","to":"` + d.to + `","transactions":[]}`, "/from", 400, "validation"},
		"duplicate line key": {body(d.from, d.to, `{"type":"PURCHASE","type":"REFUND","onlineAPIRefId":"txn_1","amount":1,"currency":"SEK","status":"APPROVED"}`), "/transactions/0/type", 400, "validation"},
		"unknown field":      {body(d.from, d.to, `{"onlineAPIRefId":"txn_1","type":"PURCHASE","amount":1,"currency":"SEK","status":"APPROVED","tip":1}`), "/transactions/0/tip", 400, "validation"},
		"unknown top field":  {`{"from":"` + d.from + `","to":"` + d.to + `","lines":[]}`, "/lines", 400, "validation"},
		"negative amount":    {body(d.from, d.to, strings.Replace(line, "100", "-100", 1)), "/transactions/0/amount", 400, "validation"},
		"amount as string":   {body(d.from, d.to, strings.Replace(line, "100", `"1.00"`, 1)), "/transactions/0/amount", 400, "validation"},
		"from after to":      {body(d.to, d.from, line), "/from", 400, "validation"},
		"duplicate id":       {body(d.from, d.to, line+","+line), "/transactions/1/onlineAPIRefId", 400, "validation"},
		"no reference":       {body(d.from, d.to, `{"type":"PURCHASE","amount":1,"currency":"SEK","status":"APPROVED"}`), "/transactions/0", 400, "validation"},
		"10,001 lines":       {body(d.from, d.to, many), "/transactions", 400, "validation"},
		"31 days":            {body(time.Now().UTC().Add(-31*24*time.Hour).Format(time.RFC3339), d.to, line), "", 400, "WP26"},
		"91 days ago":        {body(old, time.Now().UTC().Add(-89*24*time.Hour).Format(time.RFC3339), line), "", 400, "WP27"},
		"another's terminal": {`{"from":"` + d.from + `","to":"` + d.to + `","terminalId":"99999999","transactions":[]}`, "", 403, "WP16"},
		"not an object":      {`[]`, "", 400, "validation"},
	} {
		h := d.auth(d.token, d.key)
		h["Content-Type"] = "application/json"
		resp, b := d.do(t, "POST", d.online+"/in-store/api/v1/reconciliation", strings.NewReader(tc.body), h)
		p := reply{resp, b}.problem(t, tc.status, tc.code)
		if tc.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != tc.field) {
			t.Errorf("%s: errors %+v, want %s", name, p.Errors, tc.field)
		}
		if name == "10,001 lines" && !strings.Contains(string(b), "at most 10000 lines, this one has 10001") {
			t.Errorf("10,001 lines: %s does not say the limit and the count", b)
		}
	}
	// 10,000 lines are taken at their longest, as Go's encoding/json
	// writes them indented (& as \u0026): the body limit agrees.
	longest := make([]map[string]any, instore.MaxReconcileLines)
	for i := range longest {
		longest[i] = map[string]any{"onlineAPIRefId": fmt.Sprintf("txn_%060d", i), "ecrReference": strings.Repeat("&", instore.MaxECRReferenceLen),
			"type": "INCREMENT", "amount": instore.MaxTotalAmount, "currency": "SEK", "status": "ABORTED_BY_CARDHOLDER"}
	}
	fullBytes, err := json.MarshalIndent(map[string]any{"from": d.from, "to": d.to, "transactions": longest}, "", "  ")
	must(t, err)
	full := string(fullBytes)
	h := d.auth(d.token, d.key)
	h["Content-Type"] = "application/json"
	if resp, b := d.do(t, "POST", d.online+"/in-store/api/v1/reconciliation", strings.NewReader(full), h); resp.StatusCode != 200 {
		t.Errorf("10,000 lines of %d bytes: %d %.300s", len(full), resp.StatusCode, b)
	}
	over := strings.Repeat(" ", instore.MaxReconcileBodyBytes) + full
	resp, b := d.do(t, "POST", d.online+"/in-store/api/v1/reconciliation", strings.NewReader(over), h)
	if p := (reply{resp, b}).problem(t, 413, "payload-too-large"); !strings.Contains(string(b), fmt.Sprint(instore.MaxReconcileBodyBytes)) {
		t.Errorf("413 %+v does not name the limit", p)
	}
	h["Content-Type"] = "text/csv"
	resp, b = d.do(t, "POST", d.online+"/in-store/api/v1/reconciliation", strings.NewReader("a,b\r\n"), h)
	reply{resp, b}.problem(t, 415, "unsupported-media-type")
}

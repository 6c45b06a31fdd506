package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
)

func TestLinkUnlinkAndTerminals(t *testing.T) {
	s := startSandbox(t)
	resp, body := s.get(t, "/in-store/api/v1/terminals").parts()
	var list struct {
		Terminals []instore.TerminalView `json:"terminals"`
	}
	must(t, json.Unmarshal(body, &list))
	if resp.StatusCode != 200 || len(list.Terminals) != 3 {
		t.Fatalf("GET /terminals = %d %s", resp.StatusCode, body)
	}
	for i, v := range list.Terminals {
		if !v.Linked || !v.Online || v.Busy || *v.Model != instore.Models[i] {
			t.Errorf("terminal %d = %+v, want linked, online, idle, model %s", i, v, instore.Models[i])
		}
	}
	a, b := s.terminals[0], s.terminals[1]
	// Unlink a: its device shows a new link code.
	resp, body = s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": a}, nil).parts()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"linked":false`) {
		t.Fatalf("unlink = %d %s", resp.StatusCode, body)
	}
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": a}, nil).problem(t, 409, "WP02")
	s.purchase(t, a, 1000).problem(t, 409, "WP01")
	devs := s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[0].LinkCode != nil && ds[0].TerminalID == nil })
	// Relink: the countertop device to terminal ID b (which had the mobile
	// device): the mobile device becomes unlinked, b moves.
	resp, body = s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": b, "linkCode": *devs[0].LinkCode}, nil).parts()
	if resp.StatusCode != 200 {
		t.Fatalf("relink = %d %s", resp.StatusCode, body)
	}
	devs = s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		return ds[0].TerminalID != nil && *ds[0].TerminalID == b && ds[1].TerminalID == nil && ds[1].LinkCode != nil
	})
	resp, body = s.get(t, "/in-store/api/v1/terminal/"+b).parts()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"model":"countertop"`) {
		t.Errorf("GET /terminal/b = %d %s, want the countertop device", resp.StatusCode, body)
	}
	// A wrong code, a foreign terminal ID, a malformed request.
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": a, "linkCode": "000000"}, nil).problem(t, 400, "link-code-invalid")
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": "99999999", "linkCode": *devs[1].LinkCode}, nil).problem(t, 403, "WP16")
	p := s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": "12", "linkCode": "x", "extra": 1}, nil).problem(t, 400, "validation")
	if len(p.Errors) == 0 {
		t.Errorf("validation problem without errors")
	}
	s.get(t, "/in-store/api/v1/terminal/99999999").problem(t, 403, "WP16")
}

// TestSandboxOutcomes drives every outcome the amount picks, through the
// real gateway and a real virtual terminal.
func TestSandboxOutcomes(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	for _, st := range []instore.TransactionStatus{0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12} {
		amount := int64(1200 + st)
		if st == 0 {
			amount = 1250
		}
		tx := s.purchase(t, term, amount).tx(t, 201)
		if tx.StatusID != instore.StatusPending && tx.StatusID != st {
			t.Errorf("purchase %d answered status %d", amount, tx.StatusID)
		}
		tx = s.final(t, tx.OnlineAPIRefID)
		if tx.StatusID != st || tx.Progress != "FINAL" || tx.ErrorCode != "" {
			t.Errorf("amount %d ended %d %s (error %v), want status %d", amount, tx.StatusID, tx.Status, tx.ErrorCode, st)
		}
		if st == 0 {
			r := tx.Result
			if r == nil || r.MaskedPAN == "" || r.AuthorizationCode == "" || len(r.Receipt.Customer) == 0 || len(r.Receipt.Merchant) == 0 {
				t.Fatalf("approved result = %+v", r)
			}
			pan := string(r.MaskedPAN)
			if len(pan) < 10 || strings.Count(pan, "*") < 2 {
				t.Errorf("maskedPan = %q, want first 6 and last 4", pan)
			}
			if strings.Contains(strings.Join(r.Receipt.Customer, "\n"), pan[:6]) {
				t.Errorf("customer receipt shows the first 6 digits: %q", r.Receipt.Customer)
			}
		}
	}
}

func TestAckTimeoutWP25(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock)
	done := make(chan reply, 1)
	go func() { done <- s.purchase(t, s.terminals[0], 1091) }()
	advance(t, ck, testAck)
	resp, body := (<-done).parts()
	p := reply{resp, body}.problem(t, 504, "WP25")
	if p.OnlineAPIRefID == "" || p.Title != "Acknowledgement timed-out from terminal" {
		t.Fatalf("WP25 problem = %s", body)
	}
	tx := s.transaction(t, p.OnlineAPIRefID)
	wantStatus(t, tx, instore.StatusTechnicalError, "WP25", "after WP25 the transaction")
	// The terminal is free again.
	tx = s.purchase(t, s.terminals[0], 1000).tx(t, 201)
	if s.final(t, tx.OnlineAPIRefID).StatusID != instore.StatusApproved {
		t.Errorf("purchase after WP25 not approved")
	}
}

func TestDeadlineWP36AndBusyWP09(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock)
	tx := s.purchase(t, s.terminals[0], 1092).tx(t, 201)
	if tx.StatusID != instore.StatusPending || tx.Progress == "SENT" {
		t.Fatalf("201 transaction = %+v, want PENDING and acknowledged", tx)
	}
	p := s.purchase(t, s.terminals[0], 1000).problem(t, 409, "WP09")
	if p.OnlineAPIRefID != tx.OnlineAPIRefID || p.Reason != instore.ReasonTransaction {
		t.Errorf("WP09 names %q with reason %q, want the running %q, %s", p.OnlineAPIRefID, p.Reason, tx.OnlineAPIRefID, instore.ReasonTransaction)
	}
	resp, body := s.get(t, "/in-store/api/v1/terminal/"+s.terminals[0]).parts()
	if !strings.Contains(string(body), `"busy":true`) || !strings.Contains(string(body), tx.OnlineAPIRefID) || resp.StatusCode != 200 {
		t.Errorf("terminal while busy = %s", body)
	}
	advance(t, ck, testDeadline)
	final := s.final(t, tx.OnlineAPIRefID)
	wantStatus(t, final, instore.StatusTechnicalError, "WP36", "after the deadline")
}

func TestReconnectWP30AppliedOnce(t *testing.T) {
	s := startSandbox(t)
	tx := s.purchase(t, s.terminals[1], 1093).tx(t, 201)
	// The terminal dropped its session after the ack: a purchase meanwhile
	// gets WP30 naming the open transaction.
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return !ds[1].Online })
	p := s.purchase(t, s.terminals[1], 1000).problem(t, 409, "WP30")
	if p.OnlineAPIRefID != tx.OnlineAPIRefID {
		t.Errorf("WP30 names %q, want %q", p.OnlineAPIRefID, tx.OnlineAPIRefID)
	}
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": s.terminals[1]}, nil).problem(t, 409, "WP30")
	final := s.final(t, tx.OnlineAPIRefID)
	if final.StatusID != instore.StatusApproved {
		t.Fatalf("after the reconnect: %d, want APPROVED", final.StatusID)
	}
	// Applied once: the version does not move again.
	again := s.transaction(t, tx.OnlineAPIRefID)
	if again.Version != final.Version {
		t.Errorf("version moved from %d to %d after the final status", final.Version, again.Version)
	}
}

func TestCancel(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).problem(t, 409, "WP18")
	tx := s.purchase(t, term, 1094).tx(t, 201)
	c := s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
	_ = c
	final := s.final(t, tx.OnlineAPIRefID)
	wantStatus(t, final, instore.StatusAbortedByCashier, "WP37", "cancelled purchase")
	// Cancel after the result: nothing is processing.
	tx = s.purchase(t, term, 1000).tx(t, 201)
	if s.final(t, tx.OnlineAPIRefID).StatusID != instore.StatusApproved {
		t.Fatal("not approved")
	}
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).problem(t, 409, "WP18")
}

// TestCancelNamingTransaction: a cancel that names the transaction it
// means cancels nothing when another one runs (the one it meant ended), so
// a late cancel never aborts the next sale; naming the running one cancels
// it.
func TestCancelNamingTransaction(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	first := s.purchase(t, term, 1000).tx(t, 201)
	if s.final(t, first.OnlineAPIRefID).StatusID != instore.StatusApproved {
		t.Fatal("first purchase not approved")
	}
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": first.OnlineAPIRefID}, nil).problem(t, 409, "WP18")
	next := s.purchase(t, term, 1092).tx(t, 201) // 92: waits until the deadline
	p := s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": first.OnlineAPIRefID}, nil).problem(t, 409, "WP18")
	if p.OnlineAPIRefID != "" {
		t.Errorf("WP18 names %q", p.OnlineAPIRefID)
	}
	if now := s.transaction(t, next.OnlineAPIRefID); now.StatusID != instore.StatusPending {
		t.Fatalf("the running sale after a cancel naming another: %d, want PENDING", now.StatusID)
	}
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": "not a ref"}, nil).problem(t, 400, "validation")
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": next.OnlineAPIRefID}, nil).tx(t, 202)
	final := s.final(t, next.OnlineAPIRefID)
	wantStatus(t, final, instore.StatusAbortedByCashier, "WP37", "cancelled purchase")
}

// TestCurrencyISO4217: a well-formed code that is no active ISO 4217
// currency is a validation error on /currency, for purchases and refunds;
// currencies with 0 and 3 decimals are taken.
func TestCurrencyISO4217(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	for _, c := range []string{"XYZ", "XTS", "XXX", "BGN"} {
		for _, path := range []string{"/in-store/api/v1/purchase", "/in-store/api/v1/refund"} {
			p := s.post(t, path, map[string]any{"terminalId": term, "amount": 100, "currency": c}, nil).problem(t, 400, "validation")
			if len(p.Errors) != 1 || p.Errors[0].Field != "/currency" {
				t.Errorf("%s in %s: errors %+v, want /currency", c, path, p.Errors)
			}
		}
	}
	for _, c := range []string{"JPY", "KWD"} {
		tx := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 1000, "currency": c}, nil).tx(t, 201)
		if s.final(t, tx.OnlineAPIRefID).StatusID != instore.StatusApproved {
			t.Errorf("purchase in %s not approved", c)
		}
	}
}

// TestAmountErrorsSayHowAmountsAreWritten: a string, a fraction and an
// amount out of range are each answered with a field error that says
// amounts are integers in minor units, with an example in the request's
// currency (SEK when it names none the service knows).
func TestAmountErrorsSayHowAmountsAreWritten(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[0]
	const sek = "must be an integer in minor units from 1 to 99999999, e.g. 1250 for 12.50 SEK"
	for _, tc := range []struct {
		path, body string
		field, msg string
	}{
		{"/purchase", `{"terminalId":"` + term + `","amount":"12.50","currency":"SEK"}`, "/amount", sek},
		{"/purchase", `{"terminalId":"` + term + `","amount":12.5,"currency":"SEK"}`, "/amount", sek},
		{"/purchase", `{"terminalId":"` + term + `","amount":0,"currency":"SEK"}`, "/amount", sek},
		{"/purchase", `{"terminalId":"` + term + `","amount":100000000,"currency":"SEK"}`, "/amount", sek},
		{"/purchase", `{"terminalId":"` + term + `","amount":1e30,"currency":"SEK"}`, "/amount", sek},
		{"/purchase", `{"currency":"JPY","terminalId":"` + term + `","amount":"1250"}`, "/amount",
			"must be an integer in minor units from 1 to 99999999, e.g. 1250 for 1250 JPY"},
		{"/purchase", `{"terminalId":"` + term + `","amount":12.5,"currency":"KWD"}`, "/amount",
			"must be an integer in minor units from 1 to 99999999, e.g. 1250 for 1.250 KWD"},
		{"/purchase", `{"terminalId":"` + term + `","amount":"12.50"}`, "/amount", sek},
		{"/purchase", `{"terminalId":"` + term + `","amount":1250,"cashbackAmount":"2.00","currency":"EUR"}`, "/cashbackAmount",
			"must be an integer in minor units, e.g. 1250 for 12.50 EUR"},
		{"/purchase", `{"terminalId":"` + term + `","amount":1250,"vatAmount":2.5,"currency":"SEK"}`, "/vatAmount",
			"must be an integer in minor units, e.g. 1250 for 12.50 SEK"},
		{"/refund", `{"terminalId":"` + term + `","amount":"12.50","currency":"SEK"}`, "/amount", sek},
		{"/refund", `{"terminalId":"` + term + `","amount":-5,"currency":"JPY"}`, "/amount",
			"must be an integer in minor units from 1 to 99999999, e.g. 1250 for 1250 JPY"},
	} {
		h := s.auth(s.token, s.key)
		h["Content-Type"] = "application/json"
		resp, body := s.do(t, "POST", s.online+"/in-store/api/v1"+tc.path, strings.NewReader(tc.body), h)
		var p struct {
			Errors []instore.FieldError `json:"errors"`
		}
		must(t, json.Unmarshal(body, &p))
		if resp.StatusCode != 400 || len(p.Errors) == 0 || p.Errors[0] != (instore.FieldError{Field: tc.field, Message: tc.msg}) {
			t.Errorf("%s %s = %d %s, want 400 with %s %q", tc.path, tc.body, resp.StatusCode, body, tc.field, tc.msg)
		}
	}
}

func TestErrorRows(t *testing.T) {
	s := startSandbox(t)
	ctx := context.Background()
	term := s.terminals[0]
	// Validation comes first, with per-field errors.
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"terminalId": term, "amount": 0, "currency": "SEK"}, "/amount"},
		{map[string]any{"terminalId": term, "amount": 100000000, "currency": "SEK"}, "/amount"},
		{map[string]any{"terminalId": term, "amount": 100, "cashbackAmount": 200, "currency": "SEK"}, "/cashbackAmount"},
		{map[string]any{"terminalId": term, "amount": 100, "currency": "sek"}, "/currency"},
		{map[string]any{"terminalId": term, "amount": 100, "currency": "SEK", "ecrReference": strings.Repeat("x", 65)}, "/ecrReference"},
		{map[string]any{"terminalId": term, "amount": "100", "currency": "SEK"}, "/amount"},
		{map[string]any{"terminalId": term, "amount": 100, "currency": "SEK", "tip": 5}, "/tip"},
	} {
		p := s.post(t, "/in-store/api/v1/purchase", tc.body, nil).problem(t, 400, "validation")
		if len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("purchase %v: errors %+v, want field %s", tc.body, p.Errors, tc.field)
		}
	}
	s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 100, "currency": "SEK", "paymentMethodId": 7}, nil).problem(t, 400, "WP22")
	s.purchase(t, "99999999", 100).problem(t, 403, "WP16")
	s.get(t, "/in-store/api/v1/transaction/txn_unknown").problem(t, 404, "WP04")
	// WP23: the virtual terminal goes offline.
	resp, body := s.post(t, "/sandbox/v1/terminals/"+term+"/offline", nil, nil).parts()
	if resp.StatusCode != 200 {
		t.Fatalf("offline = %d %s", resp.StatusCode, body)
	}
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return !ds[0].Online })
	s.purchase(t, term, 100).problem(t, 409, "WP23")
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).problem(t, 409, "WP23")
	s.post(t, "/sandbox/v1/terminals/"+term+"/online", nil, nil)
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[0].Online })
	// A payment method instead of a card.
	resp, body = s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 100, "currency": "SEK", "paymentMethodId": 0}, nil).parts()
	tx := s.final(t, reply{resp, body}.tx(t, 201).OnlineAPIRefID)
	if tx.Result == nil || tx.Result.PaymentMethod == nil || tx.Result.PaymentMethod.Code != "SWISH" {
		t.Errorf("payment method purchase result = %+v", tx.Result)
	}
	if r := s.post(t, "/sandbox/v1/terminals/"+term+"/printer", map[string]any{"statusId": 2}, nil); r.resp.StatusCode != 200 {
		t.Errorf("printer = %d %s", r.resp.StatusCode, r.body)
	}
	s.post(t, "/sandbox/v1/terminals/"+term+"/next-outcome", map[string]any{"statusId": 13}, nil).problem(t, 400, "validation")
	// next-outcome overrides the amount rule once.
	s.post(t, "/sandbox/v1/terminals/"+term+"/next-outcome", map[string]any{"statusId": 11}, nil)
	if got := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID).StatusID; got != 11 {
		t.Errorf("after next-outcome 11: %d", got)
	}
	if got := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID).StatusID; got != 0 {
		t.Errorf("the override applies once; then %d", got)
	}
	// WP03 last: an inactive merchant can do nothing but metadata.
	must(t, s.ad.SetMerchantActive(ctx, s.merchantRec.ID, false))
	s.purchase(t, term, 100).problem(t, 403, "WP03")
	s.get(t, "/in-store/api/v1/terminals").problem(t, 403, "WP03")
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).problem(t, 403, "WP03")
}

func TestIdempotency(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock, func(c *server.Config) { c.SimDelay = 300 * time.Millisecond })
	term := s.terminals[2]
	body := map[string]any{"terminalId": term, "amount": 2500, "currency": "SEK"}
	key := map[string]string{"Idempotency-Key": "order-4711"}
	// Concurrent duplicates: one transaction, every answer the same.
	var wg sync.WaitGroup
	refs := make([]string, 5)
	replayed := make([]string, 5)
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := s.post(t, "/in-store/api/v1/purchase", body, key).parts()
			if resp.StatusCode != 201 {
				t.Errorf("duplicate %d = %d %s", i, resp.StatusCode, b)
				return
			}
			var tx txJSON
			json.Unmarshal(b, &tx)
			refs[i], replayed[i] = tx.OnlineAPIRefID, resp.Header.Get("Idempotent-Replayed")
		}()
	}
	wg.Wait()
	n := 0
	for i := range refs {
		if refs[i] != refs[0] {
			t.Errorf("duplicate %d created %s, first %s", i, refs[i], refs[0])
		}
		if replayed[i] == "true" {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d answers were replays, want 4 of 5", n)
	}
	// Same key, other body: 422. Other key: a new purchase (WP09 now: one
	// runs).
	s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 2600, "currency": "SEK"}, key).problem(t, 422, "idempotency-conflict")
	s.final(t, refs[0])
	resp, b := s.post(t, "/in-store/api/v1/purchase", body, key).parts()
	if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(b), refs[0]) {
		t.Errorf("replay after completion = %d %s", resp.StatusCode, b)
	}
	s.post(t, "/in-store/api/v1/purchase", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}).problem(t, 400, "validation")
	// A refusal before anything started is not kept: the retry runs again.
	k2 := map[string]string{"Idempotency-Key": "bad-terminal"}
	for range 2 {
		r := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": "99999999", "amount": 1, "currency": "SEK"}, k2)
		r.problem(t, 403, "WP16")
		if got := r.resp.Header.Get("Idempotent-Replayed"); got != "" {
			t.Errorf("a refusal was replayed (Idempotent-Replayed %q), want it run again", got)
		}
	}
	// So the retry of a purchase refused while the terminal was offline
	// runs once it is back, under the same key.
	k3 := map[string]string{"Idempotency-Key": "while-offline"}
	s.post(t, "/sandbox/v1/terminals/"+term+"/offline", nil, nil)
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return !ds[2].Online })
	s.post(t, "/in-store/api/v1/purchase", body, k3).problem(t, 409, "WP23")
	s.post(t, "/sandbox/v1/terminals/"+term+"/online", nil, nil)
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[2].Online })
	back := s.post(t, "/in-store/api/v1/purchase", body, k3).tx(t, 201)
	if back.OnlineAPIRefID == refs[0] {
		t.Errorf("the retry after the terminal came back answered the first key's transaction")
	}
	s.final(t, back.OnlineAPIRefID)
	// An answer of a transaction the request created is kept, an error
	// included: WP25 (the virtual terminal does not acknowledge ...91).
	k4 := map[string]string{"Idempotency-Key": "no-ack"}
	noAck := map[string]any{"terminalId": term, "amount": 2591, "currency": "SEK"}
	first := advanceDuring(t, ck, testAck, func() reply { return s.post(t, "/in-store/api/v1/purchase", noAck, k4) }).problem(t, 504, "WP25")
	r := s.post(t, "/in-store/api/v1/purchase", noAck, k4)
	if p := r.problem(t, 504, "WP25"); p.OnlineAPIRefID != first.OnlineAPIRefID || r.resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry of a WP25 = %s replayed %q, want the replay of %s", p.OnlineAPIRefID, r.resp.Header.Get("Idempotent-Replayed"), first.OnlineAPIRefID)
	}
}

func TestLongPollWokenByChange(t *testing.T) {
	s := startSandbox(t, func(c *server.Config) { c.SimDelay = 500 * time.Millisecond })
	// The client gives up after 30 s, so a status request that sleeps out
	// its wait of 60 s fails this test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func(ref, query string) txJSON {
		t.Helper()
		resp, b := s.doCtx(ctx, t, "GET", fmt.Sprintf("%s/in-store/api/v1/transaction/%s?%s", s.online, ref, query), nil, s.auth(s.token, s.key))
		if resp.StatusCode != 200 {
			t.Fatalf("long-poll ?%s = %d %s", query, resp.StatusCode, b)
		}
		var cur txJSON
		must(t, json.Unmarshal(b, &cur))
		return cur
	}

	// wait alone holds while PENDING: one request sees the final status,
	// through the three progress stages of the virtual terminal.
	tx := s.purchase(t, s.terminals[0], 4200).tx(t, 201)
	if got := get(tx.OnlineAPIRefID, "wait=60"); got.StatusID != instore.StatusApproved || got.Progress != "FINAL" {
		t.Errorf("wait=60 answered status %d progress %s, want the final APPROVED", got.StatusID, got.Progress)
	}

	// With afterVersion, each change answers: the till sees the stages.
	tx = s.purchase(t, s.terminals[0], 4200).tx(t, 201)
	seen := map[instore.Progress]bool{}
	version := tx.Version
	for range 10 {
		cur := get(tx.OnlineAPIRefID, fmt.Sprintf("wait=60&afterVersion=%d", version))
		if cur.Version <= version {
			t.Fatalf("afterVersion=%d answered version %d (status %d) before any change", version, cur.Version, cur.StatusID)
		}
		version = cur.Version
		seen[cur.Progress] = true
		if cur.StatusID != instore.StatusPending {
			break
		}
	}
	if !seen["FINAL"] || !seen["WAITING_FOR_CARD"] && !seen["WAITING_FOR_PIN"] && !seen["AUTHORIZING"] {
		t.Errorf("long-poll with afterVersion saw progress %v, want stages and FINAL", seen)
	}
	// A version already passed answers at once; a bad one is refused.
	if got := get(tx.OnlineAPIRefID, "wait=60&afterVersion=0"); got.Version != version {
		t.Errorf("afterVersion=0 = version %d, want %d", got.Version, version)
	}
	s.get(t, "/in-store/api/v1/transaction/"+tx.OnlineAPIRefID+"?afterVersion=-1").problem(t, 400, "validation")
	s.get(t, "/in-store/api/v1/transaction/"+tx.OnlineAPIRefID+"?afterVersion=x").problem(t, 400, "validation")
}

// TestSandboxLogsHoldNoIdentifiers runs purchases, a cancel, a link and an
// unlink through the gateway and the virtual terminals and proves that no
// terminal ID, serial number, device secret, link code or merchant id
// reaches the log.
func TestSandboxLogsHoldNoIdentifiers(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock, func(c *server.Config) { c.SimDelay = 50 * time.Millisecond })
	term := s.terminals[0]
	s.final(t, s.purchase(t, term, 1011).tx(t, 201).OnlineAPIRefID)
	tx := s.purchase(t, term, 1094).tx(t, 201)
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
	s.final(t, tx.OnlineAPIRefID)
	advanceDuring(t, ck, testAck, func() reply { return s.purchase(t, s.terminals[1], 1091) }).problem(t, 504, "WP25")
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": s.terminals[2]}, nil)
	devs := s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[2].LinkCode != nil })
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": s.terminals[2], "linkCode": *devs[2].LinkCode}, nil)
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": s.terminals[2], "linkCode": "123456"}, nil)
	s.get(t, "/in-store/api/v1/terminal/"+s.terminals[1])
	s.srv.Close()
	logs := s.logs.String()
	secrets := append([]string{}, s.secrets...)
	secrets = append(secrets, s.terminals...)
	for _, d := range s.srv.SandboxDevices() {
		secrets = append(secrets, d.SerialNumber, d.Secret)
	}
	secrets = append(secrets, *devs[2].LinkCode)
	if !strings.Contains(logs, `"route":"POST /in-store/api/v1/purchase"`) {
		t.Fatalf("no access log captured")
	}
	for _, sec := range secrets {
		if strings.Contains(logs, sec) {
			t.Errorf("the log contains %q", sec)
		}
	}
}

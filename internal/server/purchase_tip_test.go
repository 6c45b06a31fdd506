package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
)

// TestTips drives tips end to end on both backends with the virtual
// terminals: each mode with the sandbox's defaults, next-tip, a tip above
// the amount refused by the terminal, the tip on the receipt, in the
// listing and in the events, refunds up to totalAmount less the cashback,
// and the 400s of a tip the API refuses.
func TestTips(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		term := s.terminals[0]
		sale := func(amount int64, tip map[string]any) txJSON {
			t.Helper()
			body := map[string]any{"terminalId": term, "amount": amount, "currency": "SEK", "tip": tip}
			created := s.post(t, "/in-store/api/v1/purchase", body, nil).tx(t, 201)
			pending := created.StatusID == instore.StatusPending // else the terminal was faster than the answer
			if created.Tip == nil || string(created.Tip.Mode) != tip["mode"] || pending && (created.TipAmount != 0 || created.TotalAmount != amount) {
				t.Errorf("created %v: tip %+v, tipAmount %d, totalAmount %d; want the tip asked and, while PENDING, 0 and the amount",
					tip, created.Tip, created.TipAmount, created.TotalAmount)
			}
			return s.final(t, created.OnlineAPIRefID)
		}
		nextTip := func(tip int64) {
			t.Helper()
			if r := s.post(t, "/sandbox/v1/terminals/"+term+"/next-tip", map[string]any{"tipAmount": tip}, nil); r.resp.StatusCode != 200 {
				t.Fatalf("next-tip %d = %d %s", tip, r.resp.StatusCode, r.body)
			}
		}
		check := func(name string, tx txJSON, tip int64) {
			t.Helper()
			if tx.StatusID != instore.StatusApproved || tx.TipAmount != tip || tx.TotalAmount != tx.Amount+tip {
				t.Errorf("%s: status %d, tipAmount %d, totalAmount %d; want APPROVED, %d, %d", name, tx.StatusID, tx.TipAmount, tx.TotalAmount, tip, tx.Amount+tip)
			}
		}
		prompt := map[string]any{"mode": "PROMPT", "suggestions": []int{15, 20}}
		enter := map[string]any{"mode": "ENTER_TOTAL"}
		check("PROMPT: the first suggestion", sale(1250, prompt), 188)
		check("ENTER_TOTAL: no tip", sale(1000, enter), 0)
		nextTip(300)
		check("ENTER_TOTAL: next-tip", sale(1000, enter), 300)
		nextTip(40)
		check("PROMPT: next-tip (other amount)", sale(1000, prompt), 40)
		fixed := sale(1000, map[string]any{"mode": "FIXED", "amount": 150})
		check("FIXED", fixed, 150)
		nextTip(1001)
		check("a tip above the amount: refused, not charged", sale(1000, enter), 0)
		if r := fixed.Result; r == nil || !strings.Contains(strings.Join(r.Receipt.Customer, "\n"), "SEK 11.50") {
			t.Errorf("FIXED's receipt lacks the total SEK 11.50: %+v", r)
		}
		ck := s.get(t, "/in-store/api/v1/transactions?limit=50")
		if !strings.Contains(string(ck.body), `"tipAmount":150,"totalAmount":1150`) {
			t.Errorf("the listing lacks the FIXED tip:\n%s", ck.body)
		}
		evs := s.waitEvents(t, "", func(evs []instore.EventWire) bool {
			for _, e := range evs {
				if strings.Contains(string(e.Data), `"onlineAPIRefId":"`+fixed.OnlineAPIRefID+`"`) && strings.Contains(string(e.Data), `"tipAmount":150`) {
					return true
				}
			}
			return false
		})
		if len(evs) == 0 {
			t.Error("no event carries the tip")
		}

		// Refunds: up to totalAmount less the cashback (1000 + 150 - 300).
		orig := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 1000, "cashbackAmount": 300,
			"currency": "SEK", "tip": map[string]any{"mode": "FIXED", "amount": 150}}, nil).tx(t, 201)
		check("FIXED with cashback", s.final(t, orig.OnlineAPIRefID), 150)
		refund := func(amount int64) reply {
			return s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": amount,
				"currency": "SEK", "originalOnlineAPIRefId": orig.OnlineAPIRefID}, nil)
		}
		if r := refund(851); r.resp.StatusCode != 400 || !strings.Contains(string(r.body), "(850; its cashback of 300 is not refundable)") {
			t.Errorf("refund of 851 = %d %s, want 400 naming 850 left", r.resp.StatusCode, r.body)
		}
		if r := s.final(t, refund(850).tx(t, 201).OnlineAPIRefID); r.StatusID != instore.StatusApproved || r.TipAmount != 0 {
			t.Errorf("refund of 850: status %d, tipAmount %d", r.StatusID, r.TipAmount)
		}
		refund(1).problem(t, 400, "validation")

		// What the API refuses.
		for _, tc := range []struct {
			path  string
			body  map[string]any
			field string
		}{
			{"/purchase", map[string]any{"mode": "FIXED", "amount": 1001}, "/tip/amount"},
			{"/purchase", map[string]any{"mode": "PROMPT", "suggestions": []int{5, 10, 15, 20}}, "/tip/suggestions"},
			{"/purchase", map[string]any{"mode": "PROMPT", "suggestions": []int{0}}, "/tip/suggestions/0"},
			{"/purchase", map[string]any{"mode": "ASK"}, "/tip/mode"},
			{"/purchase", map[string]any{"mode": "ENTER_TOTAL", "extra": 1}, "/tip/extra"},
			{"/refund", map[string]any{"mode": "ENTER_TOTAL"}, "/tip"},
		} {
			body := map[string]any{"terminalId": term, "amount": 1000, "currency": "SEK", "tip": tc.body}
			p := s.post(t, "/in-store/api/v1"+tc.path, body, nil).problem(t, 400, "validation")
			if len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
				t.Errorf("%s with tip %v: errors %+v, want field %s", tc.path, tc.body, p.Errors, tc.field)
			}
		}
		s.post(t, "/sandbox/v1/terminals/"+term+"/next-tip", map[string]any{"tipAmount": -1}, nil).problem(t, 400, "validation")
		s.post(t, "/sandbox/v1/terminals/"+term+"/next-tip", map[string]any{}, nil).problem(t, 400, "validation")
	})
}

// TestTipAmountRefused: a terminal that reports a tip the transaction did
// not allow (not the FIXED tip, above the amount, on a purchase without
// one) never loses its result: it is confirmed and stored with the tip the
// card was charged, the sale ends REVERSED and the terminal is sent a
// reversal at once; the session stays up.
func TestTipAmountRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s := rawEnv(t, store, func(c *server.Config) { c.TransactionDeadline = time.Minute })
		term, d := s.rawTerminal(t, "RAW-TIP")
		for _, tc := range []struct {
			tip       map[string]any
			tipAmount int64
		}{
			{map[string]any{"mode": "FIXED", "amount": 150}, 100},
			{map[string]any{"mode": "ENTER_TOTAL"}, 1001},
			{nil, 1},
		} {
			done := make(chan reply, 1)
			go func() {
				done <- s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 1000, "currency": "SEK", "tip": tc.tip}, nil)
			}()
			cmd := d.expect(protocol.TypePurchase)
			var p protocol.Payment
			must(t, json.Unmarshal(cmd.Data, &p))
			if (p.Tip == nil) != (tc.tip == nil) {
				t.Errorf("the command's tip = %+v, want %v", p.Tip, tc.tip)
			}
			d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
			(<-done).tx(t, 201)
			d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, TipAmount: tc.tipAmount})
			rev := d.expect(protocol.TypeReversal)
			var r protocol.Reversal
			if err := protocol.DecodeData(&rev, &r); err != nil || rev.Ref != cmd.Ref || r.Reason != instore.ReversalLateApproval {
				t.Errorf("tip %v, tipAmount %d: reversal %+v %+v (%v), want one of %s", tc.tip, tc.tipAmount, rev, r, err, cmd.Ref)
			}
			d.expect(protocol.TypeConfirm)
			d.confirm(rev)
			var got txJSON
			s.get(t, "/in-store/api/v1/transaction/"+cmd.Ref).decode(t, 200, &got)
			if got.StatusID != instore.StatusReversed || got.TipAmount != tc.tipAmount || got.TotalAmount != 1000+tc.tipAmount {
				t.Errorf("tip %v, tipAmount %d: status %d, tipAmount %d, totalAmount %d; want REVERSED with the tip charged",
					tc.tip, tc.tipAmount, got.StatusID, got.TipAmount, got.TotalAmount)
			}
			d.owedNothing()
		}
	})
}

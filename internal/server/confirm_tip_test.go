package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
)

// TestECRConfirmation drives ECR confirmation end to end on both backends,
// with a raw terminal and the fake clock: an approved sale that asked for
// confirmation is unconfirmed (listed by ?unconfirmed=true, neither
// refundable nor reversible) until the ECR confirms it (idempotent; its
// window then passes without effect); another one, not confirmed, is
// reversed on its terminal at its deadline although the server restarted
// in between (the timer re-armed from the store), ends REVERSED /
// AUTO_REVERSED with its timeline entry and its event, and answers a late
// confirm 409; a sale that did not ask answers 409 and shows no
// confirmation; bad windows are 400.
func TestECRConfirmation(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		ck, clock := newClock()
		s := owedEnv(t, store, clock)
		term, d := s.rawTerminal(t, "RAW-CONF")

		// sale runs a purchase with body extra to its approval.
		sale := func(extra map[string]any) txJSON {
			t.Helper()
			body := map[string]any{"terminalId": term, "amount": 4200, "currency": "SEK"}
			for k, v := range extra {
				body[k] = v
			}
			done := make(chan reply, 1)
			go func() { done <- s.post(t, "/in-store/api/v1/purchase", body, nil) }()
			cmd := d.expect(protocol.TypePurchase)
			d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
			(<-done).tx(t, 201)
			d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, AuthorizationCode: "A1"})
			return s.final(t, cmd.Ref)
		}
		confirm := func(ref string) reply {
			return s.post(t, "/in-store/api/v1/transaction/"+ref+"/confirm", nil, nil)
		}
		unconfirmed := func() []string {
			t.Helper()
			// A listing ends now, exclusive: move the fake clock past the
			// sale's creation.
			ck.Advance(time.Millisecond)
			var l struct{ Transactions []txJSON }
			s.get(t, "/in-store/api/v1/transactions?unconfirmed=true").decode(t, 200, &l)
			var ids []string
			for _, x := range l.Transactions {
				ids = append(ids, x.OnlineAPIRefID)
			}
			return ids
		}

		for _, bad := range []any{9, 601, "30", 30.5} {
			s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 100, "currency": "SEK",
				"confirmWithinSeconds": bad}, nil).problem(t, 400, "validation")
		}
		s.get(t, "/in-store/api/v1/transactions?unconfirmed=yes").problem(t, 400, "validation")

		// 1. Confirmed in time.
		a := sale(map[string]any{"confirmWithinSeconds": 30})
		c := a.Confirmation
		if a.StatusID != instore.StatusApproved || c == nil || c.State != instore.ConfirmPending || c.WithinSeconds != 30 ||
			c.Deadline == nil || c.ConfirmedAt != nil || !c.Deadline.Equal(a.CompletedAt.Add(30*time.Second)) {
			t.Fatalf("approved sale %+v confirmation %+v; want PENDING until its approval + 30 s", a, c)
		}
		if got := unconfirmed(); !slices.Equal(got, []string{a.OnlineAPIRefID}) {
			t.Fatalf("unconfirmed = %v, want [%s]", got, a.OnlineAPIRefID)
		}
		s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 100, "currency": "SEK",
			"originalOnlineAPIRefId": a.OnlineAPIRefID}, nil).problem(t, 409, "conflict")
		s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": a.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
		ok := confirm(a.OnlineAPIRefID).tx(t, 200)
		if ok.StatusID != instore.StatusApproved || ok.Confirmation == nil || ok.Confirmation.State != instore.ConfirmConfirmed ||
			ok.Confirmation.ConfirmedAt == nil || ok.Version != a.Version+1 {
			t.Fatalf("confirmed: %+v %+v", ok, ok.Confirmation)
		}
		again := confirm(a.OnlineAPIRefID).tx(t, 200)
		if again.Version != ok.Version || again.Confirmation.State != instore.ConfirmConfirmed {
			t.Fatalf("confirm again changed it: %+v, want version %d", again, ok.Version)
		}
		if got := unconfirmed(); len(got) != 0 {
			t.Fatalf("unconfirmed after the confirm = %v", got)
		}
		ck.Advance(31 * time.Second) // its window passes: nothing happens
		if x := s.transaction(t, a.OnlineAPIRefID); x.StatusID != instore.StatusApproved || x.Version != ok.Version {
			t.Fatalf("a confirmed sale after its window: %+v", x)
		}

		// 2. Not confirmed: reversed at its deadline, across a restart.
		b := sale(map[string]any{"confirmWithinSeconds": 10})
		if got := unconfirmed(); !slices.Equal(got, []string{b.OnlineAPIRefID}) {
			t.Fatalf("unconfirmed = %v, want [%s]", got, b.OnlineAPIRefID)
		}
		d.conn.Close()
		s.restart(t, nil)
		d = s.redial(t, d)
		// Its hello answered (nothing is owed yet), so that the reversal
		// comes once, from the timer, not again from the hello's resend.
		d.owedNothing()
		advance(t, ck, b.Confirmation.Deadline.Sub(ck.Now())) // the timer Recover re-armed
		rev := d.expect(protocol.TypeReversal)
		var r protocol.Reversal
		if err := protocol.DecodeData(&rev, &r); err != nil || rev.Ref != b.OnlineAPIRefID || r != (protocol.Reversal{Reason: instore.ReversalConfirmTimeout}) {
			t.Fatalf("reversal %+v %+v (%v), want CONFIRM_TIMEOUT of %s", rev, r, err, b.OnlineAPIRefID)
		}
		d.confirm(rev)
		d.owedNothing()
		x := s.transaction(t, b.OnlineAPIRefID)
		if x.StatusID != instore.StatusReversed || x.Confirmation == nil || x.Confirmation.State != instore.ConfirmAutoReversed || x.Confirmation.ConfirmedAt != nil {
			t.Fatalf("unconfirmed sale after its window: %+v %+v; want REVERSED, AUTO_REVERSED", x, x.Confirmation)
		}
		late := confirm(b.OnlineAPIRefID)
		late.problem(t, 409, "not-confirmable")
		if !strings.Contains(string(late.body), "has been reversed") {
			t.Errorf("a late confirm: %s, want a detail saying the sale was reversed", late.body)
		}
		var tl struct{ Events []instore.TransactionEvent }
		s.get(t, "/in-store/api/v1/transaction/"+b.OnlineAPIRefID+"/events").decode(t, 200, &tl)
		last := tl.Events[len(tl.Events)-1]
		if last.Kind != instore.EventAutoReversed || last.Actor != instore.ActorTimer || last.StatusAfter != "REVERSED" || last.Version != x.Version {
			t.Fatalf("last timeline entry %+v, want AUTO_REVERSED by the timer", last)
		}
		evs := s.waitEvents(t, "&types=transaction.confirmed,transaction.auto_reversed", func(evs []instore.EventWire) bool { return len(evs) == 2 })
		for i, want := range []struct {
			typ     instore.EventType
			ref     string
			version int64
		}{{instore.EventTransactionConfirmed, a.OnlineAPIRefID, ok.Version}, {instore.EventTransactionAutoReversed, b.OnlineAPIRefID, x.Version}} {
			var v txJSON
			must(t, json.Unmarshal(evs[i].Data, &v))
			if evs[i].Type != want.typ || v.OnlineAPIRefID != want.ref || v.Version != want.version {
				t.Errorf("event %d: %s of %s v%d, want %s of %s v%d", i, evs[i].Type, v.OnlineAPIRefID, v.Version, want.typ, want.ref, want.version)
			}
		}

		// 3. A sale that did not ask for confirmation.
		plain := sale(nil)
		if plain.Confirmation != nil {
			t.Errorf("a sale without confirmWithinSeconds shows a confirmation %+v", plain.Confirmation)
		}
		confirm(plain.OnlineAPIRefID).problem(t, 409, "not-confirmable")
		confirm("txn_nope").problem(t, 404, "WP04")

		// 4. Confirmed, then reversed by the ECR: a confirm again is 409
		// (the sale no longer stands), not the 200 of a confirmed sale.
		c4 := sale(map[string]any{"confirmWithinSeconds": 30})
		confirm(c4.OnlineAPIRefID).tx(t, 200)
		rc := make(chan reply, 1)
		go func() {
			rc <- s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": c4.OnlineAPIRefID}, nil)
		}()
		rcmd := d.expect(protocol.TypeReversal)
		d.send(protocol.TypeAck, "", "", rcmd.Ref, nil)
		(<-rc).tx(t, 201)
		d.send(protocol.TypeResult, "", "", rcmd.Ref, protocol.Result{StatusID: instore.StatusApproved})
		s.final(t, rcmd.Ref)
		if x := s.get(t, "/in-store/api/v1/transaction/"+c4.OnlineAPIRefID).tx(t, 200); x.StatusID != instore.StatusReversed ||
			x.Confirmation == nil || x.Confirmation.State != instore.ConfirmConfirmed {
			t.Fatalf("confirmed sale after its reversal: %+v %+v; want REVERSED, still CONFIRMED", x, x.Confirmation)
		}
		gone := confirm(c4.OnlineAPIRefID)
		gone.problem(t, 409, "not-confirmable")
		if !strings.Contains(string(gone.body), "confirmed and has since been reversed") {
			t.Errorf("a confirm of a confirmed, then reversed sale: %s, want a detail saying so", gone.body)
		}
	})
}

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

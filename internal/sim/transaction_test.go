package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

var maskedPAN = regexp.MustCompile(`^[0-9]{6}\*{6}[0-9]{4}$`)

func TestAmountRules(t *testing.T) {
	_, _, c := linked(t, nil)
	tests := []struct {
		amount int64
		want   instore.TransactionStatus
	}{
		{1000, instore.StatusApproved},
		{1299, instore.StatusApproved},
		{1202, instore.StatusApproved}, // 02 is the ECR's cancel, not an amount rule
		{1250, instore.StatusApproved},
		{1290, instore.StatusApproved},
		{1295, instore.StatusApproved},
		{101, instore.StatusAbortedByCardholder},
		{103, instore.StatusTerminalIsBusy},
		{104, instore.StatusCardHasExpired},
		{105, instore.StatusInvalidCard},
		{106, instore.StatusCardIsBlocked},
		{107, instore.StatusOfflineQueueIsFull},
		{108, instore.StatusTechnicalError},
		{109, instore.StatusTerminalIsOffline},
		{110, instore.StatusTerminalMustUpdate},
		{111, instore.StatusTransactionDeclined},
		{112, instore.StatusWrongPIN},
	}
	ids := map[string]bool{}
	for i, tc := range tests {
		ref := fmt.Sprintf("ref-%d", i)
		id := c.purchase(ref, payment(tc.amount))
		ack := c.expect(protocol.TypeAck)
		if ack.Re != id || ack.Ref != ref {
			t.Fatalf("amount %d: ack re=%q ref=%q, want %q %q", tc.amount, ack.Re, ack.Ref, id, ref)
		}
		env, res, stages := c.result(ref)
		if res.StatusID != tc.want {
			t.Errorf("amount %d: statusId = %d, want %d", tc.amount, res.StatusID, tc.want)
		}
		if want := []instore.Progress{StageWaitingForCard, StageWaitingForPIN, StageAuthorizing}; !slices.Equal(stages, want) {
			t.Errorf("amount %d: stages %v, want %v", tc.amount, stages, want)
		}
		for _, e := range []protocol.Envelope{ack, env} {
			if ids[e.ID] || e.ID == "" || len(e.ID) > protocol.MaxIDLen {
				t.Errorf("message id %q repeated, empty or too long", e.ID)
			}
			ids[e.ID] = true
		}
		switch tc.want {
		case instore.StatusApproved, instore.StatusTransactionDeclined, instore.StatusWrongPIN:
			if !maskedPAN.MatchString(res.MaskedPAN) || (res.CardBrand != "VISA" && res.CardBrand != "MASTERCARD") ||
				(res.EntryMode != EntryChip && res.EntryMode != EntryContactless) {
				t.Errorf("amount %d: card data %q %q %q, want a brand, a 6+4 masked PAN and an entry mode", tc.amount, res.CardBrand, res.MaskedPAN, res.EntryMode)
			}
			if len(res.MerchantReceipt) == 0 || len(res.CustomerReceipt) == 0 {
				t.Errorf("amount %d: no receipts", tc.amount)
			}
		case instore.StatusTechnicalError, instore.StatusTerminalIsBusy:
			if res.MaskedPAN != "" || res.CardBrand != "" || res.AuthorizationCode != "" {
				t.Errorf("amount %d: card data in %+v", tc.amount, res)
			}
		}
		if gotCode, wantCode := res.AuthorizationCode != "", tc.want == instore.StatusApproved; gotCode != wantCode || (gotCode && len(res.AuthorizationCode) != 6) {
			t.Errorf("amount %d: authorization code %q", tc.amount, res.AuthorizationCode)
		}
		c.confirm(env.ID)
	}
}

func TestScreensDuringTransaction(t *testing.T) {
	_, r, c := linked(t, cardWaits)
	c.purchase("ref-1", payment(1250))
	c.expect(protocol.TypeAck)
	c.expect(protocol.TypeProgress)
	waitState(t, r.Terminal, "asking for the card", func(s State) bool { return s.Screen == "SEK 12.50 - Present card" })
	c.cancel("ref-1", instore.CancelByECR)
	c.result("ref-1")
	waitState(t, r.Terminal, "showing the outcome", func(s State) bool { return s.Screen == "ABORTED BY CASHIER" })

	_, r2, c2 := link(t, nil)
	_ = r2.SetNextOutcome(instore.StatusWrongPIN)
	c2.purchase("ref-2", payment(1000))
	c2.expect(protocol.TypeAck)
	c2.result("ref-2")
	waitState(t, r2.Terminal, "WRONG PIN", func(s State) bool { return s.Screen == "WRONG PIN" })
	c2.purchase("ref-3", payment(1011))
	c2.expect(protocol.TypeAck)
	c2.result("ref-3")
	waitState(t, r2.Terminal, "DECLINED", func(s State) bool { return s.Screen == "DECLINED" })
}

func TestNeverAcknowledge91(t *testing.T) {
	_, r, c := linked(t, nil)
	c.purchase("ref-91", payment(1291))
	c.cancel("ref-91", instore.CancelAckTimeout)
	// The terminal handles messages in order: had it acknowledged or
	// answered ref-91, that would come before the next ack.
	id := c.purchase("ref-next", payment(1000))
	c.expectAck(id, "ref-next")
	if _, res, _ := c.result("ref-next"); res.StatusID != instore.StatusApproved {
		t.Errorf("statusId = %d, want 0: the terminal must not be held by ref-91", res.StatusID)
	}
	if st := r.State(); st.Screen == "" {
		t.Errorf("empty screen")
	}
}

// forEachCancel runs test as a parallel subtest for each reason of a
// cancel, with the status a cancelled purchase ends in (ACK_TIMEOUT: the
// purchase was acknowledged, so the terminal reports it).
func forEachCancel(t *testing.T, test func(t *testing.T, reason string, want instore.TransactionStatus)) {
	for _, tc := range []struct {
		reason string
		want   instore.TransactionStatus
	}{
		{instore.CancelByECR, instore.StatusAbortedByCashier},
		{instore.CancelDeadline, instore.StatusTechnicalError},
		{instore.CancelAckTimeout, instore.StatusTechnicalError},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			test(t, tc.reason, tc.want)
		})
	}
}

func TestNeverAnswer92(t *testing.T) {
	t.Parallel()
	forEachCancel(t, func(t *testing.T, reason string, want instore.TransactionStatus) {
		_, _, c := link(t, nil)
		id := c.purchase("ref-92", payment(1292))
		c.expectAck(id, "ref-92")
		if p := c.expect(protocol.TypeProgress); p.Ref != "ref-92" {
			t.Fatalf("progress for %q", p.Ref)
		}
		// While it waits, it is busy: a second command is acknowledged
		// and answered TERMINAL_IS_BUSY, and ref-92 still has no result.
		id2 := c.purchase("ref-other", payment(1000))
		c.expectAck(id2, "ref-other")
		env, res, _ := c.result("ref-other")
		if res.StatusID != instore.StatusTerminalIsBusy {
			t.Fatalf("second command: statusId = %d, want 3", res.StatusID)
		}
		c.confirm(env.ID)

		c.cancel("ref-92", reason)
		if _, res, _ := c.result("ref-92"); res.StatusID != want {
			t.Errorf("after cancel %s: statusId = %d, want %d", reason, res.StatusID, want)
		}
	})
}

func TestDropSession93(t *testing.T) {
	g, r, c := linked(t, nil)
	p := payment(1293)
	p.Deadline = time.Now().Add(800 * time.Millisecond) // the session stays down ~200 ms
	id := c.purchase("ref-93", p)
	c.expectAck(id, "ref-93")
	for _, env := range c.waitClosed() {
		if env.Type == protocol.TypeResult {
			t.Fatalf("result %+v before the session dropped", env)
		}
	}

	c2 := g.accept(t)
	c2.link("10000001")
	env, res, _ := c2.result("ref-93")
	if res.StatusID != instore.StatusApproved || res.AuthorizationCode == "" {
		t.Errorf("after reconnecting: %+v, want APPROVED with an authorization code", res)
	}
	c2.confirm(env.ID)
	waitState(t, r.Terminal, "online", func(s State) bool { return s.Online })

	// The terminal is free again.
	id = c2.purchase("ref-after", payment(1000))
	c2.expectAck(id, "ref-after")
	if _, res, _ := c2.result("ref-after"); res.StatusID != instore.StatusApproved {
		t.Errorf("next purchase: statusId = %d, want 0", res.StatusID)
	}
}

func TestLateApproval94(t *testing.T) {
	t.Parallel()
	t.Run("cancel before half the deadline", func(t *testing.T) {
		_, _, c := linked(t, nil)
		id := c.purchase("ref-94", payment(1294)) // approves after a minute
		c.expectAck(id, "ref-94")
		c.expect(protocol.TypeProgress)
		c.cancel("ref-94", instore.CancelByECR)
		if _, res, _ := c.result("ref-94"); res.StatusID != instore.StatusAbortedByCashier {
			t.Errorf("statusId = %d, want 2", res.StatusID)
		}
	})
	t.Run("approved after half the deadline", func(t *testing.T) {
		_, _, c := linked(t, nil)
		p := payment(1294)
		p.Deadline = time.Now().Add(400 * time.Millisecond)
		id := c.purchase("ref-94", p)
		c.expectAck(id, "ref-94")
		if _, res, _ := c.result("ref-94"); res.StatusID != instore.StatusApproved {
			t.Errorf("statusId = %d, want 0", res.StatusID)
		}
	})
}

func TestSetNextOutcome(t *testing.T) {
	_, r, c := linked(t, nil)
	for _, bad := range []instore.TransactionStatus{-1, 13, 14} {
		if err := r.SetNextOutcome(bad); err == nil {
			t.Errorf("SetNextOutcome(%d) = nil, want an error", bad)
		}
	}
	if err := r.SetNextOutcome(instore.StatusTransactionDeclined); err != nil {
		t.Fatalf("SetNextOutcome(11) = %v", err)
	}
	steps := []struct {
		amount int64
		want   instore.TransactionStatus
	}{
		{1000, instore.StatusTransactionDeclined}, // overridden
		{1000, instore.StatusApproved},            // once only
	}
	for i, s := range steps {
		ref := fmt.Sprintf("ref-%d", i)
		c.expectAck(c.purchase(ref, payment(s.amount)), ref)
		if _, res, _ := c.result(ref); res.StatusID != s.want {
			t.Errorf("purchase %d: statusId = %d, want %d", i, res.StatusID, s.want)
		}
	}
	// The override beats the amount rule, even 91.
	if err := r.SetNextOutcome(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	c.expectAck(c.purchase("ref-91", payment(1291)), "ref-91")
	if _, res, _ := c.result("ref-91"); res.StatusID != instore.StatusApproved {
		t.Errorf("overridden 91: statusId = %d, want 0", res.StatusID)
	}
}

func TestCancelReasons(t *testing.T) {
	t.Parallel()
	forEachCancel(t, func(t *testing.T, reason string, want instore.TransactionStatus) {
		_, r, c := link(t, cardWaits)
		c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
		c.expect(protocol.TypeProgress)
		c.cancel("ref-1", reason)
		env, res, _ := c.result("ref-1")
		if res.StatusID != want {
			t.Errorf("statusId = %d, want %d", res.StatusID, want)
		}
		if res.MaskedPAN != "" || res.AuthorizationCode != "" {
			t.Errorf("card data in an aborted result: %+v", res)
		}
		c.confirm(env.ID)
		// Free again.
		if err := r.SetNextOutcome(instore.StatusApproved); err != nil {
			t.Fatal(err)
		}
		c.expectAck(c.purchase("ref-2", payment(1000)), "ref-2")
		c.expect(protocol.TypeProgress)
		c.cancel("ref-2", instore.CancelByECR)
		c.result("ref-2")
	})
	t.Run("after the result", func(t *testing.T) {
		_, _, c := linked(t, nil)
		c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
		first, _, _ := c.result("ref-1")
		c.cancel("ref-1", instore.CancelByECR)
		again := c.expect(protocol.TypeResult)
		if again.ID != first.ID || again.Ref != "ref-1" {
			t.Errorf("resent result id=%q ref=%q, want the same id %q", again.ID, again.Ref, first.ID)
		}
		if res := decodeResult(t, again); res.StatusID != instore.StatusApproved {
			t.Errorf("statusId = %d, want the approval to stand", res.StatusID)
		}
	})
}

func TestBusy(t *testing.T) {
	_, r, c := linked(t, cardWaits)
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.expect(protocol.TypeProgress)
	id := c.purchase("ref-2", payment(1000))
	c.expectAck(id, "ref-2")
	_, res, stages := c.result("ref-2")
	if res.StatusID != instore.StatusTerminalIsBusy || len(stages) != 0 {
		t.Errorf("second command: statusId %d, stages %v; want 3 and none", res.StatusID, stages)
	}
	if st := r.State(); st.Screen != "SEK 10.00 - Present card" {
		t.Errorf("screen %q, want the first transaction's", st.Screen)
	}
	// A repeated command is acknowledged again, not refused as busy.
	id = c.purchase("ref-1", payment(1000))
	c.expectAck(id, "ref-1")
	c.cancel("ref-1", instore.CancelByECR)
	if _, res, _ := c.result("ref-1"); res.StatusID != instore.StatusAbortedByCashier {
		t.Errorf("statusId = %d, want 2", res.StatusID)
	}
}

func TestPaymentMethod(t *testing.T) {
	_, _, c := linked(t, nil)
	p := payment(1000)
	method := 1
	p.PaymentMethodID = &method
	c.expectAck(c.purchase("ref-1", p), "ref-1")
	_, res, stages := c.result("ref-1")
	if res.StatusID != 0 || res.PaymentMethodID == nil || *res.PaymentMethodID != 1 || res.EntryMode != EntryApp ||
		res.CardBrand != "" || res.MaskedPAN != "" {
		t.Errorf("result %+v, want approved with payment method 1, entry mode APP and no card", res)
	}
	if want := []instore.Progress{StageWaitingForCard, StageAuthorizing}; !slices.Equal(stages, want) {
		t.Errorf("stages %v, want %v", stages, want)
	}
	if !slices.ContainsFunc(res.MerchantReceipt, func(l string) bool { return strings.HasPrefix(l, "Payment method") && strings.HasSuffix(l, " 1") }) {
		t.Errorf("merchant receipt has no payment method line:\n%s", strings.Join(res.MerchantReceipt, "\n"))
	}
}

func TestRefund(t *testing.T) {
	_, r, c := linked(t, cardWaits)
	p := payment(2500)
	p.OriginalRef = "ref-0"
	id := c.send(protocol.TypeRefund, "", "ref-1", p)
	c.expectAck(id, "ref-1")
	waitState(t, r.Terminal, "refund screen", func(s State) bool { return s.Screen == "Refund SEK 25.00 - Present card" })
	c.cancel("ref-1", instore.CancelByECR)
	c.result("ref-1")
}

func TestReceiptsOverTheProtocol(t *testing.T) {
	_, _, c := linked(t, nil)
	p := payment(1250)
	vat := int64(250)
	p.VATAmount, p.CashbackAmount = &vat, 200
	c.expectAck(c.purchase("ref-receipt", p), "ref-receipt")
	_, res, _ := c.result("ref-receipt")
	checkReceipts(t, res, "ref-receipt")
	for _, want := range []string{"SEK 12.50", "SEK 2.00", "SEK 2.50", "10000001"} {
		if !slices.ContainsFunc(res.MerchantReceipt, func(l string) bool { return strings.HasSuffix(l, " "+want) }) {
			t.Errorf("merchant receipt lacks %q:\n%s", want, strings.Join(res.MerchantReceipt, "\n"))
		}
	}
}

func TestReversal(t *testing.T) {
	_, r, c := linked(t, nil)
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	env, _, _ := c.result("ref-1")
	c.confirm(env.ID)

	// A late approval the service reverses on its own: confirmed, no ack
	// and no result (the next message is the ack of the next command).
	id := c.send(protocol.TypeReversal, "", "ref-1", protocol.Reversal{Reason: instore.ReversalLateApproval})
	c.expectConfirm(id, "ref-1")
	waitState(t, r.Terminal, "REVERSED", func(s State) bool { return s.Screen == "REVERSED" })
	c.expectAck(c.purchase("ref-2", payment(1000)), "ref-2")
	c.result("ref-2")

	// The ECR's reversal is a transaction of its own: ack and result.
	id = c.send(protocol.TypeReversal, "", "ref-rev", protocol.Reversal{Reason: "ECR"})
	c.expectAck(id, "ref-rev")
	first, res, _ := c.result("ref-rev")
	if res.StatusID != instore.StatusApproved || res.MaskedPAN != "" || res.AuthorizationCode != "" {
		t.Errorf("reversal result %+v, want APPROVED without card data", res)
	}
	if !slices.Contains(res.MerchantReceipt, "REVERSAL") || !slices.Contains(res.CustomerReceipt, centered("APPROVED")) {
		t.Errorf("reversal receipts:\n%s\n\n%s", strings.Join(res.MerchantReceipt, "\n"), strings.Join(res.CustomerReceipt, "\n"))
	}
	// Repeated: the same result again.
	id = c.send(protocol.TypeReversal, "", "ref-rev", protocol.Reversal{Reason: "ECR"})
	c.expectAck(id, "ref-rev")
	if again := c.expect(protocol.TypeResult); again.ID != first.ID {
		t.Errorf("repeated reversal: result id %q, want %q", again.ID, first.ID)
	}
}

// TestCommandRightAfterCancel: a cancel stops the transaction before the
// next message is read, so a command the gateway sends right behind it
// (the gateway sends the cancels of the transactions it ended before a new
// command) finds the terminal free, not TERMINAL_IS_BUSY.
func TestCommandRightAfterCancel(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{instore.CancelDeadline, instore.CancelAckTimeout, instore.CancelByECR} {
		t.Run(reason, func(t *testing.T) {
			_, _, c := linked(t, cardWaits)
			ref := "ref-0"
			c.expectAck(c.purchase(ref, payment(1000)), ref)
			c.expect(protocol.TypeProgress)
			for i := 1; i <= 10; i++ {
				next := fmt.Sprintf("ref-%d", i)
				c.cancel(ref, reason)
				id := c.purchase(next, payment(1000))
				for started := false; !started; {
					env := c.next()
					switch {
					case env.Type == protocol.TypeAck && env.Ref == next && env.Re != id:
						t.Fatalf("ack of %s names %q, want %q", next, env.Re, id)
					case env.Type == protocol.TypeResult && env.Ref == next:
						t.Fatalf("round %d: the command right after the cancel of %s was answered %d; want it started (TERMINAL_IS_BUSY is 3)",
							i, ref, decodeResult(t, env).StatusID)
					case env.Type == protocol.TypeProgress && env.Ref == next:
						started = true
					}
				}
				ref = next
			}
		})
	}
}

// TestCommandAfterItsCancel: a command that comes after its own cancel (a
// resend after a reconnect that crossed the service's end of it) is
// dropped, not started: the next command finds the terminal free.
func TestCommandAfterItsCancel(t *testing.T) {
	_, _, c := linked(t, cardWaits)
	c.expectConfirm(c.cancel("ref-ended", instore.CancelAckTimeout), "ref-ended")
	c.purchase("ref-ended", payment(1000))
	id := c.purchase("ref-next", payment(1000))
	for started := false; !started; {
		env := c.next()
		switch {
		case env.Ref == "ref-ended":
			t.Fatalf("the command after its cancel was taken up: %s", env.Type)
		case env.Type == protocol.TypeAck && env.Re != id:
			t.Fatalf("ack re=%q, want %q", env.Re, id)
		case env.Type == protocol.TypeResult:
			t.Fatalf("the next command was answered %d; want it started", decodeResult(t, env).StatusID)
		case env.Type == protocol.TypeProgress:
			started = true
		}
	}
}

// Receipts.

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{1250, "SEK", "SEK 12.50"},
		{5, "SEK", "SEK 0.05"},
		{0, "EUR", "EUR 0.00"},
		{99999999, "EUR", "EUR 999999.99"},
		{1250, "JPY", "JPY 1250"},
		{7, "KRW", "KRW 7"},
		{1250, "KWD", "KWD 1.250"},
		{5, "BHD", "BHD 0.005"},
		{1250, "UGX", "UGX 1250"},
		{1250, "PYG", "PYG 1250"},
		{12345, "CLF", "CLF 1.2345"},
		{1250, "IQD", "IQD 1.250"},
		{1250, "sek", "SEK 12.50"},
		{-1250, "SEK", "SEK -12.50"},
	} {
		if got := formatAmount(tc.amount, tc.currency); got != tc.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
}

func TestMaskPAN(t *testing.T) {
	t.Parallel()
	for pan, want := range map[string]string{
		"4761739001010119":    "476173******0119",
		"5413330089010434":    "541333******0434",
		"6011000990139424123": "601100*********4123",
		"1234567890":          "**********",
	} {
		if got := MaskPAN(pan); got != want {
			t.Errorf("MaskPAN(%q) = %q, want %q", pan, got, want)
		}
	}
	if got := lastFour("476173******0119"); got != "************0119" {
		t.Errorf("lastFour = %q, want ************0119", got)
	}
}

// checkReceipts checks the shape of both copies of an approved card
// payment: line width, the PAN as each copy may show it, outcome, ref.
func checkReceipts(t *testing.T, res protocol.Result, ref string) {
	t.Helper()
	first6, last4 := res.MaskedPAN[:6], res.MaskedPAN[len(res.MaskedPAN)-4:]
	for name, lines := range map[string][]string{"merchant": res.MerchantReceipt, "customer": res.CustomerReceipt} {
		text := strings.Join(lines, "\n")
		for _, l := range lines {
			if n := len([]rune(l)); n > ReceiptWidth {
				t.Errorf("%s receipt line %q has %d characters, want <= %d", name, l, n, ReceiptWidth)
			}
		}
		if !strings.Contains(lines[0], "instore virtual terminal") {
			t.Errorf("%s receipt starts %q, want the header", name, lines[0])
		}
		for _, want := range []string{"APPROVED", ref, res.CardBrand, res.EntryMode, res.AuthorizationCode, " UTC"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s receipt lacks %q:\n%s", name, want, text)
			}
		}
	}
	merchant, customer := strings.Join(res.MerchantReceipt, "\n"), strings.Join(res.CustomerReceipt, "\n")
	if !strings.Contains(merchant, res.MaskedPAN) {
		t.Errorf("merchant receipt lacks the 6+4 masked PAN %q:\n%s", res.MaskedPAN, merchant)
	}
	if !strings.Contains(customer, "************"+last4) || strings.Contains(customer, first6) {
		t.Errorf("customer receipt must show the last 4 digits only (%q):\n%s", last4, customer)
	}
}

func TestReceipts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	vat := int64(250)
	tx := &txn{ref: "01JQ7ZK3T8YV5N2M4P6R8S0T2W", kind: protocol.TypePurchase,
		pay: protocol.Payment{Amount: 1250, CashbackAmount: 200, VATAmount: &vat, Currency: "SEK", ECRReference: "ORDER-4711"}}

	res := buildResult(tx, instore.StatusApproved, "10000001", now)
	checkReceipts(t, res, tx.ref)
	for _, want := range []string{
		"Amount                         SEK 12.50",
		"Cashback                        SEK 2.00",
		"VAT                             SEK 2.50",
		"Terminal                        10000001",
		"2026-03-01 12:30:00 UTC",
		"ECR reference                 ORDER-4711",
	} {
		if !slices.Contains(res.MerchantReceipt, want) {
			t.Errorf("merchant receipt lacks line %q:\n%s", want, strings.Join(res.MerchantReceipt, "\n"))
		}
	}

	declined := buildResult(tx, instore.StatusTransactionDeclined, "10000001", now)
	if declined.AuthorizationCode != "" || !slices.Contains(declined.MerchantReceipt, centered("DECLINED")) {
		t.Errorf("declined: auth code %q, receipt:\n%s", declined.AuthorizationCode, strings.Join(declined.MerchantReceipt, "\n"))
	}
	if !slices.Contains(buildResult(tx, instore.StatusWrongPIN, "", now).CustomerReceipt, centered("WRONG PIN")) {
		t.Errorf("wrong PIN receipt lacks WRONG PIN")
	}

	// Other outcomes: the outcome lines only.
	tech := buildResult(tx, instore.StatusTechnicalError, "10000001", now)
	want := []string{centered("instore virtual terminal"), centered("MERCHANT COPY"), centered("TECHNICAL ERROR"), "Reference     01JQ7ZK3T8YV5N2M4P6R8S0T2W"}
	if !slices.Equal(tech.MerchantReceipt, want) {
		t.Errorf("technical error receipt:\n%q\nwant\n%q", tech.MerchantReceipt, want)
	}
	if tech.MaskedPAN != "" || tech.EntryMode != "" {
		t.Errorf("technical error carries card data: %+v", tech)
	}

	// A long reference wraps; amounts in other currencies.
	long := &txn{ref: strings.Repeat("r", protocol.MaxIDLen), kind: protocol.TypeRefund,
		pay: protocol.Payment{Amount: 1250, Currency: "JPY"}}
	res = buildResult(long, instore.StatusApproved, "10000001", now)
	checkReceipts(t, protocol.Result{MaskedPAN: res.MaskedPAN, CardBrand: res.CardBrand, EntryMode: res.EntryMode,
		AuthorizationCode: res.AuthorizationCode, MerchantReceipt: res.MerchantReceipt, CustomerReceipt: res.CustomerReceipt}, "")
	if !slices.Contains(res.MerchantReceipt, "REFUND") || !slices.ContainsFunc(res.MerchantReceipt, func(l string) bool { return strings.HasSuffix(l, " JPY 1250") }) {
		t.Errorf("JPY refund receipt:\n%s", strings.Join(res.MerchantReceipt, "\n"))
	}
	kwd := &txn{ref: "r1", kind: protocol.TypePurchase, pay: protocol.Payment{Amount: 1250, Currency: "KWD"}}
	if r := buildResult(kwd, 0, "", now); !slices.ContainsFunc(r.CustomerReceipt, func(l string) bool { return strings.HasSuffix(l, " KWD 1.250") }) {
		t.Errorf("KWD receipt:\n%s", strings.Join(r.CustomerReceipt, "\n"))
	}
}

func centered(s string) string {
	return strings.Repeat(" ", (ReceiptWidth-len(s))/2) + s
}

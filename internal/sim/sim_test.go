package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestHelloAndLinkCode(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, func(c *Config) {
		c.Model = instore.ModelMobile
		c.SoftwareVersion = "2.3.4"
	})
	c := g.accept(t)
	want := protocol.Hello{Protocol: 1, Model: "mobile", SoftwareVersion: "2.3.4"}
	if c.hello != want {
		t.Errorf("hello = %+v, want %+v", c.hello, want)
	}

	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	st := waitState(t, r.Terminal, "showing the link code", func(s State) bool { return s.Screen == "Link code 123456" })
	if st.LinkCode != "123456" || st.TerminalID != "" || !st.Online || st.SerialNumber != testSerial || st.Model != "mobile" {
		t.Errorf("State() = %+v, want link code 123456, no terminal ID, online", st)
	}

	c.link("10000001")
	st = waitState(t, r.Terminal, "linked", func(s State) bool { return s.TerminalID == "10000001" })
	if st.Screen != "Idle" || st.LinkCode != "" {
		t.Errorf("State() = %+v, want screen Idle and no link code", st)
	}
}

func TestDefaultsAndWrongSecretRetries(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	startTerminal(t, g, func(c *Config) { c.Secret = "wrong" })
	testwait.For(t, "3 refused attempts: the terminal keeps retrying", func() bool { return g.refused.Load() >= 3 })

	g2 := newGateway(t)
	startTerminal(t, g2, func(c *Config) { c.Model = "" })
	c := g2.accept(t)
	want := protocol.Hello{Protocol: protocol.Version, Model: instore.ModelCountertop, SoftwareVersion: DefaultSoftwareVersion}
	if c.hello != want {
		t.Errorf("hello = %+v, want %+v", c.hello, want)
	}
}

var maskedPAN = regexp.MustCompile(`^[0-9]{6}\*{6}[0-9]{4}$`)

func TestAmountRules(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	_, r, c := linked(t, func(c *Config) { c.Delay = time.Hour })
	c.purchase("ref-1", payment(1250))
	c.expect(protocol.TypeAck)
	c.expect(protocol.TypeProgress)
	waitState(t, r.Terminal, "asking for the card", func(s State) bool { return s.Screen == "SEK 12.50 - Present card" })
	c.cancel("ref-1", instore.CancelByECR)
	c.result("ref-1")
	waitState(t, r.Terminal, "showing the outcome", func(s State) bool { return s.Screen == "ABORTED BY CASHIER" })

	_, r2, c2 := linked(t, nil)
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
	t.Parallel()
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

// cancelOutcomes is the status a cancelled purchase ends in, by the
// cancel's reason (ACK_TIMEOUT: the purchase was acknowledged, so the
// terminal reports it).
var cancelOutcomes = []struct {
	reason string
	want   instore.TransactionStatus
}{
	{instore.CancelByECR, instore.StatusAbortedByCashier},
	{instore.CancelDeadline, instore.StatusTechnicalError},
	{instore.CancelAckTimeout, instore.StatusTechnicalError},
}

func TestNeverAnswer92(t *testing.T) {
	t.Parallel()
	for _, tc := range cancelOutcomes {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			_, _, c := linked(t, nil)
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

			c.cancel("ref-92", tc.reason)
			if _, res, _ := c.result("ref-92"); res.StatusID != tc.want {
				t.Errorf("after cancel %s: statusId = %d, want %d", tc.reason, res.StatusID, tc.want)
			}
		})
	}
}

func TestDropSession93(t *testing.T) {
	t.Parallel()
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
		t.Parallel()
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
		t.Parallel()
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
	t.Parallel()
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
	for _, tc := range cancelOutcomes {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			_, r, c := linked(t, func(c *Config) { c.Delay = time.Hour })
			c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
			c.expect(protocol.TypeProgress)
			c.cancel("ref-1", tc.reason)
			env, res, _ := c.result("ref-1")
			if res.StatusID != tc.want {
				t.Errorf("statusId = %d, want %d", res.StatusID, tc.want)
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
	}
	t.Run("after the result", func(t *testing.T) {
		t.Parallel()
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
	t.Parallel()
	_, r, c := linked(t, func(c *Config) { c.Delay = time.Hour })
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

func TestResendUntilConfirmed(t *testing.T) {
	t.Parallel()
	g, _, c := linked(t, nil)
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	first, res1, _ := c.result("ref-1")

	c.ws.Close() // the gateway drops the session before confirming
	c2 := g.accept(t)
	again := c2.expect(protocol.TypeResult)
	if again.ID != first.ID || again.Ref != "ref-1" || decodeResult(t, again).AuthorizationCode != res1.AuthorizationCode {
		t.Fatalf("after reconnecting: %+v, want the same result with id %q", again, first.ID)
	}
	c2.confirm(again.ID)
	// Make sure the confirm was read before closing: the terminal answers
	// in order.
	c2.expectAck(c2.purchase("ref-2", payment(1000)), "ref-2")
	env2, _, _ := c2.result("ref-2")
	c2.confirm(env2.ID)
	c2.expectConfirm(c2.send(protocol.TypeReversal, "", "ref-none", protocol.Reversal{Reason: instore.ReversalLateApproval}), "ref-none")

	if err := c2.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "restart"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c2.waitClosed()
	c3 := g.accept(t)
	id := c3.purchase("ref-3", payment(1000))
	if env := c3.next(); env.Type != protocol.TypeAck || env.Re != id {
		t.Errorf("first message after a confirmed result: %+v, want the ack of ref-3 (nothing resent)", env)
	}
}

func TestSetOffline(t *testing.T) {
	t.Parallel()
	g, r, c := linked(t, nil)

	r.SetOffline(true)
	c.waitClosed()
	st := waitState(t, r.Terminal, "offline", func(s State) bool { return !s.Online })
	if st.Screen != "Offline" {
		t.Errorf("screen %q, want Offline", st.Screen)
	}
	select {
	case <-g.conns:
		t.Fatal("the terminal reconnected while set offline")
	case <-time.After(200 * time.Millisecond): // many backoff steps
	}

	r.SetOffline(false)
	c2 := g.accept(t)
	c2.link("10000001")
	waitState(t, r.Terminal, "online", func(s State) bool { return s.Online })

	// A pending result survives going offline and back.
	c2.expectAck(c2.purchase("ref-1", payment(1000)), "ref-1")
	first, _, _ := c2.result("ref-1")
	r.SetOffline(true)
	c2.waitClosed()
	r.SetOffline(false)
	c3 := g.accept(t)
	again := c3.expect(protocol.TypeResult)
	if again.ID != first.ID {
		t.Errorf("resent result id %q, want %q", again.ID, first.ID)
	}
}

func TestOfflineDuringTransaction(t *testing.T) {
	t.Parallel()
	g, r, c := linked(t, func(c *Config) { c.Delay = 300 * time.Millisecond })
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	r.SetOffline(true)
	c.waitClosed()
	// Whatever it reported, the result comes after the next hello.
	waitState(t, r.Terminal, "done", func(s State) bool { return s.Screen == "APPROVED" })
	r.SetOffline(false)
	c2 := g.accept(t)
	if _, res, _ := c2.result("ref-1"); res.StatusID != instore.StatusApproved {
		t.Errorf("statusId = %d, want 0", res.StatusID)
	}
}

func TestPaymentMethod(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	_, r, c := linked(t, func(c *Config) { c.Delay = time.Hour })
	p := payment(2500)
	p.OriginalRef = "ref-0"
	id := c.send(protocol.TypeRefund, "", "ref-1", p)
	c.expectAck(id, "ref-1")
	waitState(t, r.Terminal, "refund screen", func(s State) bool { return s.Screen == "Refund SEK 25.00 - Present card" })
	c.cancel("ref-1", instore.CancelByECR)
	c.result("ref-1")
}

func TestReceiptsOverTheProtocol(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

func TestUnknownMessagesIgnored(t *testing.T) {
	t.Parallel()
	_, _, c := linked(t, nil)
	c.send("firmware-party", "", "x", map[string]int{"n": 1})
	c.send(protocol.TypeConfirm, "no-such-id", "", nil)
	c.send(protocol.TypeCancel, "", "no-such-ref", protocol.Cancel{Reason: instore.CancelByECR})
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
}

func TestCloseCodesStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		want error
	}{
		{protocol.CloseRevoked, ErrRevoked},
		{protocol.CloseUnsupported, ErrUnsupported},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			t.Parallel()
			g := newGateway(t)
			r := startTerminal(t, g, nil)
			c := g.accept(t)
			if err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(tc.code, "bye"), time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := r.waitExit(t); !errors.Is(err, tc.want) {
				t.Errorf("Run = %v, want %v", err, tc.want)
			}
			if st := r.State(); st.Online || st.Screen != "Offline" {
				t.Errorf("State() = %+v, want offline", st)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	g.accept(t)
	if err := r.Run(t.Context()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
}

func TestOnChange(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	screens := make(chan string, 100)
	r.OnChange(func() {
		select {
		case screens <- r.State().Screen:
		default:
		}
	})
	c := g.accept(t)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "654321"})
	timeout := time.After(waitTimeout)
	for {
		select {
		case s := <-screens:
			if s == "Link code 654321" {
				return
			}
		case <-timeout:
			t.Fatal("OnChange never reported the link code screen")
		}
	}
}

func TestLogsKeepSecretsOut(t *testing.T) {
	t.Parallel()
	g, r, c := linked(t, nil)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	c.link("10000001")
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.result("ref-1")
	c.ws.Close()
	g.accept(t) // the terminal logged the end of the session and came back

	lines := strings.Split(strings.TrimSpace(r.log.String()), "\n")
	sawSerial, sawTerminal := false, false
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["serialNumber"] == testSerial {
			sawSerial = true
		}
		if m["terminalId"] == "10000001" {
			sawTerminal = true
		}
		// Identifiers only under their keys, which the service's handler
		// fingerprints; the secret nowhere.
		delete(m, "serialNumber")
		delete(m, "terminalId")
		delete(m, "linkCode")
		rest, _ := json.Marshal(m)
		for _, s := range []string{testSecret, testSerial, "10000001", "123456"} {
			if strings.Contains(string(rest), s) {
				t.Errorf("log line carries %q outside its key: %s", s, line)
			}
		}
	}
	if !sawSerial || !sawTerminal {
		t.Errorf("serialNumber logged %v, terminalId logged %v; want both under their keys", sawSerial, sawTerminal)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	good := Config{GatewayURL: "ws://127.0.0.1:8082/terminal/v1/connect", SerialNumber: "S1", Secret: "x"}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"unknown model", func(c *Config) { c.Model = "toaster" }},
		{"no serial", func(c *Config) { c.SerialNumber = "" }},
		{"colon in serial", func(c *Config) { c.SerialNumber = "a:b" }},
		{"space in serial", func(c *Config) { c.SerialNumber = "a b" }},
		{"no secret", func(c *Config) { c.Secret = "" }},
		{"no URL", func(c *Config) { c.GatewayURL = "" }},
		{"ftp URL", func(c *Config) { c.GatewayURL = "ftp://host/x" }},
		{"credentials in URL", func(c *Config) { c.GatewayURL = "ws://u:p@host/x" }},
		{"GatewayURL and GatewayURLs", func(c *Config) { c.GatewayURLs = []string{"ws://other/x"} }},
		{"empty URL list", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{} }},
		{"second URL invalid", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "ftp://b/x"} }},
		{"second URL with credentials", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "ws://u:p@b/x"} }},
		{"URL twice", func(c *Config) { c.GatewayURL, c.GatewayURLs = "", []string{"ws://a/x", "http://a/x"} }},
		{"negative delay", func(c *Config) { c.Delay = -time.Second }},
		{"max below min", func(c *Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond }},
	} {
		cfg := good
		tc.mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New = nil error, want one", tc.name)
		}
	}
	term, err := New(good)
	if err != nil {
		t.Fatalf("New(%+v) = %v", good, err)
	}
	if st := term.State(); st.Model != instore.ModelCountertop || st.Online || st.Screen != "Offline" {
		t.Errorf("new terminal State() = %+v, want countertop, offline", st)
	}
	cfg := good
	cfg.GatewayURL = "https://gw.example.com/terminal/v1/connect"
	term, err = New(cfg)
	if err != nil || !slices.Equal(term.GatewayURLs(), []string{"wss://gw.example.com/terminal/v1/connect"}) {
		t.Fatalf("https URL: %v, URLs %q; want wss", err, term.GatewayURLs())
	}
	cfg = good
	cfg.GatewayURL = ""
	cfg.GatewayURLs = []string{"ws://a.example/terminal/v1/connect", "http://b.example/terminal/v1/connect"}
	term, err = New(cfg)
	if err != nil || !slices.Equal(term.GatewayURLs(), []string{"ws://a.example/terminal/v1/connect", "ws://b.example/terminal/v1/connect"}) {
		t.Errorf("two URLs: %v, URLs %q; want both as ws, in order", err, term.GatewayURLs())
	}
}

func TestPrintScreens(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	var out testlog.Buffer
	r.PrintScreens(&out)
	c := g.accept(t)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	waitState(t, r.Terminal, "link code", func(s State) bool { return s.LinkCode == "123456" })
	c.link("10000001")
	c.expectAck(c.purchase("ref-1", payment(1250)), "ref-1")
	c.result("ref-1")
	waitState(t, r.Terminal, "APPROVED", func(s State) bool { return s.Screen == "APPROVED" })

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"Link code 123456", "Linked to terminal 10000001", "APPROVED"}
	i := 0
	for _, l := range lines {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("printed\n%s\nwant, in order, %q", out.String(), want)
	}
	for j := 1; j < len(lines); j++ {
		if lines[j] == lines[j-1] {
			t.Errorf("line %q printed twice in a row", lines[j])
		}
	}
}

func TestInteractiveWaitsForAPerson(t *testing.T) {
	t.Parallel()
	_, r, c := linked(t, nil)
	if err := r.Terminal.Decide(0); !errors.Is(err, ErrNothingToDecide) {
		t.Fatalf("Decide with nothing running = %v, want ErrNothingToDecide", err)
	}
	r.Terminal.SetInteractive(true)
	// An amount that would be approved: the person declines it.
	c.expectAck(c.purchase("ref-i", payment(1000)), "ref-i")
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return strings.Contains(s.Screen, "Present card") })
	if err := r.Terminal.Decide(instore.StatusTransactionDeclined); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	_, res, _ := c.result("ref-i")
	if res.StatusID != instore.StatusTransactionDeclined {
		t.Errorf("interactive result = %d, want the person's 11", res.StatusID)
	}
	if err := r.Terminal.Decide(99); err == nil {
		t.Errorf("Decide(99) accepted")
	}
}

// TestConfirmsOwedMessages: the terminal confirms what the gateway sends
// again after every reconnect until confirmed (docs/terminal-protocol.md,
// section 7): a cancel, whether it knows the ref or not, a reversal of a
// late approval, a print; and a print sent again is not printed twice.
func TestConfirmsOwedMessages(t *testing.T) {
	t.Parallel()
	g, r, c := linked(t, func(c *Config) { c.Delay = time.Hour })

	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.expectConfirm(c.cancel("ref-1", instore.CancelDeadline), "ref-1")
	if _, res, _ := c.result("ref-1"); res.StatusID != instore.StatusTechnicalError {
		t.Errorf("after cancel DEADLINE: statusId %d, want %d", res.StatusID, instore.StatusTechnicalError)
	}
	c.expectConfirm(c.cancel("ref-unknown", instore.CancelAckTimeout), "ref-unknown")

	r.SetNextPrint(instore.PrintOutOfPaper)
	print := func(c *gwConn, printID string) instore.PrintStatus {
		t.Helper()
		id := c.send(protocol.TypePrint, "", printID, protocol.Print{Lines: []string{"Thank you"}})
		c.expectConfirm(id, printID)
		env := c.expect(protocol.TypePrintResult)
		var pr protocol.PrintResult
		if err := protocol.DecodeData(&env, &pr); err != nil || env.Ref != printID {
			t.Fatalf("print-result %+v: %v, want one for %s", env, err, printID)
		}
		return pr.StatusID
	}
	if got := print(c, "prt-1"); got != instore.PrintOutOfPaper {
		t.Errorf("print prt-1 = %d, want the outcome set, %d", got, instore.PrintOutOfPaper)
	}
	// The gateway sends it again after a reconnect: the same status, not a
	// second print (which would take the next outcome, SUCCESS).
	c.ws.Close()
	c2 := g.accept(t)
	c2.link("10000001")
	c2.expect(protocol.TypeResult) // the result of ref-1, never confirmed
	if got := print(c2, "prt-1"); got != instore.PrintOutOfPaper {
		t.Errorf("print prt-1 again = %d, want %d as the first time", got, instore.PrintOutOfPaper)
	}
	if got := print(c2, "prt-2"); got != instore.PrintSuccess {
		t.Errorf("print prt-2 = %d, want %d", got, instore.PrintSuccess)
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
			t.Parallel()
			_, _, c := linked(t, func(c *Config) { c.Delay = time.Hour })
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
	t.Parallel()
	_, _, c := linked(t, func(c *Config) { c.Delay = time.Hour })
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

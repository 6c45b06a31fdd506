package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// onPreAuth is the payload of an increment, capture or void of the
// pre-auth pre.
func onPreAuth(amount int64, pre string) protocol.Payment {
	p := payment(amount)
	p.OriginalRef = pre
	return p
}

// TestPreAuthScreens: the screen names each pre-authorisation command. A
// pre-auth asks for the card as a purchase does; an increment, capture or
// void says it needs no card and reports AUTHORIZING only.
func TestPreAuthScreens(t *testing.T) {
	_, r, c := linked(t, cardWaits)
	for _, tc := range []struct {
		kind   string
		p      protocol.Payment
		screen string
		stage  instore.Progress
	}{
		{protocol.TypePreAuth, payment(2000), "Pre-auth SEK 20.00 - Present card", StageWaitingForCard},
		{protocol.TypeIncrement, onPreAuth(500, "ref-pre"), "Increment SEK 5.00 - No card, authorizing", StageAuthorizing},
		{protocol.TypeCapture, onPreAuth(2500, "ref-pre"), "Capture SEK 25.00 - No card, authorizing", StageAuthorizing},
		{protocol.TypeVoid, onPreAuth(2500, "ref-pre"), "Void SEK 25.00 - No card, authorizing", StageAuthorizing},
	} {
		ref := "ref-" + tc.kind
		c.expectAck(c.send(tc.kind, "", ref, tc.p), ref)
		first := decodeData[protocol.Progress](t, c.expect(protocol.TypeProgress))
		waitState(t, r.Terminal, tc.screen, func(s State) bool { return s.Screen == tc.screen })
		c.cancel(ref, instore.CancelByECR)
		_, res, stages := c.result(ref)
		if res.StatusID != instore.StatusAbortedByCashier || first.Stage != tc.stage || len(stages) != 0 {
			t.Errorf("%s: status %d after stages %s %v, want ABORTED_BY_CASHIER after %s alone", tc.kind, res.StatusID, first.Stage, stages, tc.stage)
		}
	}
}

// TestPreAuthInteractive: a terminal that waits for a person waits on a
// pre-auth as on a purchase (the card prompt); an increment, capture or
// void, with no cardholder to act, plays by its amount (and the next
// outcome set) without waiting.
func TestPreAuthInteractive(t *testing.T) {
	_, r, c := linked(t, nil)
	r.Terminal.SetInteractive(true)
	c.expectAck(c.send(protocol.TypePreAuth, "", "ref-pre", payment(2000)), "ref-pre")
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return s.Screen == "Pre-auth SEK 20.00 - Present card" })
	if err := r.Terminal.Decide(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := c.result("ref-pre"); res.StatusID != instore.StatusApproved {
		t.Fatalf("pre-auth: status %d, want the person's APPROVED", res.StatusID)
	}
	for i, tc := range []struct {
		kind   string
		amount int64
		next   *instore.TransactionStatus
		want   instore.TransactionStatus
	}{
		{protocol.TypeIncrement, 500, nil, instore.StatusApproved},
		{protocol.TypeIncrement, 511, nil, instore.StatusTransactionDeclined},
		{protocol.TypeCapture, 2500, new(instore.StatusTransactionDeclined), instore.StatusTransactionDeclined},
		{protocol.TypeCapture, 2500, nil, instore.StatusApproved},
	} {
		if tc.next != nil {
			if err := r.SetNextOutcome(*tc.next); err != nil {
				t.Fatal(err)
			}
		}
		ref := "ref-op-" + itoa(int64(i))
		c.expectAck(c.send(tc.kind, "", ref, onPreAuth(tc.amount, "ref-pre")), ref)
		_, res, stages := c.result(ref)
		if res.StatusID != tc.want || !slices.Equal(stages, []instore.Progress{StageAuthorizing}) {
			t.Errorf("%s %d: status %d after %v, want %d after AUTHORIZING, with no person", tc.kind, tc.amount, res.StatusID, stages, tc.want)
		}
		if st := r.Terminal.State(); st.NextOutcome != nil || strings.Contains(st.Screen, "Present card") {
			t.Errorf("%s: state after %+v", tc.kind, st)
		}
	}
}

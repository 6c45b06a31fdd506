package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

func tipped(amount int64, tip instore.Tip) protocol.Payment {
	p := payment(amount)
	p.Tip = &tip
	return p
}

// TestTips: each mode's tip with and without SetNextTip, a tip above the
// amount refused, the tip only on an approval, and the receipt's lines.
func TestTips(t *testing.T) {
	_, r, c := linked(t, nil)
	fixed := int64(150)
	prompt := instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{15, 20}}
	enter := instore.Tip{Mode: instore.TipEnterTotal}
	steps := []struct {
		name    string
		next    *int64 // SetNextTip before the purchase
		p       protocol.Payment
		wantTip int64
	}{
		{"no tip asked", nil, payment(1000), 0},
		{"fixed", nil, tipped(1000, instore.Tip{Mode: instore.TipFixed, Amount: &fixed}), 150},
		{"prompt: the first suggestion", nil, tipped(1250, prompt), 188},
		{"enter total: no tip", nil, tipped(1000, enter), 0},
		{"prompt: the tip set", new(int64(300)), tipped(1000, prompt), 300},
		{"enter total: the tip set", new(int64(250)), tipped(1000, enter), 250},
		{"once only", nil, tipped(1000, enter), 0},
		{"a tip above the amount refused", new(int64(1001)), tipped(1000, enter), 0},
		{"fixed takes no tip set", new(int64(70)), tipped(1000, instore.Tip{Mode: instore.TipFixed, Amount: &fixed}), 150},
		{"the tip set kept for a tipped one", nil, tipped(1000, prompt), 70},
		{"declined: no tip", nil, tipped(1011, prompt), 0},
	}
	for i, s := range steps {
		if s.next != nil {
			if err := r.SetNextTip(*s.next); err != nil {
				t.Fatal(err)
			}
		}
		ref := "ref-tip-" + string(rune('a'+i))
		c.expectAck(c.purchase(ref, s.p), ref)
		_, res, _ := c.result(ref)
		if res.TipAmount != s.wantTip {
			t.Errorf("%s: tipAmount = %d, want %d", s.name, res.TipAmount, s.wantTip)
		}
		receipt := strings.Join(res.CustomerReceipt, "\n")
		if hasTip := strings.Contains(receipt, "Tip "); hasTip != (s.p.Tip != nil && res.StatusID == instore.StatusApproved) {
			t.Errorf("%s: receipt with a tip line %v:\n%s", s.name, hasTip, receipt)
		}
		if res.StatusID == instore.StatusApproved && s.p.Tip != nil {
			total := "Total" + strings.Repeat(" ", ReceiptWidth-5-len(formatAmount(s.p.Amount+s.wantTip, "SEK"))) + formatAmount(s.p.Amount+s.wantTip, "SEK")
			if !strings.Contains(receipt, total) {
				t.Errorf("%s: receipt lacks %q:\n%s", s.name, total, receipt)
			}
		}
	}
	if err := r.SetNextTip(-1); err == nil {
		t.Error("SetNextTip(-1) accepted")
	}
}

// TestTipPromptWaitsForAPerson: an interactive terminal shows the tip
// prompt, with the tip of each suggestion, until a person answers it.
func TestTipPromptWaitsForAPerson(t *testing.T) {
	_, r, c := linked(t, nil)
	r.Terminal.SetInteractive(true)
	c.expectAck(c.purchase("ref-tp", tipped(2000, instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10, 15}})), "ref-tp")
	st := waitState(t, r.Terminal, "the tip prompt", func(s State) bool { return strings.Contains(s.Screen, "Tip?") })
	if p := st.TipPrompt; p == nil || len(p.Options) != 2 || p.Options[1].TipAmount != 300 {
		t.Fatalf("tip prompt = %+v, want 10%% and 15%% (300) of 2000", p)
	}
	if err := r.SetNextTip(250); err != nil { // "other amount"
		t.Fatal(err)
	}
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return strings.Contains(s.Screen, "Present card") && s.TipPrompt == nil })
	if err := r.Terminal.Decide(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := c.result("ref-tp"); res.TipAmount != 250 {
		t.Errorf("tipAmount = %d, want the person's 250", res.TipAmount)
	}
	if st := r.Terminal.State(); st.NextTip != nil {
		t.Errorf("the answer was kept for the next transaction too: %d", *st.NextTip)
	}
	// Decided at the tip prompt: no tip, the decision stands.
	c.expectAck(c.purchase("ref-td", tipped(2000, instore.Tip{Mode: instore.TipEnterTotal})), "ref-td")
	waitState(t, r.Terminal, "the tip prompt", func(s State) bool { return strings.Contains(s.Screen, "Enter total with tip") })
	if err := r.Terminal.Decide(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := c.result("ref-td"); res.StatusID != instore.StatusApproved || res.TipAmount != 0 {
		t.Errorf("decided at the tip prompt: status %d, tipAmount %d; want APPROVED without a tip", res.StatusID, res.TipAmount)
	}
}

// TestAnswerTipOnlyItsPrompt: a person's answer applies to the prompt it
// names while that prompt waits, never to another one or a later sale: a
// second answer, one after the sale ended, or one naming another sale is
// refused and leaves nothing for the next transaction.
func TestAnswerTipOnlyItsPrompt(t *testing.T) {
	_, r, c := linked(t, nil)
	r.Terminal.SetInteractive(true)
	prompt := instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10, 15}}
	if err := r.AnswerTip("ref-a", 100); !errors.Is(err, ErrNoTipPrompt) {
		t.Fatalf("an answer with no sale = %v, want ErrNoTipPrompt", err)
	}
	c.expectAck(c.purchase("ref-a", tipped(2000, prompt)), "ref-a")
	waitState(t, r.Terminal, "the tip prompt", func(s State) bool { return s.TipPrompt != nil && s.TipPrompt.Ref == "ref-a" })
	if err := r.AnswerTip("ref-other", 100); !errors.Is(err, ErrNoTipPrompt) {
		t.Errorf("an answer naming another sale = %v, want ErrNoTipPrompt", err)
	}
	if err := r.AnswerTip("ref-a", -1); err == nil || errors.Is(err, ErrNoTipPrompt) {
		t.Errorf("a negative tip = %v, want a range error", err)
	}
	if err := r.AnswerTip("ref-a", 250); err != nil {
		t.Fatal(err)
	}
	if err := r.AnswerTip("ref-a", 300); !errors.Is(err, ErrNoTipPrompt) { // a second click
		t.Errorf("a second answer = %v, want ErrNoTipPrompt", err)
	}
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return strings.Contains(s.Screen, "Present card") && s.TipPrompt == nil })
	if err := r.AnswerTip("ref-a", 300); !errors.Is(err, ErrNoTipPrompt) {
		t.Errorf("an answer at the card prompt = %v, want ErrNoTipPrompt", err)
	}
	if err := r.Terminal.Decide(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := c.result("ref-a"); res.TipAmount != 250 {
		t.Errorf("tipAmount = %d, want the first answer's 250", res.TipAmount)
	}
	if err := r.AnswerTip("ref-a", 400); !errors.Is(err, ErrNoTipPrompt) { // a late click
		t.Errorf("an answer after the sale = %v, want ErrNoTipPrompt", err)
	}
	if st := r.Terminal.State(); st.NextTip != nil {
		t.Fatalf("a refused answer was kept for the next sale: %d", *st.NextTip)
	}
	// The next sale asks again, and its tip is its own answer's.
	c.expectAck(c.purchase("ref-b", tipped(2000, prompt)), "ref-b")
	waitState(t, r.Terminal, "the next tip prompt", func(s State) bool { return s.TipPrompt != nil && s.TipPrompt.Ref == "ref-b" })
	if err := r.AnswerTip("ref-b", 0); err != nil {
		t.Fatal(err)
	}
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return strings.Contains(s.Screen, "Present card") })
	if err := r.Terminal.Decide(instore.StatusApproved); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := c.result("ref-b"); res.TipAmount != 0 {
		t.Errorf("the next sale's tipAmount = %d, want its own answer's 0", res.TipAmount)
	}
}

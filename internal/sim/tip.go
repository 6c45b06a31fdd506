package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/instore-dev/instore"
)

// TipPrompt is the tip question an interactive terminal shows while it
// waits for a person to answer it (AnswerTip, SetNextTip): PROMPT's
// suggestions with the tip each makes, "other amount" and "no tip"; or
// ENTER_TOTAL's "type the total to pay". Ref is the transaction that asks
// (its onlineAPIRefId): an answer names it.
type TipPrompt struct {
	Ref      string          `json:"onlineAPIRefId"`
	Mode     instore.TipMode `json:"mode"`
	Amount   int64           `json:"amount"`
	Currency string          `json:"currency"`
	Options  []TipOption     `json:"options,omitempty"`
}

// TipOption is one suggestion of a PROMPT.
type TipOption struct {
	Percent   int   `json:"percent"`
	TipAmount int64 `json:"tipAmount"`
}

// ErrNoTipPrompt is returned by AnswerTip when the prompt it answers no
// longer waits (answered already, or its transaction ended) or never
// did.
var ErrNoTipPrompt = errors.New("sim: no tip prompt of this transaction waits for an answer")

// validTip checks a tip's range.
func validTip(tipAmount int64) error {
	if tipAmount < 0 || tipAmount > instore.MaxAmount {
		return fmt.Errorf("sim: a tip must be 0 to %d in minor units", instore.MaxAmount)
	}
	return nil
}

// SetNextTip sets the tip the cardholder picks on the next transaction that
// asks for one (PROMPT or ENTER_TOTAL; a FIXED tip is the ECR's), once:
// the transaction waiting on its tip prompt now, or the next to come.
// Without it PROMPT takes its first suggestion and ENTER_TOTAL no tip (an
// interactive terminal waits for it instead). A tip above the amount is
// refused by the terminal: the transaction goes on without a tip.
func (t *Terminal) SetNextTip(tipAmount int64) error {
	if err := validTip(tipAmount); err != nil {
		return err
	}
	t.update(func() {
		if t.answerTipLocked(t.tx, tipAmount) {
			return
		}
		t.nextTip = &tipAmount
	})
	return nil
}

// AnswerTip is a person's answer to the tip prompt of the transaction ref
// (TipPrompt.Ref), and to nothing else: ErrNoTipPrompt when that prompt
// does not wait for an answer now (a second answer, an answer after the
// transaction ended or to another transaction's prompt); it never becomes
// the tip of a later transaction.
func (t *Terminal) AnswerTip(ref string, tipAmount int64) error {
	if err := validTip(tipAmount); err != nil {
		return err
	}
	var err error
	t.update(func() {
		if t.tx == nil || t.tx.ref != ref || !t.answerTipLocked(t.tx, tipAmount) {
			err = ErrNoTipPrompt
		}
	})
	return err
}

// answerTipLocked hands tip to tx's prompt if it waits for one, and
// closes the prompt: a second answer finds it closed.
func (t *Terminal) answerTipLocked(tx *txn, tip int64) bool {
	if tx == nil || tx.tipWait == nil || tx.tipAnswered {
		return false
	}
	select {
	case tx.tipWait <- tip:
		tx.tipAnswered = true
		return true
	default: // cannot happen: one answer only, into a buffer of one
		return false
	}
}

// planTipLocked decides at a command's arrival how tx's tip is picked:
// FIXED's amount; PROMPT and ENTER_TOTAL the tip set with SetNextTip, or,
// on an interactive terminal, a person's answer to the prompt (tipWait),
// or else the defaults (the first suggestion, no tip).
func (t *Terminal) planTipLocked(tx *txn) {
	tip := tx.pay.Tip
	if tip == nil {
		return
	}
	switch {
	case tip.Mode == instore.TipFixed:
		if tip.Amount != nil {
			t.acceptTip(tx, *tip.Amount)
		}
	case t.nextTip != nil:
		t.acceptTip(tx, *t.nextTip)
		t.nextTip = nil
	case tx.decide != nil:
		tx.tipWait = make(chan int64, 1)
	case tip.Mode == instore.TipPrompt && len(tip.Suggestions) > 0:
		t.acceptTip(tx, instore.TipOfPercent(tx.pay.Amount, tx.pay.CashbackAmount, tip.Suggestions[0]))
	}
}

// acceptTip makes tip tx's tip, unless it is above the amount: the
// terminal refuses such a tip and charges none.
func (t *Terminal) acceptTip(tx *txn, tip int64) {
	if tip > tx.pay.Amount {
		t.log.Info("sim: tip above the amount refused", "ref", tx.ref, "tipAmount", tip, "amount", tx.pay.Amount)
		tip = 0
	}
	tx.tip = tip
}

// tipPromptOf is the prompt tx shows while it waits for its tip.
func tipPromptOf(tx *txn) *TipPrompt {
	if tx == nil || tx.tipWait == nil || tx.tipAnswered {
		return nil
	}
	p := &TipPrompt{Ref: tx.ref, Mode: tx.pay.Tip.Mode, Amount: tx.pay.Amount, Currency: tx.pay.Currency}
	for _, pct := range tx.pay.Tip.Suggestions {
		p.Options = append(p.Options, TipOption{Percent: pct, TipAmount: instore.TipOfPercent(tx.pay.Amount, tx.pay.CashbackAmount, pct)})
	}
	return p
}

// tipScreen is what the terminal shows while it asks for the tip.
func tipScreen(p *TipPrompt) string {
	a := formatAmount(p.Amount, p.Currency)
	if p.Mode == instore.TipEnterTotal {
		return a + " - Enter total with tip"
	}
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, fmt.Sprintf("%d%%", o.Percent))
	}
	return a + " - Tip? " + strings.Join(opts, " / ") + " / Other / No tip"
}

// awaitTip shows tx's tip prompt and waits for a person's answer; false
// when tx was cancelled or ctx ended first. A person who decides the
// transaction (Decide) without answering the prompt leaves no tip: the
// decision then stands as if made at the card prompt.
func (t *Terminal) awaitTip(ctx context.Context, tx *txn) bool {
	if tx.tipWait == nil {
		return true
	}
	t.update(func() {
		// Not if answered already (SetNextTip, AnswerTip, as soon as
		// the transaction began): the answer waits in tipWait.
		if p := tipPromptOf(tx); p != nil && t.tx == tx && tx.cancel == "" {
			t.txScreen = tipScreen(p)
			t.screenGen++
		}
	})
	select {
	case tip := <-tx.tipWait:
		t.update(func() { t.acceptTip(tx, tip) })
		return true
	case st := <-tx.decide:
		t.update(func() {
			select {
			case tip := <-tx.tipWait: // answered just before the decision
				t.acceptTip(tx, tip)
			default:
			}
			tx.tipAnswered = true
			select {
			case tx.decide <- st: // for play, which reads it next
			default: // another decision came meanwhile: that one stands
			}
		})
		return true
	case <-tx.cancelled:
		return false
	case <-ctx.Done():
		return false
	}
}

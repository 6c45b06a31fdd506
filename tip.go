package instore

import (
	"errors"
	"fmt"
	"slices"
)

// TipMode is how the terminal asks for a tip (Tip.Mode).
type TipMode string

// Tip modes.
const (
	// TipPrompt: the terminal shows Tip.Suggestions (percentages), "other
	// amount" and "no tip".
	TipPrompt TipMode = "PROMPT"
	// TipEnterTotal: the cardholder types the total to pay; the tip is the
	// total less the amount.
	TipEnterTotal TipMode = "ENTER_TOTAL"
	// TipFixed: the ECR knows the tip (Tip.Amount), the terminal charges it.
	TipFixed TipMode = "FIXED"
)

// The bounds of a PROMPT tip's suggestions.
const (
	MaxTipSuggestions = 3
	MinTipPercent     = 1
	MaxTipPercent     = 100
)

// Tip is how a purchase asks for a tip (the request's and the
// transaction's "tip"; nil: no tip asked). A pre-authorisation takes the
// same object.
type Tip struct {
	Mode TipMode `json:"mode"`
	// Suggestions are PROMPT's percentages (1-3 integers of 1-100), of the
	// amount less its cashback.
	Suggestions []int `json:"suggestions,omitempty"`
	// Amount is FIXED's tip in minor units.
	Amount *int64 `json:"amount,omitempty"`
}

// CheckTip checks a request's tip (field names it, "/tip"), of a
// transaction of amount (nil when the request has none): the mode, PROMPT's
// suggestions, FIXED's amount (0 up to amount: a tip above the amount is
// refused), and no member another mode does not take.
func CheckTip(f *FieldErrors, field string, tip *Tip, amount *int64) {
	if tip == nil {
		return
	}
	switch tip.Mode {
	case TipPrompt:
		if n := len(tip.Suggestions); n < 1 || n > MaxTipSuggestions {
			f.Add(field+"/suggestions", "PROMPT takes 1 to %d suggestions (integer percentages)", MaxTipSuggestions)
		}
		for i, p := range tip.Suggestions {
			if p < MinTipPercent || p > MaxTipPercent {
				f.Add(fmt.Sprintf("%s/suggestions/%d", field, i), "must be a percentage from %d to %d", MinTipPercent, MaxTipPercent)
			} else if slices.Index(tip.Suggestions, p) < i {
				f.Add(fmt.Sprintf("%s/suggestions/%d", field, i), "repeats suggestion %d", p)
			}
		}
	case TipFixed:
		switch a := tip.Amount; {
		case a == nil:
			f.Add(field+"/amount", "is required with mode FIXED")
		case *a < 0 || *a > MaxAmount:
			f.Add(field+"/amount", "must be an integer in minor units from 0 to %d", MaxAmount)
		case amount != nil && *a > *amount:
			f.Add(field+"/amount", "must not exceed amount (%d): a tip above the amount is refused", *amount)
		}
	case TipEnterTotal:
	case "":
		f.Add(field+"/mode", "is required: PROMPT, ENTER_TOTAL or FIXED")
	default:
		f.Add(field+"/mode", "must be PROMPT, ENTER_TOTAL or FIXED")
	}
	if tip.Mode != TipPrompt && tip.Suggestions != nil {
		f.Add(field+"/suggestions", "only mode PROMPT takes suggestions")
	}
	if tip.Mode != TipFixed && tip.Amount != nil {
		f.Add(field+"/amount", "only mode FIXED takes an amount")
	}
}

// ErrTipRefused is wrapped by the error of a terminal's result whose tip
// breaks CheckTipAmount. The result is stored all the same (a terminal's
// result is never lost): an approval with such a tip is reversed at once
// (lifecycle, TIP_REFUSED), another outcome loses the tip.
var ErrTipRefused = errors.New("the result's tipAmount breaks the tip rules")

// CheckTipAmount is the rule of the tip a terminal reports charged
// (tipAmount) with a result of t: 0 unless t is a purchase or
// pre-authorisation that asked for a tip and the result is APPROVED; at most t's amount (a terminal refuses
// a larger tip and charges none); with FIXED, exactly the tip asked.
func CheckTipAmount(t *Transaction, status TransactionStatus, tipAmount int64) error {
	switch {
	case tipAmount == 0 && (t.Tip == nil || t.Tip.Mode != TipFixed || status != StatusApproved):
		return nil
	case tipAmount < 0:
		return fmt.Errorf("%w: tipAmount %d is negative", ErrTipRefused, tipAmount)
	case t.Tip == nil:
		return fmt.Errorf("%w: tipAmount %d on a transaction that asked for no tip", ErrTipRefused, tipAmount)
	case status != StatusApproved:
		return fmt.Errorf("%w: tipAmount %d with a result that is not APPROVED", ErrTipRefused, tipAmount)
	case tipAmount > t.Amount:
		return fmt.Errorf("%w: tipAmount %d exceeds the amount %d", ErrTipRefused, tipAmount, t.Amount)
	case t.Tip.Mode == TipFixed && t.Tip.Amount != nil && tipAmount != *t.Tip.Amount:
		return fmt.Errorf("%w: tipAmount %d is not the FIXED tip %d", ErrTipRefused, tipAmount, *t.Tip.Amount)
	}
	return nil
}

// TipOfPercent is the tip of percent per cent of the transaction's
// amount less its cashback, rounded half up to the minor unit: what a
// terminal charges for a PROMPT suggestion.
func TipOfPercent(amount, cashback int64, percent int) int64 {
	return ((amount-cashback)*int64(percent) + 50) / 100
}

// TotalAmount is what the card was charged: the amount (cashback
// included) and the tip.
func (t *Transaction) TotalAmount() int64 { return t.Amount + t.TipAmount }

package instore

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
)

// Limits of request fields.
const (
	MinAmount          = 1
	MaxAmount          = 99999999
	MaxECRReferenceLen = 64
	MaxWait            = 60 // seconds a status request may hold
)

var (
	terminalIDPattern = regexp.MustCompile(`^[0-9]{8}$`)
	linkCodePattern   = regexp.MustCompile(`^[0-9]{6}$`)
	currencyPattern   = regexp.MustCompile(`^[A-Z]{3}$`)
	refPattern        = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// ValidTerminalID reports whether s has the shape of a terminal ID.
func ValidTerminalID(s string) bool { return terminalIDPattern.MatchString(s) }

// ValidRef reports whether s has the shape of an onlineAPIRefId.
func ValidRef(s string) bool { return refPattern.MatchString(s) }

// FieldErrors collects field errors of a request.
type FieldErrors []FieldError

// Add adds a field's error, its message formatted as by fmt.Sprintf.
func (f *FieldErrors) Add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err is the validation error (EValidation) listing f; nil if f is empty.
func (f FieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Code: EValidation, Detail: "The request is not valid; see errors.", Fields: f}
}

// CheckECRReference checks an ecrReference, of a body or of a query
// (field names the one or the other): free text the terminal protocol
// carries to the terminal (ValidText).
func CheckECRReference(f *FieldErrors, field, ref string) {
	if !ValidText(ref, MaxECRReferenceLen) {
		f.Add(field, "must be at most %d characters, without control characters", MaxECRReferenceLen)
	}
}

func checkTerminalID(f *FieldErrors, id string) {
	if id == "" {
		f.Add("/terminalId", "is required")
	} else if !ValidTerminalID(id) {
		f.Add("/terminalId", "must be 8 digits")
	}
}

// checkRef checks the onlineAPIRefId a request names: missing is what a
// problem says when there is none ("": it is optional).
func checkRef(f *FieldErrors, ref, missing string) {
	switch {
	case ref == "" && missing != "":
		f.Add("/onlineAPIRefId", "%s", missing)
	case ref != "" && !ValidRef(ref):
		f.Add("/onlineAPIRefId", "is not an onlineAPIRefId")
	}
}

// LinkRequest is the body of POST /terminal/link.
type LinkRequest struct {
	TerminalID string `json:"terminalId"`
	LinkCode   string `json:"linkCode"`
}

// Validate checks the fields' shapes.
func (r *LinkRequest) Validate() error {
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	if r.LinkCode == "" {
		f.Add("/linkCode", "is required")
	} else if !linkCodePattern.MatchString(r.LinkCode) {
		f.Add("/linkCode", "must be the 6 digits the terminal shows")
	}
	return f.Err()
}

// CancelRequest is the body of POST /cancel. OnlineAPIRefID, optional,
// names the transaction the ECR means to cancel: when another one (or none)
// runs on the terminal, the cancel is refused with WP18 and nothing is
// cancelled, so a late cancel never hits the next sale.
type CancelRequest struct {
	TerminalID     string `json:"terminalId"`
	OnlineAPIRefID string `json:"onlineAPIRefId"`
}

// Validate checks the fields' shapes.
func (r *CancelRequest) Validate() error {
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	checkRef(&f, r.OnlineAPIRefID, "")
	return f.Err()
}

// TerminalRequest is the body of POST /terminal/unlink.
type TerminalRequest struct {
	TerminalID string `json:"terminalId"`
}

// Validate checks the fields' shapes.
func (r *TerminalRequest) Validate() error {
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	return f.Err()
}

// PurchaseRequest is the body of POST /purchase.
type PurchaseRequest struct {
	TerminalID      string `json:"terminalId"`
	Amount          *int64 `json:"amount"`
	CashbackAmount  *int64 `json:"cashbackAmount"`
	VATAmount       *int64 `json:"vatAmount"`
	Currency        string `json:"currency"`
	PaymentMethodID *int   `json:"paymentMethodId"`
	ECRReference    string `json:"ecrReference"`
	PrintReceipt    bool   `json:"printReceipt"`
	// ConfirmWithinSeconds asks for ECR confirmation: an APPROVED sale not
	// confirmed within this many seconds of its approval is reversed
	// (nil: no confirmation).
	ConfirmWithinSeconds *int `json:"confirmWithinSeconds"`
	// Tip asks the terminal for a tip (nil: none).
	Tip *Tip `json:"tip"`
}

// Validate checks the fields' shapes and ranges. Whether the payment
// method exists is WP22, checked later in the contract's order.
func (r *PurchaseRequest) Validate() error {
	var f FieldErrors
	r.check(&f)
	return f.Err()
}

// check adds the field errors of r to f.
func (r *PurchaseRequest) check(f *FieldErrors) {
	checkTerminalID(f, r.TerminalID)
	switch {
	case r.Amount == nil:
		f.Add("/amount", "is required")
	case *r.Amount < MinAmount || *r.Amount > MaxAmount:
		f.Add("/amount", "%s", amountRangeMessage(r.Currency))
	}
	if r.CashbackAmount != nil {
		if *r.CashbackAmount < 0 {
			f.Add("/cashbackAmount", "must not be negative")
		} else if r.Amount != nil && *r.CashbackAmount > *r.Amount {
			f.Add("/cashbackAmount", "must not exceed amount (amount is the total, cashback included)")
		}
	}
	if r.VATAmount != nil && (*r.VATAmount < 0 || r.Amount != nil && *r.VATAmount > *r.Amount) {
		f.Add("/vatAmount", "must be between 0 and amount")
	}
	checkCurrency(f, r.Currency)
	CheckECRReference(f, "/ecrReference", r.ECRReference)
	if c := r.ConfirmWithinSeconds; c != nil && (*c < MinConfirmWithinSeconds || *c > MaxConfirmWithinSeconds) {
		f.Add("/confirmWithinSeconds", "must be between %d and %d (seconds)", MinConfirmWithinSeconds, MaxConfirmWithinSeconds)
	}
	CheckTip(f, "/tip", r.Tip, r.Amount)
}

// DecodeHint words the error of a member of a purchase body that is not
// of its type: an amount that is a string or has a fraction is told how
// amounts are written, with an example in the body's currency.
func (r *PurchaseRequest) DecodeHint(field string, body []byte) string {
	return amountDecodeHint(field, body, "/amount", "/cashbackAmount", "/vatAmount", "/tip/amount")
}

// amountDecodeHint is the message of a decoding error of field when it is
// one of amounts ("" for any other field): the range for /amount, how
// amounts are written for each, in the currency the body names (when it
// can be read).
func amountDecodeHint(field string, body []byte, amounts ...string) string {
	if !slices.Contains(amounts, field) {
		return ""
	}
	var c struct {
		Currency string `json:"currency"`
	}
	_ = json.Unmarshal(body, &c) // best effort: a member of another type is skipped
	if field == "/amount" {
		return amountRangeMessage(c.Currency)
	}
	return "must be " + AmountHint(c.Currency)
}

// RefundRequest is the body of POST /refund.
type RefundRequest struct {
	TerminalID             string `json:"terminalId"`
	Amount                 *int64 `json:"amount"`
	Currency               string `json:"currency"`
	OriginalOnlineAPIRefID string `json:"originalOnlineAPIRefId"`
	PaymentMethodID        *int   `json:"paymentMethodId"`
	ECRReference           string `json:"ecrReference"`
	// Tip is refused: only a purchase takes one (read to say so).
	Tip *Tip `json:"tip"`
}

// Validate checks the fields' shapes and ranges.
func (r *RefundRequest) Validate() error {
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	switch {
	case r.Amount == nil:
		f.Add("/amount", "is required")
	case *r.Amount < MinAmount || *r.Amount > MaxAmount:
		f.Add("/amount", "%s", amountRangeMessage(r.Currency))
	}
	checkCurrency(&f, r.Currency)
	if r.OriginalOnlineAPIRefID != "" && !ValidRef(r.OriginalOnlineAPIRefID) {
		f.Add("/originalOnlineAPIRefId", "is not an onlineAPIRefId")
	}
	CheckECRReference(&f, "/ecrReference", r.ECRReference)
	if r.Tip != nil {
		f.Add("/tip", "only a purchase takes a tip; a refund pays back an amount (up to the purchase's totalAmount less its cashback)")
	}
	return f.Err()
}

// DecodeHint words the error of a member of a refund body that is not of
// its type (PurchaseRequest.DecodeHint).
func (r *RefundRequest) DecodeHint(field string, body []byte) string {
	return amountDecodeHint(field, body, "/amount")
}

// ReversalRequest is the body of POST /reversal.
type ReversalRequest struct {
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	ECRReference   string `json:"ecrReference"`
}

// Validate checks the fields' shapes.
func (r *ReversalRequest) Validate() error {
	var f FieldErrors
	checkRef(&f, r.OnlineAPIRefID, "is required")
	CheckECRReference(&f, "/ecrReference", r.ECRReference)
	return f.Err()
}

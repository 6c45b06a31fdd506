package instore

import (
	"encoding/json"
	"strconv"
	"time"
)

// TransactionWire is a transaction as the Online API shows it: the one
// wire type of the resource (api/online-api.yaml, schema Transaction), which
// the Online API, the console and the tests encode and decode.
type TransactionWire struct {
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	// Type is PURCHASE, REFUND, REVERSAL, PRE_AUTH, INCREMENT, CAPTURE or
	// VOID (TypePurchase...).
	Type       TransactionType `json:"type"`
	TerminalID string          `json:"terminalId"`
	// Amount is the total charged, cashback included, in minor units.
	Amount         int64 `json:"amount"`
	CashbackAmount int64 `json:"cashbackAmount"`
	// TipAmount is the tip the terminal charged (0 without one, and until
	// the purchase is APPROVED); TotalAmount is Amount plus TipAmount, what
	// the card was charged.
	TipAmount       int64      `json:"tipAmount"`
	TotalAmount     int64      `json:"totalAmount"`
	VATAmount       *int64     `json:"vatAmount"`
	Currency        string     `json:"currency"`
	PaymentMethodID *int       `json:"paymentMethodId"`
	ECRReference    NullString `json:"ecrReference"`
	PrintReceipt    bool       `json:"printReceipt"`
	// Tip is how the purchase asked for a tip; nil (null) without one.
	Tip *Tip `json:"tip"`
	// StatusID and Status are an entry of transactionStatuses; 14
	// PENDING until the transaction is final.
	StatusID TransactionStatus `json:"statusId"`
	Status   string            `json:"status"`
	// ErrorID and ErrorCode are set when the service ended the
	// transaction with a code (WP23, WP25, WP36, WP37); 0 and "" (null on
	// the wire) otherwise: no code has id 0.
	ErrorID   NullInt    `json:"errorId"`
	ErrorCode NullString `json:"errorCode"`
	// Progress is the latest stage the terminal reported while PENDING
	// (SENT, ACKNOWLEDGED, WAITING_FOR_CARD, WAITING_FOR_PIN,
	// AUTHORIZING), FINAL after.
	Progress Progress `json:"progress"`
	// Version increases with every change.
	Version        int64      `json:"version"`
	CreatedAt      time.Time  `json:"createdAt"`
	AcknowledgedAt *time.Time `json:"acknowledgedAt"`
	CompletedAt    *time.Time `json:"completedAt"`
	// Reverses and ReversedBy link a REVERSAL and its purchase.
	Reverses   NullString `json:"reverses"`
	ReversedBy NullString `json:"reversedBy"`
	// Result is what the terminal reported; nil before.
	Result *ResultWire `json:"result,omitempty"`
	// Confirmation is set on a purchase that asked for confirmation
	// (confirmWithinSeconds); absent otherwise.
	Confirmation *ConfirmationWire `json:"confirmation,omitempty"`
	// Authorization is an approved PRE_AUTH's authorisation; absent
	// otherwise.
	Authorization *Authorization `json:"authorization,omitempty"`
	// PreAuthorization names the pre-auth an INCREMENT, CAPTURE or VOID
	// acts on; absent otherwise.
	PreAuthorization string `json:"preAuthorization,omitempty"`
	// Forwarding is an offline approval's forwarding (forwarding.go); nil
	// (null) on every other transaction.
	Forwarding *Forwarding `json:"forwarding"`
}

// ConfirmationWire is the confirmation of a sale that asked for one.
type ConfirmationWire struct {
	// State is PENDING (until the ECR confirms the APPROVED sale or its
	// window passes), CONFIRMED or AUTO_REVERSED.
	State ConfirmState `json:"state"`
	// WithinSeconds is the window the purchase asked for.
	WithinSeconds int `json:"withinSeconds"`
	// Deadline is the end of the window (set once the sale is APPROVED).
	Deadline    *time.Time `json:"deadline"`
	ConfirmedAt *time.Time `json:"confirmedAt"`
}

// ResultWire is a final result as the Online API shows it.
type ResultWire struct {
	EntryMode         NullString `json:"entryMode"`
	CardBrand         NullString `json:"cardBrand"`
	MaskedPAN         NullString `json:"maskedPan"`
	AuthorizationCode NullString `json:"authorizationCode"`
	// PaymentMethod is the payment method used (nil for a card).
	PaymentMethod *PaymentMethodRef `json:"paymentMethod"`
	Receipt       Receipt           `json:"receipt"`
	// Offline: approved offline and queued on the terminal; the
	// transaction's forwarding says what became of it.
	Offline bool `json:"offline"`
}

// PaymentMethodRef names an entry of the paymentMethods list.
type PaymentMethodRef struct {
	ID   int    `json:"id"`
	Code string `json:"code"`
}

// NullString is a string member the wire shows as null when it is empty,
// so that Go code reads it as a plain string (the zero value for null).
type NullString string

// MarshalJSON encodes "" as null.
func (s NullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// UnmarshalJSON decodes null as "".
func (s *NullString) UnmarshalJSON(b []byte) error { return unmarshalNullable(b, (*string)(s)) }

// NullInt is an int member the wire shows as null when it is 0 (a member
// for which 0 is no valid value, such as errorId).
type NullInt int

// MarshalJSON encodes 0 as null.
func (n NullInt) MarshalJSON() ([]byte, error) {
	if n == 0 {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(n), 10), nil
}

// UnmarshalJSON decodes null as 0.
func (n *NullInt) UnmarshalJSON(b []byte) error { return unmarshalNullable(b, (*int)(n)) }

// unmarshalNullable decodes b into *v, null as T's zero value (which
// json.Unmarshal leaves as it is), and sets *v to that zero value too when
// b is not a T (the NullString and NullInt members).
func unmarshalNullable[T any](b []byte, v *T) error {
	var x T
	err := json.Unmarshal(b, &x)
	*v = x
	return err
}

func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// TransactionWire renders t as the Online API shows it.
func (meta *Metadata) TransactionWire(t *Transaction) *TransactionWire {
	out := &TransactionWire{
		OnlineAPIRefID: t.ID, Type: t.Type, TerminalID: t.TerminalID, Amount: t.Amount,
		CashbackAmount: t.CashbackAmount, TipAmount: t.TipAmount, TotalAmount: t.TotalAmount(), Tip: t.Tip,
		VATAmount: t.VATAmount, Currency: t.Currency,
		PaymentMethodID: t.PaymentMethodID, ECRReference: NullString(t.ECRReference), PrintReceipt: t.PrintReceipt,
		StatusID: t.StatusID, Progress: t.Progress, Version: t.Version, CreatedAt: t.CreatedAt,
		AcknowledgedAt: t.AcknowledgedAt, CompletedAt: t.CompletedAt,
		Reverses: NullString(t.Reverses), ReversedBy: NullString(t.ReversedBy),
	}
	if c, ok := meta.TransactionStatus(t.StatusID); ok {
		out.Status = c.Code
	}
	if a := t.Authorization; a != nil {
		cp := *a
		cp.ExpiresAt = cp.ExpiresAt.UTC()
		out.Authorization = &cp
	}
	if OnPreAuth(t.Type) {
		out.PreAuthorization = t.OriginalID
	}
	if f := t.Forwarding; f != nil {
		cp := *f
		if cp.ForwardedAt != nil {
			cp.ForwardedAt = new(cp.ForwardedAt.UTC())
		}
		out.Forwarding = &cp
	}
	if t.ConfirmState != "" {
		out.Confirmation = &ConfirmationWire{State: t.ConfirmState, WithinSeconds: int(t.ConfirmWithin / time.Second),
			Deadline: t.ConfirmDeadline, ConfirmedAt: t.ConfirmedAt}
	}
	if t.ErrorID != nil {
		for _, c := range meta.ErrorCodes {
			if c.ID == *t.ErrorID {
				out.ErrorID, out.ErrorCode = NullInt(c.ID), NullString(c.Code)
			}
		}
	}
	if r := t.Result; r != nil {
		rj := &ResultWire{
			EntryMode: NullString(r.EntryMode), CardBrand: NullString(r.CardBrand), MaskedPAN: NullString(r.MaskedPAN),
			AuthorizationCode: NullString(r.AuthorizationCode),
			Receipt:           Receipt{Customer: nonNil(r.Receipt.Customer), Merchant: nonNil(r.Receipt.Merchant)},
			Offline:           r.Offline,
		}
		if r.PaymentMethodID != nil {
			if c, ok := meta.PaymentMethod(*r.PaymentMethodID); ok {
				rj.PaymentMethod = &PaymentMethodRef{ID: c.ID, Code: c.Code}
			}
		}
		out.Result = rj
	}
	return out
}

// PrintJobWire is a print job as the Online API shows it (schema PrintJob).
type PrintJobWire struct {
	PrintID    string `json:"printId"`
	TerminalID string `json:"terminalId"`
	// StatusID and Status are an entry of printStatuses (0 SUCCESS ...);
	// nil and "" (null on the wire) while the job runs.
	StatusID    *PrintStatus `json:"statusId"`
	Status      NullString   `json:"status"`
	CreatedAt   time.Time    `json:"createdAt"`
	CompletedAt *time.Time   `json:"completedAt"`
}

// PrintJobWire renders j as the Online API shows it.
func (meta *Metadata) PrintJobWire(j *PrintJob) *PrintJobWire {
	out := &PrintJobWire{PrintID: j.ID, TerminalID: j.TerminalID, StatusID: j.StatusID, CreatedAt: j.CreatedAt, CompletedAt: j.CompletedAt}
	if j.StatusID != nil {
		if c, ok := meta.PrintStatus(*j.StatusID); ok {
			out.Status = NullString(c.Code)
		}
	}
	return out
}

package instore

import "time"

// TransactionWire is a transaction as the Online API shows it: the one
// wire type of the resource (api/online-api.yaml, schema Transaction), which
// the Online API, the console and the tests encode and decode.
type TransactionWire struct {
	OnlineAPIRefID  string      `json:"onlineAPIRefId"`
	Type            string      `json:"type"`
	TerminalID      string      `json:"terminalId"`
	Amount          int64       `json:"amount"`
	CashbackAmount  int64       `json:"cashbackAmount"`
	VATAmount       *int64      `json:"vatAmount"`
	Currency        string      `json:"currency"`
	PaymentMethodID *int        `json:"paymentMethodId"`
	ECRReference    *string     `json:"ecrReference"`
	PrintReceipt    bool        `json:"printReceipt"`
	StatusID        int         `json:"statusId"`
	Status          string      `json:"status"`
	ErrorID         *int        `json:"errorId"`
	ErrorCode       *string     `json:"errorCode"`
	Progress        string      `json:"progress"`
	Version         int64       `json:"version"`
	CreatedAt       time.Time   `json:"createdAt"`
	AcknowledgedAt  *time.Time  `json:"acknowledgedAt"`
	CompletedAt     *time.Time  `json:"completedAt"`
	Reverses        *string     `json:"reverses"`
	ReversedBy      *string     `json:"reversedBy"`
	Result          *ResultWire `json:"result,omitempty"`
}

// ResultWire is a final result as the Online API shows it.
type ResultWire struct {
	EntryMode         *string           `json:"entryMode"`
	CardBrand         *string           `json:"cardBrand"`
	MaskedPAN         *string           `json:"maskedPan"`
	AuthorizationCode *string           `json:"authorizationCode"`
	PaymentMethod     *PaymentMethodRef `json:"paymentMethod"`
	Receipt           Receipt           `json:"receipt"`
}

// PaymentMethodRef names an entry of the paymentMethods list.
type PaymentMethodRef struct {
	ID   int    `json:"id"`
	Code string `json:"code"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// TransactionWire renders t as the Online API shows it.
func (meta *Metadata) TransactionWire(t *Transaction) *TransactionWire {
	out := &TransactionWire{
		OnlineAPIRefID: t.ID, Type: t.Type, TerminalID: t.TerminalID, Amount: t.Amount,
		CashbackAmount: t.CashbackAmount, VATAmount: t.VATAmount, Currency: t.Currency,
		PaymentMethodID: t.PaymentMethodID, ECRReference: optional(t.ECRReference), PrintReceipt: t.PrintReceipt,
		StatusID: t.StatusID, Progress: t.Progress, Version: t.Version, CreatedAt: t.CreatedAt,
		AcknowledgedAt: t.AcknowledgedAt, CompletedAt: t.CompletedAt,
		Reverses: optional(t.Reverses), ReversedBy: optional(t.ReversedBy),
	}
	if c, ok := meta.TransactionStatus(t.StatusID); ok {
		out.Status = c.Code
	}
	if t.ErrorID != nil {
		for _, c := range meta.ErrorCodes {
			if c.ID == *t.ErrorID {
				id, code := c.ID, c.Code
				out.ErrorID, out.ErrorCode = &id, &code
			}
		}
	}
	if r := t.Result; r != nil {
		rj := &ResultWire{
			EntryMode: optional(r.EntryMode), CardBrand: optional(r.CardBrand), MaskedPAN: optional(r.MaskedPAN),
			AuthorizationCode: optional(r.AuthorizationCode),
			Receipt:           Receipt{Customer: nonNil(r.Receipt.Customer), Merchant: nonNil(r.Receipt.Merchant)},
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
	PrintID     string     `json:"printId"`
	TerminalID  string     `json:"terminalId"`
	StatusID    *int       `json:"statusId"`
	Status      *string    `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	CompletedAt *time.Time `json:"completedAt"`
}

// PrintJobWire renders j as the Online API shows it.
func (meta *Metadata) PrintJobWire(j *PrintJob) *PrintJobWire {
	out := &PrintJobWire{PrintID: j.ID, TerminalID: j.TerminalID, StatusID: j.StatusID, CreatedAt: j.CreatedAt, CompletedAt: j.CompletedAt}
	if j.StatusID != nil {
		if c, ok := meta.PrintStatus(*j.StatusID); ok {
			out.Status = &c.Code
		}
	}
	return out
}

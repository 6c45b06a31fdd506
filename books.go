package instore

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The books: totals of a merchant's transactions (GET /totals) and the
// reconciliation of an ECR's own books against the service's (POST
// /reconciliation). docs/accounting.md is the integrator's account.

// Reconciliation limits.
const (
	// MaxReconcileLines is the most lines of an ECR's books one
	// reconciliation takes; more answer a validation problem.
	MaxReconcileLines = 10000
	// MaxReconcileLineBytes bounds one line of the body: a line at its
	// longest (a 64-character onlineAPIRefId, a 64-character ecrReference
	// of 4-byte UTF-8 characters, or of characters Go's encoding/json
	// writes as 6-byte escapes (< > &), the longest type and status,
	// 8 digits) with its member names, quotes, commas and indentation
	// fits.
	MaxReconcileLineBytes = 640
	// MaxReconcileBodyBytes is the largest body of POST /reconciliation:
	// MaxReconcileLines lines of MaxReconcileLineBytes and 4 KiB for the
	// rest (6,404,096 bytes), so that the line count is the limit a
	// body of 10,000 lines meets, not its bytes.
	MaxReconcileBodyBytes = MaxReconcileLines*MaxReconcileLineBytes + 4<<10
	// MaxReconcileService is the most of the service's transactions one
	// reconciliation compares: a window holding more is refused (a
	// validation problem), to be reconciled in shorter windows or per
	// terminal.
	MaxReconcileService = 50000
	// MaxTotalAmount is the largest totalAmount: an amount and a tip of
	// MaxAmount each.
	MaxTotalAmount = 2 * MaxAmount
	// maxReconcileFieldErrors caps the field errors of one refused body.
	maxReconcileFieldErrors = 100
)

// BooksStore reads the books: grouped totals and the rows a
// reconciliation compares.
type BooksStore interface {
	// Totals sums a merchant's transactions created in [f.From, f.To)
	// (of one terminal ID when f.TerminalID is set), grouped by currency,
	// type and status, in that order: Count and Amount (the sum of
	// TotalAmount, tips included) of each group, computed by the
	// database. Status is left "".
	Totals(ctx context.Context, f TotalsFilter) ([]Total, error)
	// BookEntries lists the same transactions as Totals, oldest first
	// (created_at, then id), at most limit, each with the fields a
	// reconciliation compares. Status is left "".
	BookEntries(ctx context.Context, f TotalsFilter, limit int) ([]BookEntry, error)
}

// TotalsQuery is what GET /totals asks, parsed: the listing's window
// (the last 24 hours by default) and an optional terminal ID.
type TotalsQuery struct {
	From, To   *time.Time
	TerminalID string
}

// TotalsFilter selects the transactions of a merchant that totals and
// reconciliations read: created in [From, To), of TerminalID when set.
type TotalsFilter struct {
	MerchantID string
	From, To   time.Time
	TerminalID string
}

// Total is one group of the totals: the transactions of one currency,
// type and status, how many and their total amount (TotalAmount, tips
// included) in minor units.
type Total struct {
	Currency string            `json:"currency"`
	Type     TransactionType   `json:"type"`
	StatusID TransactionStatus `json:"statusId"`
	Status   string            `json:"status"`
	Count    int64             `json:"count"`
	Amount   int64             `json:"amount"`
}

// TotalsWire is the answer of GET /totals: the window summed (the one
// asked, or the default) and the groups, every status included.
type TotalsWire struct {
	From       time.Time  `json:"from"`
	To         time.Time  `json:"to"`
	TerminalID NullString `json:"terminalId"`
	Totals     []Total    `json:"totals"`
}

// BookEntry is a transaction as a reconciliation compares it: Amount is
// its TotalAmount (tips included).
type BookEntry struct {
	OnlineAPIRefID string            `json:"onlineAPIRefId"`
	ECRReference   NullString        `json:"ecrReference"`
	TerminalID     string            `json:"terminalId"`
	Type           TransactionType   `json:"type"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	StatusID       TransactionStatus `json:"-"`
	Status         string            `json:"status"`
	CreatedAt      time.Time         `json:"createdAt"`
}

// ReconcileLine is one transaction of the ECR's own books: named by the
// service's onlineAPIRefId or, without it, by the ECR's own ecrReference.
// Amount is what the card was charged (the transaction's totalAmount);
// Status a code of the transactionStatuses list.
type ReconcileLine struct {
	OnlineAPIRefID string          `json:"onlineAPIRefId"`
	ECRReference   string          `json:"ecrReference"`
	Type           TransactionType `json:"type"`
	Amount         *int64          `json:"amount"`
	Currency       string          `json:"currency"`
	Status         string          `json:"status"`
}

// ReconcileRequest is the body of POST /reconciliation. From and To (RFC
// 3339) are required and follow the listing's rules: from before to, at
// most 30 days apart (WP26), from within the past 90 days (WP27).
type ReconcileRequest struct {
	From         string          `json:"from"`
	To           string          `json:"to"`
	TerminalID   string          `json:"terminalId"`
	Transactions []ReconcileLine `json:"transactions"`

	// from and to are From and To parsed by Validate.
	from, to time.Time
}

// Window is the request's window, once Validate accepted it.
func (r *ReconcileRequest) Window() (from, to time.Time) { return r.from, r.to }

// DecodeHint words the error of a line's amount that is not an integer.
func (r *ReconcileRequest) DecodeHint(field string, body []byte) string {
	if len(field) > len("/amount") && field[len(field)-len("/amount"):] == "/amount" {
		return "must be an integer number of minor units (1250 for 12.50 SEK), from 0 to " + fmt.Sprint(MaxTotalAmount)
	}
	return ""
}

// Validate checks the request's shape: the window, the terminal ID and
// every line (its reference, type, amount, currency and status). Two
// lines naming the same onlineAPIRefId are refused: a transaction is in
// the books once. More than MaxReconcileLines lines are refused before
// any line is read. meta gives the status codes.
func (r *ReconcileRequest) Validate(meta *Metadata) error {
	var f FieldErrors
	if len(r.Transactions) > MaxReconcileLines {
		return &Error{Code: EValidation, Fields: []FieldError{{Field: "/transactions", Message: fmt.Sprintf("must hold at most %d lines", MaxReconcileLines)}},
			Detail: fmt.Sprintf("A reconciliation takes at most %d lines, this one has %d; reconcile a shorter window or one terminal at a time.", MaxReconcileLines, len(r.Transactions))}
	}
	r.from = parseWindowEnd(&f, "/from", r.From)
	r.to = parseWindowEnd(&f, "/to", r.To)
	if len(f) == 0 && !r.from.Before(r.to) {
		f.Add("/from", "must be before to")
	}
	if r.TerminalID != "" && !ValidTerminalID(r.TerminalID) {
		f.Add("/terminalId", "must be 8 digits")
	}
	seen := make(map[string]int, len(r.Transactions))
	for i := range r.Transactions {
		if len(f) >= maxReconcileFieldErrors {
			break
		}
		r.Transactions[i].check(&f, meta, fmt.Sprintf("/transactions/%d", i), seen, i)
	}
	if err := f.Err(); err != nil {
		if len(f) >= maxReconcileFieldErrors {
			err.(*Error).Detail = fmt.Sprintf("The request is not valid; see errors (the first %d).", maxReconcileFieldErrors)
		}
		return err
	}
	return nil
}

func parseWindowEnd(f *FieldErrors, field, s string) time.Time {
	if s == "" {
		f.Add(field, "is required: an RFC 3339 time such as 2026-01-31T00:00:00Z")
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		f.Add(field, "must be an RFC 3339 time such as 2026-01-31T00:00:00Z")
	}
	return t.UTC()
}

// check adds the field errors of line i (at pointer at); seen maps the
// onlineAPIRefIds of the lines before it to their index.
func (l *ReconcileLine) check(f *FieldErrors, meta *Metadata, at string, seen map[string]int, i int) {
	switch {
	case l.OnlineAPIRefID == "" && l.ECRReference == "":
		f.Add(at, "names no transaction: give its onlineAPIRefId or its ecrReference")
	case l.OnlineAPIRefID != "" && !ValidRef(l.OnlineAPIRefID):
		f.Add(at+"/onlineAPIRefId", "is not an onlineAPIRefId")
	case l.OnlineAPIRefID != "":
		if j, dup := seen[l.OnlineAPIRefID]; dup {
			f.Add(at+"/onlineAPIRefId", "names the same transaction as /transactions/%d: each transaction is in the books once", j)
		} else {
			seen[l.OnlineAPIRefID] = i
		}
	}
	if l.ECRReference != "" {
		CheckECRReference(f, at+"/ecrReference", l.ECRReference)
	}
	if l.Type == "" {
		f.Add(at+"/type", "is required")
	} else if !slices.Contains(TransactionTypes, l.Type) {
		f.Add(at+"/type", "must be one of %s", JoinTypes(TransactionTypes))
	}
	switch {
	case l.Amount == nil:
		f.Add(at+"/amount", "is required")
	case *l.Amount < 0 || *l.Amount > MaxTotalAmount:
		f.Add(at+"/amount", "must be from 0 to %d (minor units, the totalAmount: tips included)", MaxTotalAmount)
	}
	if _, ok := CurrencyExponent(l.Currency); !ok {
		f.Add(at+"/currency", "must be an ISO 4217 currency code such as SEK")
	}
	if _, ok := meta.TransactionStatusByCode(l.Status); !ok {
		f.Add(at+"/status", "must be a code of the transactionStatuses list, such as APPROVED")
	}
}

// TransactionStatusByCode returns the transactionStatuses entry with that
// code (APPROVED...).
func (m *Metadata) TransactionStatusByCode(code string) (Code, bool) {
	for _, c := range m.TransactionStatuses {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}

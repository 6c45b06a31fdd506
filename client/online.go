package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"time"

	"github.com/instore-dev/instore"
)

// Prefix is the base path of the Online API on its base URL.
const Prefix = "/in-store/api/v1"

// Metadata is the answer of GET /in-store/api/v1/metadata: the four code
// lists, with lookups by id and code.
type Metadata = instore.Metadata

// Code is one entry of a code list: id, code, description.
type Code = instore.Code

// Terminal is a terminal ID as the Online API shows it: its binding and
// the live state of the device linked to it.
type Terminal = instore.TerminalView

// Receipt holds a transaction's customer and merchant receipts, one string
// per line.
type Receipt = instore.Receipt

// Transaction is a purchase, refund or reversal as the Online API shows it:
// the service's own wire type (instore.TransactionWire), whose members the
// service sends as null are zero here (ErrorID 0 and ErrorCode "" mean no
// error code; no WP code has id 0); RawJSON returns the object exactly as
// sent.
type Transaction struct {
	instore.TransactionWire

	raw json.RawMessage
}

// Result is what the terminal reported with a final status.
type Result = instore.ResultWire

// PaymentMethodRef names an entry of the paymentMethods list.
type PaymentMethodRef = instore.PaymentMethodRef

// UnmarshalJSON decodes the object and keeps it for RawJSON.
func (t *Transaction) UnmarshalJSON(b []byte) error {
	return decodeKeepingRaw(b, &t.TransactionWire, &t.raw)
}

// decodeKeepingRaw decodes b into *wire and keeps a copy of b in *raw;
// on an error both stay as they were.
func decodeKeepingRaw[W any](b []byte, wire *W, raw *json.RawMessage) error {
	var w W
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*wire, *raw = w, append(json.RawMessage(nil), b...)
	return nil
}

// RawJSON returns the transaction exactly as the service sent it (nil for
// a Transaction built in code), for programs that pass it on unchanged.
func (t *Transaction) RawJSON() json.RawMessage { return t.raw }

// Confirmation is the ECR confirmation of a purchase that asked for one
// (PurchaseParams.ConfirmWithinSeconds), Transaction.Confirmation: its
// State (instore.ConfirmPending, ConfirmConfirmed, ConfirmAutoReversed),
// the window asked for, the Deadline (set once the sale is APPROVED) and
// when it was confirmed.
type Confirmation = instore.ConfirmationWire

// AwaitsConfirmation reports whether the transaction is an APPROVED sale
// still waiting for the ECR's Confirm: it is reversed at
// Confirmation.Deadline unless confirmed before.
func (t *Transaction) AwaitsConfirmation() bool {
	return t.Approved() && t.Confirmation != nil && t.Confirmation.State == instore.ConfirmPending
}

// Final reports whether the transaction has a final status: every status
// but PENDING (14). A final status changes again only to REVERSED (13).
func (t *Transaction) Final() bool { return t.StatusID != instore.StatusPending }

// Approved reports whether the transaction ended APPROVED (0).
func (t *Transaction) Approved() bool { return t.StatusID == instore.StatusApproved }

// PrintJob is text printed on a terminal's printer, as the service shows
// it (instore.PrintJobWire): StatusID nil and Status "" while it runs.
type PrintJob struct {
	instore.PrintJobWire

	raw json.RawMessage
}

// UnmarshalJSON decodes the object and keeps it for RawJSON.
func (j *PrintJob) UnmarshalJSON(b []byte) error {
	return decodeKeepingRaw(b, &j.PrintJobWire, &j.raw)
}

// RawJSON returns the print job exactly as the service sent it.
func (j *PrintJob) RawJSON() json.RawMessage { return j.raw }

// Int returns a pointer to v, for optional members such as
// PurchaseParams.PaymentMethodID where 0 is a value.
func Int(v int) *int { return &v }

// Int64 returns a pointer to v, for optional amounts such as
// PurchaseParams.VATAmount.
func Int64(v int64) *int64 { return &v }

// PurchaseParams is the body of POST /in-store/api/v1/purchase. Amounts
// are integers in minor units of Currency (ParseAmount converts "12.50").
type PurchaseParams struct {
	TerminalID string `json:"terminalId"`
	// Amount is the total charged, cashback included: 1 to 99999999.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// CashbackAmount is the part of Amount paid out as cash (0: none).
	CashbackAmount int64 `json:"cashbackAmount,omitempty"`
	// VATAmount is the VAT included in Amount, for the receipt.
	VATAmount *int64 `json:"vatAmount,omitempty"`
	// PaymentMethodID pays through a payment method of the metadata's
	// paymentMethods list instead of a card (WP22 if unknown).
	PaymentMethodID *int `json:"paymentMethodId,omitempty"`
	// ECRReference is the ECR's own reference of the sale, at most 64
	// characters.
	ECRReference string `json:"ecrReference,omitempty"`
	PrintReceipt bool   `json:"printReceipt,omitempty"`
	// ConfirmWithinSeconds asks for ECR confirmation (10 to 600; 0: none):
	// once the sale is APPROVED the ECR has this long to Confirm it, after
	// saving the order; if it does not, the service reverses the sale on
	// its terminal (REVERSED, Confirmation.State AUTO_REVERSED). This closes
	// "charged, but the order was never saved" after a crash of the ECR.
	ConfirmWithinSeconds int `json:"confirmWithinSeconds,omitempty"`
	// Tip asks the cardholder for a tip on top of Amount (nil: none):
	// TipPrompt, TipEnterTotal or TipFixed. The transaction then shows the
	// tip charged (TipAmount) and what the card was charged (TotalAmount).
	Tip *Tip `json:"tip,omitempty"`
}

// Tip is how a purchase asks for a tip (instore.Tip).
type Tip = instore.Tip

// TipPrompt asks the cardholder to pick one of 1-3 percentages (1-100)
// of the amount less its cashback, another amount or no tip.
func TipPrompt(percentages ...int) *Tip {
	return &Tip{Mode: instore.TipPrompt, Suggestions: percentages}
}

// TipEnterTotal asks the cardholder to type the total to pay; the tip is
// the total less the amount.
func TipEnterTotal() *Tip { return &Tip{Mode: instore.TipEnterTotal} }

// TipFixed charges a tip the ECR already knows, in minor units (at most
// the amount).
func TipFixed(amount int64) *Tip { return &Tip{Mode: instore.TipFixed, Amount: &amount} }

// RefundParams is the body of POST /in-store/api/v1/refund.
type RefundParams struct {
	TerminalID string `json:"terminalId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	// OriginalOnlineAPIRefID names the APPROVED purchase refunded; the
	// refunds of one purchase never exceed its TotalAmount (its tip
	// included) less its cashback. A purchase paid
	// with a payment method must be named and refunded with that method.
	OriginalOnlineAPIRefID string `json:"originalOnlineAPIRefId,omitempty"`
	PaymentMethodID        *int   `json:"paymentMethodId,omitempty"`
	ECRReference           string `json:"ecrReference,omitempty"`
}

// ReversalParams is the body of POST /in-store/api/v1/reversal.
type ReversalParams struct {
	// OnlineAPIRefID is an APPROVED purchase that is the latest
	// transaction of its terminal.
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	ECRReference   string `json:"ecrReference,omitempty"`
}

// PrintParams is the body of POST /in-store/api/v1/print: Lines, or a
// transaction's receipt (OnlineAPIRefID and Copy).
type PrintParams struct {
	TerminalID string `json:"terminalId"`
	// Lines are 1 to 200 lines of at most 64 characters.
	Lines          []string `json:"lines,omitempty"`
	OnlineAPIRefID string   `json:"onlineAPIRefId,omitempty"`
	// Copy is CUSTOMER or MERCHANT (instore.CopyCustomer...).
	Copy string `json:"copy,omitempty"`
}

// ListParams selects transactions for GET /in-store/api/v1/transactions.
// Zero members are not sent: the service then lists the last 24 hours, 100
// at a time.
type ListParams struct {
	// From and To bound createdAt: at most 30 days apart (WP26), From
	// within the past 90 days (WP27).
	From, To     time.Time
	TerminalID   string
	StatusID     *instore.TransactionStatus
	ECRReference string
	// Unconfirmed lists only the APPROVED sales still awaiting the ECR's
	// confirmation: what an ECR restarting after a crash confirms (or
	// lets be reversed).
	Unconfirmed bool
	// Types lists only transactions of these types (PRE_AUTH, CAPTURE...).
	Types []instore.TransactionType
	// AuthorizationState lists only the pre-auths in this state (OPEN: a
	// hotel's open folios).
	AuthorizationState instore.AuthorizationState
	// Forwarding lists only the offline approvals in this forwarding
	// state (QUEUED: not forwarded yet; DECLINED: the merchant was not
	// paid).
	Forwarding instore.ForwardingState
	// Limit is the page size, 1 to 1000.
	Limit int
	// Cursor continues a listing (TransactionPage.NextCursor).
	Cursor string
}

func (p ListParams) at(cursor string) ListParams { p.Cursor = cursor; return p }

func (p ListParams) query() url.Values {
	q := url.Values{}
	if !p.From.IsZero() {
		q.Set("from", p.From.UTC().Format(time.RFC3339))
	}
	if !p.To.IsZero() {
		q.Set("to", p.To.UTC().Format(time.RFC3339))
	}
	if p.TerminalID != "" {
		q.Set("terminalId", p.TerminalID)
	}
	if p.StatusID != nil {
		q.Set("statusId", strconv.Itoa(int(*p.StatusID)))
	}
	if p.ECRReference != "" {
		q.Set("ecrReference", p.ECRReference)
	}
	if p.Unconfirmed {
		q.Set("unconfirmed", "true")
	}
	if len(p.Types) > 0 {
		q.Set("type", instore.JoinTypes(p.Types))
	}
	if p.AuthorizationState != "" {
		q.Set("authorizationState", string(p.AuthorizationState))
	}
	if p.Forwarding != "" {
		q.Set("forwarding", string(p.Forwarding))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// TransactionPage is one page of a listing, newest first.
type TransactionPage struct {
	Transactions []*Transaction `json:"transactions"`
	// NextCursor continues the listing; "" on the last page.
	NextCursor string `json:"nextCursor"`
}

func (p *TransactionPage) items() ([]*Transaction, string) { return p.Transactions, p.NextCursor }

func (c *Client) get(ctx context.Context, path, route string, q url.Values, out any, opts []CallOption) error {
	_, err := c.do(ctx, call{s: c.online, method: http.MethodGet, path: path, route: route, query: q, opts: opts}, out)
	return err
}

// callAs is a call whose answer is one T: every typed call of the SDK.
func callAs[T any](ctx context.Context, c *Client, cl call) (*T, error) {
	var v T
	if _, err := c.do(ctx, cl, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// getAs is get of an answer that is one T.
func getAs[T any](ctx context.Context, c *Client, path, route string, q url.Values, opts []CallOption) (*T, error) {
	return callAs[T](ctx, c, call{s: c.online, method: http.MethodGet, path: path, route: route, query: q, opts: opts})
}

// getList is get of an answer that is a list of T under one member,
// {"<member>": [...]}, decoded as a struct of that one member would be.
func getList[T any](ctx context.Context, c *Client, path, route, member string, opts []CallOption) ([]T, error) {
	out := reflect.New(reflect.StructOf([]reflect.StructField{
		{Name: "List", Type: reflect.TypeFor[[]T](), Tag: reflect.StructTag(`json:"` + member + `"`)},
	}))
	if err := c.get(ctx, path, route, nil, out.Interface(), opts); err != nil {
		return nil, err
	}
	return out.Elem().Field(0).Interface().([]T), nil
}

// postAs is a POST to the Online API route (a path without parameters)
// of an answer that is one T.
func postAs[T any](ctx context.Context, c *Client, route string, body any, opts []CallOption) (*T, error) {
	return postAt[T](ctx, c, route, route, body, opts)
}

// postAt is a POST to path (route its template) of the Online API of an
// answer that is one T.
func postAt[T any](ctx context.Context, c *Client, path, route string, body any, opts []CallOption) (*T, error) {
	return callAs[T](ctx, c, call{s: c.online, method: http.MethodPost, path: path, route: route, body: body, opts: opts})
}

// Metadata returns the code lists in force: error codes, transaction
// statuses, payment methods and print statuses. Read them at run time
// rather than hard-coding them; the payment methods are the operator's.
func (c *Client) Metadata(ctx context.Context, opts ...CallOption) (*Metadata, error) {
	return getAs[Metadata](ctx, c, Prefix+"/metadata", Prefix+"/metadata", nil, opts)
}

// OpenAPIDocument returns the Online API's OpenAPI document (YAML) as the
// server serves it.
func (c *Client) OpenAPIDocument(ctx context.Context, opts ...CallOption) ([]byte, error) {
	resp, err := c.do(ctx, call{s: c.online, method: http.MethodGet, path: Prefix + "/openapi.yaml", route: Prefix + "/openapi.yaml", opts: opts}, nil)
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

// LinkTerminal binds the device showing linkCode on its screen to one of
// the merchant's terminal IDs. Relinking replaces the old binding on both
// sides. Errors: validation, WP03, WP16, link-code-invalid, WP09.
func (c *Client) LinkTerminal(ctx context.Context, terminalID, linkCode string, opts ...CallOption) (*Terminal, error) {
	return postAs[Terminal](ctx, c, Prefix+"/terminal/link", map[string]string{"terminalId": terminalID, "linkCode": linkCode}, opts)
}

// UnlinkTerminal removes a terminal ID's binding; the device then shows a
// new link code. Errors: validation, WP03, WP16, WP02, WP09.
func (c *Client) UnlinkTerminal(ctx context.Context, terminalID string, opts ...CallOption) (*Terminal, error) {
	return postAs[Terminal](ctx, c, Prefix+"/terminal/unlink", map[string]string{"terminalId": terminalID}, opts)
}

// Terminals lists the merchant's terminal IDs in terminal ID order.
func (c *Client) Terminals(ctx context.Context, opts ...CallOption) ([]*Terminal, error) {
	return getList[*Terminal](ctx, c, Prefix+"/terminals", Prefix+"/terminals", "terminals", opts)
}

// Terminal returns one of the merchant's terminal IDs. Errors: validation,
// WP03, WP16.
func (c *Client) Terminal(ctx context.Context, terminalID string, opts ...CallOption) (*Terminal, error) {
	return getAs[Terminal](ctx, c, Prefix+"/terminal/"+url.PathEscape(terminalID), Prefix+"/terminal/{terminalId}", nil, opts)
}

// Purchase starts a purchase and returns once the terminal acknowledged it
// (status PENDING); follow it with WaitForFinal. Errors, in order:
// validation, WP03, WP22, WP16, WP01, WP30, WP23, WP09; 504 WP25 when the
// terminal did not acknowledge (the transaction then is TECHNICAL_ERROR).
func (c *Client) Purchase(ctx context.Context, p PurchaseParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/purchase", p, opts)
}

// Refund starts a refund on a terminal, like Purchase. Errors as Purchase,
// plus WP04 and conflict for the original.
func (c *Client) Refund(ctx context.Context, p RefundParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/refund", p, opts)
}

// Reversal reverses an APPROVED purchase that is the latest transaction of
// its terminal, with no card; once the REVERSAL is approved the purchase
// is REVERSED. Errors: validation, WP03, WP04, not-reversible, WP16,
// not-reversible (its terminal ID now linked to another device), WP01,
// WP30, WP23, WP09.
func (c *Client) Reversal(ctx context.Context, p ReversalParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/reversal", p, opts)
}

// Cancel asks the terminal to abort the transaction running on it and
// returns that transaction: it ends ABORTED_BY_CASHIER with WP37, or in
// the final status the terminal reached first. Errors: validation, WP03,
// WP16, WP01, WP30, WP23, WP18 (nothing running).
func (c *Client) Cancel(ctx context.Context, terminalID string, opts ...CallOption) (*Transaction, error) {
	return c.cancel(ctx, map[string]string{"terminalId": terminalID}, opts)
}

// CancelTransaction is Cancel of the transaction onlineAPIRefID only: when
// it is no longer the one running on the terminal (it ended, and maybe
// another one runs), the answer is WP18 and nothing is cancelled, so a
// late cancel never aborts the next sale. Prefer it to Cancel whenever
// the ECR knows the transaction it means.
func (c *Client) CancelTransaction(ctx context.Context, terminalID, onlineAPIRefID string, opts ...CallOption) (*Transaction, error) {
	return c.cancel(ctx, map[string]string{"terminalId": terminalID, "onlineAPIRefId": onlineAPIRefID}, opts)
}

func (c *Client) cancel(ctx context.Context, body map[string]string, opts []CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/cancel", body, opts)
}

// Confirm confirms an APPROVED sale that asked for confirmation
// (PurchaseParams.ConfirmWithinSeconds) and returns it, Confirmation.State
// CONFIRMED: the sale stays APPROVED and is not reversed. Call it once the
// sale is saved on the ECR's side. Confirming again answers the same
// (idempotent) while the sale stays APPROVED, so a Confirm whose answer was
// lost is simply repeated. Errors: WP03, WP04, not-confirmable (409: the
// purchase did not ask for confirmation, is not APPROVED yet, was reversed
// (also after it was confirmed), or its deadline passed,
// when the service reverses it; Error.Detail says which).
func (c *Client) Confirm(ctx context.Context, onlineAPIRefID string, opts ...CallOption) (*Transaction, error) {
	return postAt[Transaction](ctx, c, Prefix+"/transaction/"+url.PathEscape(onlineAPIRefID)+"/confirm",
		Prefix+"/transaction/{onlineAPIRefId}/confirm", nil, opts)
}

// Transaction returns a transaction. With wait > 0 (at most a minute) the
// service holds the answer while the transaction is PENDING, until it is
// final or wait passes (long-poll). Errors: WP03, WP04.
func (c *Client) Transaction(ctx context.Context, onlineAPIRefID string, wait time.Duration, opts ...CallOption) (*Transaction, error) {
	return c.transaction(ctx, onlineAPIRefID, wait, -1, opts)
}

// TransactionAfter is Transaction that also answers as soon as the
// transaction's version is past afterVersion: any change (the terminal's
// acknowledgement or a progress stage), for a till that shows the
// terminal's progress.
func (c *Client) TransactionAfter(ctx context.Context, onlineAPIRefID string, afterVersion int64, wait time.Duration, opts ...CallOption) (*Transaction, error) {
	return c.transaction(ctx, onlineAPIRefID, wait, max(afterVersion, 0), opts)
}

func (c *Client) transaction(ctx context.Context, onlineAPIRefID string, wait time.Duration, afterVersion int64, opts []CallOption) (*Transaction, error) {
	secs := int((wait + time.Second - 1) / time.Second)
	secs = min(max(secs, 0), instore.MaxWait)
	q := url.Values{}
	if secs > 0 {
		q.Set("wait", strconv.Itoa(secs))
	}
	if afterVersion >= 0 {
		q.Set("afterVersion", strconv.FormatInt(afterVersion, 10))
	}
	if len(q) == 0 {
		q = nil
	}
	return callAs[Transaction](ctx, c, call{
		s: c.online, method: http.MethodGet, path: Prefix + "/transaction/" + url.PathEscape(onlineAPIRefID),
		route: Prefix + "/transaction/{onlineAPIRefId}", query: q, wait: time.Duration(secs) * time.Second, opts: opts,
	})
}

// TransactionEvent is one entry of a transaction's timeline: a change, when
// it happened, who caused it (ECR, TERMINAL, TIMER), the status before and
// after, a short detail.
type TransactionEvent = instore.TransactionEvent

// TransactionEvents returns the timeline of a transaction, oldest first:
// every change it went through ("what happened to this sale?"). Errors:
// WP03, WP04.
func (c *Client) TransactionEvents(ctx context.Context, onlineAPIRefID string, opts ...CallOption) ([]TransactionEvent, error) {
	return getList[TransactionEvent](ctx, c, Prefix+"/transaction/"+url.PathEscape(onlineAPIRefID)+"/events",
		Prefix+"/transaction/{onlineAPIRefId}/events", "events", opts)
}

// WaitForFinal follows a transaction with long-polls until it is final and
// returns it. onChange, when not nil, is called with every version seen,
// the first and the final one included, so a caller can show the
// terminal's progress (WAITING_FOR_CARD, WAITING_FOR_PIN, AUTHORIZING):
// the long-polls then also answer at each change (afterVersion); without
// it they answer only at the final status, one request in all.
// When ctx ends first it returns the latest version seen (or nil) with an
// error wrapping ctx's; the transaction goes on at the terminal: Cancel it
// if it should not.
func (c *Client) WaitForFinal(ctx context.Context, onlineAPIRefID string, onChange func(*Transaction), opts ...CallOption) (*Transaction, error) {
	var last *Transaction
	seen := int64(-1)
	wait := time.Duration(instore.MaxWait) * time.Second
	for {
		w := wait
		if last == nil && onChange != nil {
			w = 0 // show the current state at once
		}
		if dl, ok := ctx.Deadline(); ok && w > 0 {
			w = min(w, time.Until(dl))
		}
		var t *Transaction
		var err error
		if onChange != nil && last != nil {
			t, err = c.TransactionAfter(ctx, onlineAPIRefID, seen, w, opts...)
		} else {
			t, err = c.Transaction(ctx, onlineAPIRefID, w, opts...)
		}
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("client: wait for %s: %w", onlineAPIRefID, context.Cause(ctx))
			}
			return last, err
		}
		last = t
		if t.Version != seen {
			seen = t.Version
			if onChange != nil {
				onChange(t)
			}
		}
		if t.Final() {
			return t, nil
		}
	}
}

// Transactions returns one page of the merchant's transactions, newest
// first. Errors: validation, WP03, WP26 (range over 30 days), WP27 (from
// more than 90 days ago), WP16 (terminalId).
func (c *Client) Transactions(ctx context.Context, p ListParams, opts ...CallOption) (*TransactionPage, error) {
	return getAs[TransactionPage](ctx, c, Prefix+"/transactions", Prefix+"/transactions", p.query(), opts)
}

// AllTransactions iterates over every transaction p selects, newest
// first, fetching pages as it goes; it stops after the first error, which
// it yields.
func (c *Client) AllTransactions(ctx context.Context, p ListParams, opts ...CallOption) iter.Seq2[*Transaction, error] {
	return listAll(ctx, c.Transactions, p, opts)
}

// Print prints lines, or a stored transaction's receipt, on a terminal and
// returns the job in its final print status: BUSY at once while the
// terminal is in a transaction, TIMEOUT when it did not answer in time.
// Errors: validation, WP03, WP16, WP04, WP01, WP23.
func (c *Client) Print(ctx context.Context, p PrintParams, opts ...CallOption) (*PrintJob, error) {
	if p.Lines == nil && p.OnlineAPIRefID == "" {
		return nil, errors.New("client: print: give Lines, or OnlineAPIRefID and Copy")
	}
	return postAs[PrintJob](ctx, c, Prefix+"/print", p, opts)
}

// PrintJob returns a print job. Errors: WP03, not-found.
func (c *Client) PrintJob(ctx context.Context, printID string, opts ...CallOption) (*PrintJob, error) {
	return getAs[PrintJob](ctx, c, Prefix+"/print/"+url.PathEscape(printID), Prefix+"/print/{printId}", nil, opts)
}

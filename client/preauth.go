package client

import (
	"context"

	"github.com/instore-dev/instore"
)

// Pre-authorisation: Preauthorize holds money on a card (a hotel's
// check-in); Increment raises it, Capture charges the final total and Void
// releases it, each on the pre-auth's terminal without the card. Each
// returns once the terminal acknowledged it (PENDING); follow it with
// WaitForFinal. An approved PRE_AUTH shows Authorization (state OPEN,
// CAPTURED, VOIDED or EXPIRED; authorizedAmount, capturedAmount,
// expiresAt). A captured pre-auth is refunded with Refund naming it, up
// to its capturedAmount; a pre-auth is never reversed.

// PreAuthParams is the body of POST /in-store/api/v1/preauthorization: a
// purchase's without cashback or confirmation.
type PreAuthParams struct {
	TerminalID string `json:"terminalId"`
	// Amount is what the card holds: 1 to 99999999.
	Amount          int64  `json:"amount"`
	Currency        string `json:"currency"`
	VATAmount       *int64 `json:"vatAmount,omitempty"`
	PaymentMethodID *int   `json:"paymentMethodId,omitempty"`
	ECRReference    string `json:"ecrReference,omitempty"`
	PrintReceipt    bool   `json:"printReceipt,omitempty"`
	// Tip asks for a tip on top of Amount, as a purchase does.
	Tip *Tip `json:"tip,omitempty"`
}

// IncrementParams is the body of POST /in-store/api/v1/increment.
type IncrementParams struct {
	// OnlineAPIRefID is the pre-auth: an APPROVED PRE_AUTH whose
	// authorisation is OPEN.
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	// Amount is the increase.
	Amount       int64  `json:"amount"`
	ECRReference string `json:"ecrReference,omitempty"`
}

// CaptureParams is the body of POST /in-store/api/v1/capture.
type CaptureParams struct {
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	// Amount is the final total, tip included: at most the authorised
	// amount times (1 + the service's capture tolerance, 0.20 by default).
	Amount int64 `json:"amount"`
	// TipAmount is the part of Amount that is tip (0: none).
	TipAmount    int64  `json:"tipAmount,omitempty"`
	ECRReference string `json:"ecrReference,omitempty"`
}

// VoidParams is the body of POST /in-store/api/v1/void.
type VoidParams struct {
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	ECRReference   string `json:"ecrReference,omitempty"`
}

// Preauthorize starts a pre-authorisation on a terminal, like Purchase
// (the same errors, in the same order).
func (c *Client) Preauthorize(ctx context.Context, p PreAuthParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/preauthorization", p, opts)
}

// Increment raises an OPEN pre-auth's authorised amount by p.Amount once
// the INCREMENT is approved. Errors, in order: validation, WP03, WP04,
// conflict (not OPEN; a capture or void of it in flight, or a void of it
// whose outcome is unknown), validation (past the largest authorised
// amount, 199999998), WP16, WP01, WP30, WP23, WP09.
func (c *Client) Increment(ctx context.Context, p IncrementParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/increment", p, opts)
}

// Capture charges an OPEN pre-auth's final total; once the CAPTURE is
// approved the pre-auth is CAPTURED for it. Errors as Increment, plus
// validation for a total past the tolerance.
func (c *Client) Capture(ctx context.Context, p CaptureParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/capture", p, opts)
}

// Void releases an OPEN pre-auth; once the VOID is approved it is VOIDED.
// Errors as Increment.
func (c *Client) Void(ctx context.Context, p VoidParams, opts ...CallOption) (*Transaction, error) {
	return postAs[Transaction](ctx, c, Prefix+"/void", p, opts)
}

// PreAuthOpen reports whether t is an approved pre-auth whose
// authorisation is OPEN.
func (t *Transaction) PreAuthOpen() bool {
	return t.Authorization != nil && t.Authorization.State == instore.AuthOpen
}

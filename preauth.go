package instore

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Pre-authorisation (docs/decisions.md, "Pre-authorisation"): a PRE_AUTH
// holds money on a card; INCREMENT, CAPTURE and VOID act on it on its
// terminal, without the card, each a transaction of its own whose
// OriginalID names the pre-auth. An approved PRE_AUTH carries its
// Authorization, which moves only through lifecycle.NextAuthorization,
// written in the database transaction of the approved INCREMENT, CAPTURE
// or VOID (Change.Pair).

// Pre-authorisation transaction types.
const (
	TypePreAuth   TransactionType = "PRE_AUTH"
	TypeIncrement TransactionType = "INCREMENT"
	TypeCapture   TransactionType = "CAPTURE"
	TypeVoid      TransactionType = "VOID"
)

// OnPreAuth reports whether a transaction of type typ acts on a pre-auth
// (INCREMENT, CAPTURE, VOID).
func OnPreAuth(typ TransactionType) bool {
	return typ == TypeIncrement || typ == TypeCapture || typ == TypeVoid
}

// AuthorizationState is the state of an approved pre-auth's authorisation.
type AuthorizationState string

// Authorisation states.
const (
	AuthOpen     AuthorizationState = "OPEN"
	AuthCaptured AuthorizationState = "CAPTURED"
	AuthVoided   AuthorizationState = "VOIDED"
	AuthExpired  AuthorizationState = "EXPIRED"
)

// AuthorizationStates lists every state, in the order the docs list them.
var AuthorizationStates = []AuthorizationState{AuthOpen, AuthCaptured, AuthVoided, AuthExpired}

// Authorization is the money an approved PRE_AUTH holds (the wire's
// "authorization"): AuthorizedAmount (its totalAmount, plus every approved
// increment), CapturedAmount (the approved capture's total, 0 before) and
// ExpiresAt (approval plus the pre-auth validity: an OPEN one is voided
// by the service then, and ends EXPIRED).
type Authorization struct {
	State            AuthorizationState `json:"state"`
	AuthorizedAmount int64              `json:"authorizedAmount"`
	CapturedAmount   int64              `json:"capturedAmount"`
	ExpiresAt        time.Time          `json:"expiresAt"`
}

// MaxAuthorizedAmount is the largest authorised amount of a pre-auth:
// what one with a tip may open with (MaxTotalAmount: an amount and a tip
// of MaxAmount each). An INCREMENT that would raise it past is refused,
// so that the VOID that releases it (its amount: the authorised amount)
// always fits the terminal protocol's frame.
const MaxAuthorizedAmount = MaxTotalAmount

// Defaults of the pre-authorisation settings (--capture-tolerance,
// --preauth-validity).
const (
	DefaultCaptureTolerance = 0.20
	DefaultPreAuthValidity  = 7 * 24 * time.Hour
)

// OpenPreAuth reports whether t is an approved PRE_AUTH whose
// authorisation is OPEN.
func (t *Transaction) OpenPreAuth() bool {
	return t.Type == TypePreAuth && t.Authorization != nil && t.Authorization.State == AuthOpen
}

// CaptureLimit is the most a capture of an authorisation of authorized
// may take: authorized × (1 + tolerance), rounded down to the minor unit.
func CaptureLimit(authorized int64, tolerance float64) int64 {
	return authorized + int64(math.Floor(float64(authorized)*tolerance+1e-9))
}

// CheckOnPreAuth is the one rule of what acts on a pre-auth: it decides
// whether t, a new INCREMENT, CAPTURE or VOID of the PRE_AUTH pre, may be
// created, given the other transactions that name pre as their original
// (others, as stored; nil: only pre's own state is checked) and the
// capture tolerance. Stores call it inside the database transaction that
// locks pre and inserts t (HistoryStore.CreateOnOriginal), so requests
// racing on one pre-auth are decided one after the other; the Service
// calls it before, to answer in the contract's order.
//
// The rule: only an approved PRE_AUTH whose authorisation is OPEN takes
// any (conflict otherwise); a CAPTURE or VOID of it that is PENDING blocks
// every other (conflict: its outcome decides the authorisation); a VOID
// whose outcome is unknown (ended TECHNICAL_ERROR by the service, WP23,
// WP25 or WP36, with no result from the terminal) blocks every INCREMENT
// and CAPTURE (conflict: the terminal may still approve it, and a void's
// late approval releases the hold, so a capture would charge money no
// longer held; another VOID is taken); a capture takes at most
// CaptureLimit of the authorised amount, and an increment at most what
// takes it to MaxAuthorizedAmount (validation, /amount); from its
// expiresAt on (t.CreatedAt), it takes only a VOID.
func CheckOnPreAuth(pre *Transaction, others []*Transaction, t *Transaction, tolerance float64) error {
	if !OnPreAuth(t.Type) {
		return fmt.Errorf("check on pre-auth: a %s does not act on a pre-auth", t.Type)
	}
	switch {
	case pre.Type != TypePreAuth:
		return Errorf(EConflict, "Only a pre-authorisation takes %s; the original is %s.", article(t.Type), article(pre.Type))
	case pre.StatusID != StatusApproved || pre.Authorization == nil:
		return Errorf(EConflict, "Only an APPROVED pre-authorisation takes %s; this one is in status %d.", article(t.Type), pre.StatusID)
	case pre.Authorization.State != AuthOpen:
		return Errorf(EConflict, "The pre-authorisation is %s; only an OPEN one takes %s.", pre.Authorization.State, article(t.Type))
	case t.Type != TypeVoid && !t.CreatedAt.IsZero() && !t.CreatedAt.Before(pre.Authorization.ExpiresAt):
		// Past its validity the hold may be gone at the issuer: it is
		// being voided (the expiry's VOID, retried by the sweep), and
		// takes nothing more.
		return Errorf(EConflict, "The pre-authorisation expired at %s and is being voided; it takes no %s.",
			pre.Authorization.ExpiresAt.UTC().Format(time.RFC3339), t.Type)
	}
	for _, o := range others {
		if (o.Type == TypeCapture || o.Type == TypeVoid) && o.StatusID == StatusPending {
			e := Errorf(EConflict, "A %s of the pre-authorisation is in flight (%s); wait for its outcome.", o.Type, o.ID)
			e.OnlineAPIRefID = o.ID
			return e
		}
	}
	if t.Type != TypeVoid {
		for _, o := range others {
			if voidMayRelease(o) {
				e := Errorf(EConflict, "A VOID of the pre-authorisation (%s) ended with its outcome unknown: the terminal may still release the hold, so it takes no %s. Void it again, or wait for the terminal's result.", o.ID, t.Type)
				e.OnlineAPIRefID = o.ID
				return e
			}
		}
	}
	if t.Type == TypeVoid && t.Amount != pre.Authorization.AuthorizedAmount {
		// A void releases the whole authorisation: one computed from an
		// older read (an increment approved since) would leave a part held.
		return Errorf(EConflict, "The pre-authorisation's authorized amount changed to %d; send the void again.", pre.Authorization.AuthorizedAmount)
	}
	if left := MaxAuthorizedAmount - pre.Authorization.AuthorizedAmount; t.Type == TypeIncrement && t.Amount > left {
		return &Error{Code: EValidation, Detail: "The request is not valid; see errors.", Fields: []FieldError{{Field: "/amount",
			Message: fmt.Sprintf("exceeds what the pre-authorisation may still be increased by (%d: an authorized amount is at most %d)",
				max(left, 0), MaxAuthorizedAmount)}}}
	}
	if t.Type == TypeCapture {
		if limit := CaptureLimit(pre.Authorization.AuthorizedAmount, tolerance); t.TotalAmount() > limit {
			return &Error{Code: EValidation, Detail: "The request is not valid; see errors.", Fields: []FieldError{{Field: "/amount",
				Message: fmt.Sprintf("exceeds what the pre-authorisation may capture (%d: the authorized amount %d and the capture tolerance)",
					limit, pre.Authorization.AuthorizedAmount)}}}
		}
	}
	return nil
}

// voidMayRelease reports whether o is a VOID that released its pre-auth's
// hold or still may with no further word from the service: ended
// TECHNICAL_ERROR by the service (WP23, WP25, WP36) with no result from
// the terminal, whose late approval releases the hold
// (lifecycle.NextPair). A PENDING one is CheckOnPreAuth's in-flight
// case.
func voidMayRelease(o *Transaction) bool {
	return o.Type == TypeVoid && o.StatusID == StatusTechnicalError && o.ResultMessageID == ""
}

// PreAuthRequest is the body of POST /preauthorization: a purchase's,
// without cashback (cash is not held on a card), confirmWithinSeconds
// (a pre-auth is never reversed: it is voided, or expires) or
// paymentMethodId (the payment methods, SWISH, KLARNA, MOBILEPAY, are paid
// at once: none holds money to capture later).
type PreAuthRequest struct {
	PurchaseRequest
}

// Validate checks the fields' shapes and ranges (PurchaseRequest's), and
// refuses a cashback, a confirmation and a payment method.
func (r *PreAuthRequest) Validate() error {
	var f FieldErrors
	r.check(&f)
	if r.CashbackAmount != nil {
		f.Add("/cashbackAmount", "a pre-authorisation takes no cashback")
	}
	if r.ConfirmWithinSeconds != nil {
		f.Add("/confirmWithinSeconds", "a pre-authorisation takes no confirmation: void it instead")
	}
	if r.PaymentMethodID != nil {
		f.Add("/paymentMethodId", "a pre-authorisation holds money on a card; the payment methods are paid at once and hold nothing")
	}
	return f.Err()
}

// PreAuthOpRequest is the body of POST /increment (Amount: the increase),
// POST /capture (Amount: the final total, tip included; TipAmount: the part
// of it that is tip) and POST /void (no amount), each naming the pre-auth
// by OnlineAPIRefID. Op is the operation (TypeIncrement, TypeCapture,
// TypeVoid), set by the handler, not read from the body.
type PreAuthOpRequest struct {
	OnlineAPIRefID string          `json:"onlineAPIRefId"`
	Amount         *int64          `json:"amount"`
	TipAmount      *int64          `json:"tipAmount"`
	ECRReference   string          `json:"ecrReference"`
	Op             TransactionType `json:"-"`
}

// Validate checks the fields' shapes and ranges for r.Op.
func (r *PreAuthOpRequest) Validate() error {
	var f FieldErrors
	checkRef(&f, r.OnlineAPIRefID, "is required: the pre-authorisation's")
	switch {
	case r.Op == TypeVoid && r.Amount != nil:
		f.Add("/amount", "a void takes no amount: it releases the whole authorisation")
	case r.Op == TypeVoid:
	case r.Amount == nil:
		f.Add("/amount", "is required")
	case *r.Amount < MinAmount || *r.Amount > MaxAmount:
		f.Add("/amount", "must be an integer in minor units from %d to %d", MinAmount, MaxAmount)
	}
	if r.TipAmount != nil {
		switch {
		case r.Op != TypeCapture:
			f.Add("/tipAmount", "only a capture takes a tipAmount")
		case *r.TipAmount < 0 || r.Amount != nil && *r.TipAmount >= *r.Amount:
			// The CAPTURE's amount is the total less the tip: at least 1,
			// as every transaction's.
			f.Add("/tipAmount", "must be 0 up to amount less 1 (the part of the total that is tip; the rest is at least 1)")
		}
	}
	CheckECRReference(&f, "/ecrReference", r.ECRReference)
	return f.Err()
}

// DecodeHint words the error of an amount of the wrong type.
func (r *PreAuthOpRequest) DecodeHint(field string, body []byte) string {
	return amountDecodeHint(field, body, "/amount", "/tipAmount")
}

// article is typ with its indefinite article, for a message: "an
// INCREMENT", "a CAPTURE".
func article(typ TransactionType) string {
	if typ != "" && strings.ContainsRune("AEIOU", rune(typ[0])) {
		return "an " + string(typ)
	}
	return "a " + string(typ)
}

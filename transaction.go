package instore

import (
	"errors"
	"strings"
	"time"
)

// TransactionType is the kind of a transaction.
type TransactionType string

// Transaction types.
const (
	TypePurchase TransactionType = "PURCHASE"
	TypeRefund   TransactionType = "REFUND"
	TypeReversal TransactionType = "REVERSAL"
	// TypePreAuth, TypeIncrement, TypeCapture and TypeVoid: preauth.go.
)

// TransactionTypes lists every transaction type.
var TransactionTypes = []TransactionType{TypePurchase, TypeRefund, TypeReversal, TypePreAuth, TypeIncrement, TypeCapture, TypeVoid}

// JoinTypes is types separated by commas, as ?type= lists them.
func JoinTypes(types []TransactionType) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	return strings.Join(names, ",")
}

// Progress is the stage of a PENDING transaction, as the terminal reports
// it; FINAL once it has a final status.
type Progress string

// Progress stages.
const (
	ProgressSent           Progress = "SENT"
	ProgressAcknowledged   Progress = "ACKNOWLEDGED"
	ProgressWaitingForCard Progress = "WAITING_FOR_CARD"
	ProgressWaitingForPIN  Progress = "WAITING_FOR_PIN"
	ProgressAuthorizing    Progress = "AUTHORIZING"
	ProgressFinal          Progress = "FINAL"
)

// TerminalStages are the progress stages a terminal may report, in order.
var TerminalStages = []Progress{ProgressWaitingForCard, ProgressWaitingForPIN, ProgressAuthorizing}

// Transaction is one purchase, refund or reversal. Every change increases
// Version; stores apply a change only when the version they hold is the one
// the change was computed from (compare-and-set).
type Transaction struct {
	ID              string // onlineAPIRefId
	MerchantID      string
	TerminalID      string
	SerialNumber    string // the device the command went to
	Type            TransactionType
	Amount          int64
	CashbackAmount  int64
	VATAmount       *int64
	Currency        string
	PaymentMethodID *int
	ECRReference    string
	PrintReceipt    bool
	StatusID        TransactionStatus
	ErrorID         *int // id of the errorCodes entry (WP25, WP36, WP37), or nil
	Progress        Progress
	Version         int64
	OriginalID      string // the transaction a refund or reversal refers to
	Reverses        string
	ReversedBy      string
	CancelRequested bool
	Result          *Result
	// ResultMessageID is the terminal's message id of the applied result,
	// so a resent result is recognised and applied once.
	ResultMessageID string
	CreatedAt       time.Time
	AcknowledgedAt  *time.Time
	DeadlineAt      *time.Time
	CompletedAt     *time.Time
	// ConfirmWithin is the purchase's confirmation window
	// (confirmWithinSeconds; 0: no confirmation asked). ConfirmState is
	// then ConfirmPending until the ECR confirms the APPROVED sale
	// (ConfirmConfirmed, at ConfirmedAt) or its window, from the approval to
	// ConfirmDeadline, passes (ConfirmAutoReversed); "" without one.
	ConfirmWithin   time.Duration
	ConfirmState    ConfirmState
	ConfirmDeadline *time.Time
	ConfirmedAt     *time.Time
	// Tip is how the purchase asked for a tip (nil: none). TipAmount is
	// the tip the terminal charged with its APPROVED result (0 until then,
	// and without a tip); a REVERSAL shows its purchase's. TotalAmount is
	// Amount plus TipAmount.
	Tip       *Tip
	TipAmount int64
	// Authorization is an approved PRE_AUTH's authorisation (preauth.go;
	// nil otherwise).
	Authorization *Authorization
	// ByTimer marks the VOID the service created when its pre-auth
	// expired: approved, it ends the pre-auth EXPIRED, not VOIDED.
	ByTimer bool
	// Forwarding is an offline approval's forwarding (forwarding.go; nil
	// otherwise).
	Forwarding *Forwarding
}

// ConfirmState is the confirmation state of a purchase that asked for one
// (confirmWithinSeconds).
type ConfirmState string

// Confirmation states.
const (
	ConfirmPending      ConfirmState = "PENDING"
	ConfirmConfirmed    ConfirmState = "CONFIRMED"
	ConfirmAutoReversed ConfirmState = "AUTO_REVERSED"
)

// The bounds of a purchase's confirmWithinSeconds.
const (
	MinConfirmWithinSeconds = 10
	MaxConfirmWithinSeconds = 600
)

// Unconfirmed reports whether t is an APPROVED sale still awaiting the
// ECR's confirmation.
func (t *Transaction) Unconfirmed() bool {
	return t.StatusID == StatusApproved && t.ConfirmState == ConfirmPending && t.ConfirmDeadline != nil
}

// Final reports whether the transaction has a final status.
func (t *Transaction) Final() bool { return t.StatusID != StatusPending }

// Acknowledged reports whether the terminal acknowledged the command.
func (t *Transaction) Acknowledged() bool { return t.AcknowledgedAt != nil }

// Result is what the terminal reported with a final status.
type Result struct {
	EntryMode         string  `json:"entryMode,omitempty"`
	CardBrand         string  `json:"cardBrand,omitempty"`
	MaskedPAN         string  `json:"maskedPan,omitempty"`
	AuthorizationCode string  `json:"authorizationCode,omitempty"`
	PaymentMethodID   *int    `json:"paymentMethodId,omitempty"`
	Receipt           Receipt `json:"receipt"`
	// Offline: approved offline, queued on the terminal (forwarding.go).
	Offline bool `json:"offline,omitempty"`
}

// Receipt holds the customer and merchant copies, one string per line.
type Receipt struct {
	Customer []string `json:"customer"`
	Merchant []string `json:"merchant"`
}

// IdempotencyRecord remembers the response to a POST with an
// Idempotency-Key, scope merchant, for 24 hours.
type IdempotencyRecord struct {
	MerchantID  string
	Key         string
	Method      string
	Path        string
	RequestHash []byte
	// Attempt identifies the request that holds the record (IdempotencyClaim).
	Attempt string
	// TransactionID is the transaction the request created, written in the
	// same database transaction as the creation ("" until then).
	TransactionID string
	// StatusCode is 0 while the first request still runs.
	StatusCode int
	Header     map[string]string
	Body       []byte
	CreatedAt  time.Time
}

// IdempotencyClaim is the idempotency record a request holds while it runs.
// A retry after a crash that finds the record tied to a transaction answers
// about that transaction (Resume) and never creates a second one; one whose
// record has no transaction runs again under a new Attempt, and the old
// attempt, if it still ran, can no longer create anything.
type IdempotencyClaim struct {
	MerchantID, Key string
	// Attempt is the holder's id, unique per request: the record is tied to
	// a transaction only if it is still this attempt's.
	Attempt string
	// Resume is the transaction the record is tied to, when the request is
	// a retry of one that created it: the operation answers about it.
	Resume string
}

// ErrIdempotencyLost is returned by a creation whose idempotency record is
// no longer its attempt's (another attempt took the key over): nothing was
// stored.
var ErrIdempotencyLost = errors.New("the idempotency record was taken over by another attempt")

// ErrRelinked is returned by a creation whose terminal ID is no longer
// linked to the device its command goes to (Change.OnDevice): a link or
// unlink committed between the Service's read of the terminal and the
// creation. Nothing was stored.
var ErrRelinked = errors.New("the terminal ID was linked to another device")

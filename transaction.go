package instore

import "time"

// Transaction types.
const (
	TypePurchase = "PURCHASE"
	TypeRefund   = "REFUND"
	TypeReversal = "REVERSAL"
)

// Progress stages of a PENDING transaction, as the terminal reports them;
// FINAL once it has a final status.
const (
	ProgressSent           = "SENT"
	ProgressAcknowledged   = "ACKNOWLEDGED"
	ProgressWaitingForCard = "WAITING_FOR_CARD"
	ProgressWaitingForPIN  = "WAITING_FOR_PIN"
	ProgressAuthorizing    = "AUTHORIZING"
	ProgressFinal          = "FINAL"
)

// TerminalStages are the progress stages a terminal may report, in order.
var TerminalStages = []string{ProgressWaitingForCard, ProgressWaitingForPIN, ProgressAuthorizing}

// Transaction is one purchase, refund or reversal. Every change increases
// Version; stores apply a change only when the version they hold is the one
// the change was computed from (compare-and-set).
type Transaction struct {
	ID              string // onlineAPIRefId
	MerchantID      string
	TerminalID      string
	SerialNumber    string // the device the command went to
	Type            string
	Amount          int64
	CashbackAmount  int64
	VATAmount       *int64
	Currency        string
	PaymentMethodID *int
	ECRReference    string
	PrintReceipt    bool
	StatusID        int
	ErrorID         *int // id of the errorCodes entry (WP25, WP36, WP37), or nil
	Progress        string
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
	// StatusCode is 0 while the first request still runs.
	StatusCode int
	Header     map[string]string
	Body       []byte
	CreatedAt  time.Time
}

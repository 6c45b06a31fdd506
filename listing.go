package instore

import (
	"time"
)

// Listing limits: the errorCodes WP26 and WP27 name them.
const (
	MaxListRange     = 30 * 24 * time.Hour
	MaxListAge       = 90 * 24 * time.Hour
	DefaultListRange = 24 * time.Hour
	DefaultListLimit = 100
	MaxListLimit     = 1000
	MaxECRReferenceQ = 64
)

// TransactionFilter selects a merchant's transactions, newest first.
type TransactionFilter struct {
	MerchantID string
	From, To   time.Time // created in [From, To)
	TransactionSelection
	Limit int
	// After continues a listing after this position (exclusive).
	After *TransactionCursor
}

// TransactionSelection is what a listing of transactions selects by
// besides the merchant and the time range: what GET /transactions asks
// (ListQuery) and what the store lists by (TransactionFilter). A zero
// field selects any transaction.
type TransactionSelection struct {
	// TerminalID: ?terminalId=.
	TerminalID string
	// StatusID: ?statusId=.
	StatusID *TransactionStatus
	// ECRReference: ?ecrReference=.
	ECRReference string
	// Unconfirmed selects the APPROVED sales still awaiting the ECR's
	// confirmation (Transaction.Unconfirmed).
	Unconfirmed bool
	// Types selects transactions of these types (empty: every type);
	// ?type= (comma-separated).
	Types []TransactionType
	// AuthorizationState selects the pre-auths whose authorisation is in
	// this state; ?authorizationState=.
	AuthorizationState AuthorizationState
	// Forwarding selects the offline approvals in this forwarding state;
	// ?forwarding=.
	Forwarding ForwardingState
}

// TransactionCursor is a position in a newest-first listing.
type TransactionCursor struct {
	CreatedAt time.Time
	ID        string
}

// ListQuery is what GET /transactions asks, parsed.
type ListQuery struct {
	From, To *time.Time
	TransactionSelection
	Limit  int
	Cursor string
}

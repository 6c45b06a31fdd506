package instore

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// A day close (POST /terminal/{terminalId}/close) closes a terminal's
// batch: the terminal answers the number of the batch it closes and every
// transaction it ended since its previous close, and the service compares
// that list with its own record of the terminal's transactions in the
// batch's window (InBatch) and stores the outcome, a Batch. The close is a
// record of its own from the moment it is sent (PENDING), so a crash or a
// lost session ends it or resumes it: lifecycle/batch.go holds its life,
// docs/decisions.md ("Day close") the rules.

// BatchState is where a close is in its life.
type BatchState string

// Batch states.
const (
	// BatchPending: the close was sent to the terminal, which has not
	// answered yet; the terminal is busy (WP09) meanwhile.
	BatchPending BatchState = "PENDING"
	// BatchClosed: the terminal answered with its batch and the service
	// compared it with its own record.
	BatchClosed BatchState = "CLOSED"
	// BatchFailed: the terminal did not answer in time (WP25) or the
	// close could not be sent (WP23). A late answer still closes it.
	BatchFailed BatchState = "FAILED"
)

// ReasonBatchClose is the Reason of WP09 while the terminal closes its
// batch.
const ReasonBatchClose = "BATCH_CLOSE"

// BatchItem is one transaction of a batch as one side (terminal or
// service) records it: its reference (the onlineAPIRefId of a transaction
// the service sent, or the terminal's own reference of one it did not),
// type, status, amount (totalAmount: tip included), currency and whether
// the terminal approved it offline.
type BatchItem struct {
	Ref      string
	Type     TransactionType
	StatusID TransactionStatus
	Amount   int64
	Currency string
	Offline  bool
}

// BatchTotal is the count and the sum of the amounts of a batch's APPROVED
// transactions of one currency and type.
type BatchTotal struct {
	Currency string          `json:"currency"`
	Type     TransactionType `json:"type"`
	Count    int             `json:"count"`
	Amount   int64           `json:"amount"`
}

// DifferenceKind says how a transaction of a batch differs between the
// terminal and the service.
type DifferenceKind string

// Difference kinds.
const (
	// MissingInService: the terminal lists a transaction the service has
	// no record of in the batch's window.
	MissingInService DifferenceKind = "MISSING_IN_SERVICE"
	// MissingOnTerminal: the service records a transaction of the window
	// the terminal does not list.
	MissingOnTerminal DifferenceKind = "MISSING_ON_TERMINAL"
	// DifferenceAmount: both list it, with another amount or currency.
	DifferenceAmount DifferenceKind = "AMOUNT"
	// DifferenceStatus: both list it, with another status or type.
	DifferenceStatus DifferenceKind = "STATUS"
)

// BatchDifference is one transaction whose records differ: Terminal or
// Service is nil when that side has none.
type BatchDifference struct {
	Kind     DifferenceKind
	Ref      string
	Terminal *BatchItem
	Service  *BatchItem
}

// Batch is one close of a terminal's batch.
type Batch struct {
	ID           string // batchId
	MerchantID   string
	TerminalID   string
	SerialNumber string // the device the close went to
	State        BatchState
	// Number is the terminal's number of the batch (0 until it answers).
	Number int64
	// OpenedAt and ClosedAt bound the batch's window (OpenedAt, ClosedAt]:
	// ClosedAt is when the close was sent (the terminal is busy from then
	// on), OpenedAt the ClosedAt of the terminal's previous CLOSED batch
	// (the terminal ID's creation for its first).
	OpenedAt, ClosedAt time.Time
	// ErrorID is the errorCodes id the ECR was answered when the close
	// failed (WP25, WP23); kept if a late answer closes it after all.
	ErrorID *int
	// MessageID is the terminal's id of the batch message applied, so a
	// resent one is applied once; ReportedAt when it was.
	MessageID  string
	ReportedAt *time.Time
	// TerminalItems is the terminal's list as it answered it.
	TerminalItems []BatchItem
	// The comparison (CompareBatch), set with the answer.
	TerminalTotals, ServiceTotals []BatchTotal
	Matched                       bool
	Differences                   []BatchDifference
}

// BatchReport is a terminal's answer to a close: its batch message.
type BatchReport struct {
	// MessageID is the terminal's message id; a resent answer reuses it.
	MessageID string
	// BatchID is the close it answers (the message's ref).
	BatchID string
	Number  int64
	Items   []BatchItem
}

// BatchComparison is what CompareBatch finds.
type BatchComparison struct {
	TerminalTotals, ServiceTotals []BatchTotal
	Matched                       bool
	Differences                   []BatchDifference
}

// CompareBatch compares a terminal's batch with the service's record of
// the same window, both keyed by reference: a reference on one side only
// is MISSING_IN_SERVICE or MISSING_ON_TERMINAL; on both, a different
// status or type is STATUS, else a different amount or currency AMOUNT
// (one difference per transaction). The totals are each side's APPROVED
// transactions by currency and type. Differences are ordered by reference.
// It matches when there is no difference.
func CompareBatch(terminal, service []BatchItem) BatchComparison {
	c := BatchComparison{TerminalTotals: BatchTotals(terminal), ServiceTotals: BatchTotals(service), Differences: []BatchDifference{}}
	own := make(map[string]*BatchItem, len(service))
	for i := range service {
		own[service[i].Ref] = &service[i]
	}
	seen := make(map[string]bool, len(terminal))
	for i := range terminal {
		t := &terminal[i]
		seen[t.Ref] = true
		s := own[t.Ref]
		switch {
		case s == nil:
			c.Differences = append(c.Differences, BatchDifference{Kind: MissingInService, Ref: t.Ref, Terminal: t})
		case s.StatusID != t.StatusID || s.Type != t.Type:
			c.Differences = append(c.Differences, BatchDifference{Kind: DifferenceStatus, Ref: t.Ref, Terminal: t, Service: s})
		case s.Amount != t.Amount || s.Currency != t.Currency:
			c.Differences = append(c.Differences, BatchDifference{Kind: DifferenceAmount, Ref: t.Ref, Terminal: t, Service: s})
		}
	}
	for i := range service {
		if s := &service[i]; !seen[s.Ref] {
			c.Differences = append(c.Differences, BatchDifference{Kind: MissingOnTerminal, Ref: s.Ref, Service: s})
		}
	}
	slices.SortStableFunc(c.Differences, func(a, b BatchDifference) int { return cmp.Compare(a.Ref, b.Ref) })
	c.Matched = len(c.Differences) == 0
	return c
}

// BatchTotals sums the APPROVED items by currency and type, ordered by
// currency, then type; never nil.
func BatchTotals(items []BatchItem) []BatchTotal {
	out := []BatchTotal{}
	for _, it := range items {
		if it.StatusID != StatusApproved {
			continue
		}
		i := slices.IndexFunc(out, func(t BatchTotal) bool { return t.Currency == it.Currency && t.Type == it.Type })
		if i < 0 {
			out = append(out, BatchTotal{Currency: it.Currency, Type: it.Type})
			i = len(out) - 1
		}
		out[i].Count++
		out[i].Amount += it.Amount
	}
	slices.SortFunc(out, func(a, b BatchTotal) int {
		return cmp.Or(cmp.Compare(a.Currency, b.Currency), cmp.Compare(a.Type, b.Type))
	})
	return out
}

// InBatch reports whether the service counts t in the batch of the window
// (from, to]: a final transaction completed in the window that reached the
// terminal (acknowledged, or with a result of the terminal). One the
// service ended before its terminal ever had it (WP23, or WP25 without an
// ack) is left out: the terminal dropped it and lists nothing for it.
func InBatch(t *Transaction, from, to time.Time) bool {
	if !t.Final() || t.CompletedAt == nil || !t.CompletedAt.After(from) || t.CompletedAt.After(to) {
		return false
	}
	return t.Acknowledged() || t.ResultMessageID != ""
}

// BatchItemOf is the service's record of t in a batch.
func BatchItemOf(t *Transaction) BatchItem {
	return BatchItem{Ref: t.ID, Type: t.Type, StatusID: t.StatusID, Amount: t.TotalAmount(), Currency: t.Currency}
}

// BatchLookback bounds how long before a batch's window opened a
// transaction completed in the window may have been created: one created
// earlier is not counted (a transaction ends within its ack time-out and
// deadline, minutes; after a long outage the restart ends it at once).
const BatchLookback = 7 * 24 * time.Hour

// BatchFilter selects a merchant's batches, newest first (ClosedAt, then
// ID, both descending).
type BatchFilter struct {
	MerchantID string
	TerminalID string // "": every terminal ID
	From, To   time.Time
	Limit      int
	// After continues a listing after this position (exclusive).
	After *TransactionCursor
}

// BatchQuery is what GET /batches asks, parsed.
type BatchQuery struct {
	From, To   *time.Time
	TerminalID string
	Limit      int
	Cursor     string
}

// BatchStore keeps the closes.
type BatchStore interface {
	// CreateBatch stores the new PENDING close b if its terminal ID has
	// neither a PENDING transaction nor a PENDING close, checked in the
	// same database transaction (ErrConflict otherwise); with a claim,
	// it ties the request's idempotency record to b in that transaction
	// (ErrIdempotencyLost if the record is no longer the claim's), so a
	// retry after a crash answers about b and never closes again.
	CreateBatch(ctx context.Context, b *Batch, claim *IdempotencyClaim) error
	Batch(ctx context.Context, id string) (*Batch, error)
	// PendingBatch returns the PENDING close of a terminal ID (ErrNotFound
	// if none).
	PendingBatch(ctx context.Context, terminalID string) (*Batch, error)
	// LastClosedBatch returns the terminal ID's CLOSED batch with the
	// latest ClosedAt (ErrNotFound if none).
	LastClosedBatch(ctx context.Context, terminalID string) (*Batch, error)
	// PendingBatches lists every PENDING close, oldest first (restart
	// recovery, the sweep).
	PendingBatches(ctx context.Context) ([]*Batch, error)
	// UpdateBatch writes b's state, number, error, message id, report and
	// comparison if the stored state is from (compare-and-set;
	// ErrConflict otherwise), with the events evs in the same database
	// transaction.
	UpdateBatch(ctx context.Context, b *Batch, from BatchState, evs ...OutboxEvent) error
	// ListBatches lists batches by f.
	ListBatches(ctx context.Context, f BatchFilter) ([]*Batch, error)
	// TerminalTransactions lists the final transactions of a terminal ID
	// completed in (from, to], oldest first.
	TerminalTransactions(ctx context.Context, terminalID string, from, to time.Time) ([]*Transaction, error)
}

// BatchGateway is the part of a Gateway that sends closes: a gateway
// without it cannot close a batch (the device counts as offline).
type BatchGateway interface {
	// SendClose asks the device to close its batch for the close
	// batchID; the device answers with TerminalBatch. A repeated close
	// (the same batchID) is answered with the same batch.
	SendClose(ctx context.Context, serial, batchID string) error
}

// BatchEvents is the part of TerminalEvents that takes a terminal's batch:
// the gateway confirms the batch message once TerminalBatch returned nil.
type BatchEvents interface {
	TerminalBatch(ctx context.Context, serial string, r BatchReport) error
}

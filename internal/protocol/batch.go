package protocol

import (
	"slices"
	"strconv"

	"github.com/instore-dev/instore"
)

// Message types of a day close (docs/terminal-protocol.md, section 14).
const (
	// TypeClose asks the terminal to close its batch (server to
	// terminal); Ref is the batchId. It has no data. The terminal answers
	// with TypeBatch; a close whose Ref it answered already is answered
	// again with the same batch.
	TypeClose = "close"
	// TypeBatch is the terminal's closed batch (terminal to server); Ref
	// is the batchId of the close it answers. The terminal keeps it and
	// resends it (same message id) after every reconnect until the server
	// confirms it, like a result.
	TypeBatch = "batch"
)

// MaxBatchTransactions bounds the transactions of one batch message: as
// many as fit MaxFrameBytes however their JSON is written (at most 829
// bytes each, every field at its longest and every character escaped;
// TestLargestBatchFits). A batch message is one frame, so an ECR closes a
// terminal's batch before it holds more (docs/decisions.md, "Day close").
const MaxBatchTransactions = 384

// Batch is the data of a batch message: the number of the batch the
// terminal closed and every transaction it ended since its previous
// close.
type Batch struct {
	Number       int64              `json:"number"`
	Transactions []BatchTransaction `json:"transactions"`
}

// BatchTransaction is one transaction of a batch. Reference is the ref
// of the command the server sent (its onlineAPIRefId), or the terminal's
// own reference of a transaction the server did not send; Amount is what
// the card was charged or credited (tip included); StatusID its status
// now (REVERSED for a sale the terminal reversed since); Offline marks an
// approval the terminal gave without its card network.
type BatchTransaction struct {
	Reference string                    `json:"reference"`
	Type      instore.TransactionType   `json:"type"`
	StatusID  instore.TransactionStatus `json:"statusId"`
	Amount    int64                     `json:"amount"`
	Currency  string                    `json:"currency"`
	Offline   bool                      `json:"offline,omitempty"`
}

// Validate checks a batch: a number of 1 or more, at most
// MaxBatchTransactions transactions, each with a valid reference (no two
// alike), a known type, a final status, an amount of 0 up to twice
// MaxAmount (a tip may double a sale) and a currency code.
func (b *Batch) Validate() error {
	if b.Number < 1 {
		return errorf("data.number", "required, 1 or more")
	}
	if len(b.Transactions) > MaxBatchTransactions {
		return errorf("data.transactions", "must hold at most %d transactions", MaxBatchTransactions)
	}
	seen := make(map[string]bool, len(b.Transactions))
	for i, t := range b.Transactions {
		f := "data.transactions." + strconv.Itoa(i) + "."
		switch {
		case !validID(t.Reference):
			return errorf(f+"reference", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
		case seen[t.Reference]:
			return errorf(f+"reference", "is listed twice")
		case !slices.Contains(instore.TransactionTypes, t.Type):
			return errorf(f+"type", "must be a transaction type")
		case t.StatusID < instore.StatusApproved || t.StatusID >= instore.StatusPending:
			return errorf(f+"statusId", "must be a final status (0-13)")
		case t.Amount < 0 || t.Amount > 2*MaxAmount:
			return errorf(f+"amount", "must be 0-%d", 2*MaxAmount)
		case !validCurrency(t.Currency):
			return errorf(f+"currency", "must be an ISO 4217 code of three capital letters")
		}
		seen[t.Reference] = true
	}
	return nil
}

// Report is the batch b of the message env as the domain takes it.
func (b *Batch) Report(env *Envelope) instore.BatchReport {
	r := instore.BatchReport{MessageID: env.ID, BatchID: env.Ref, Number: b.Number, Items: make([]instore.BatchItem, len(b.Transactions))}
	for i, t := range b.Transactions {
		r.Items[i] = instore.BatchItem{Ref: t.Reference, Type: t.Type, StatusID: t.StatusID, Amount: t.Amount, Currency: t.Currency, Offline: t.Offline}
	}
	return r
}

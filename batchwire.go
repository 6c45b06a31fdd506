package instore

import "time"

// BatchWire is a batch as the Online API shows it (GET /batch/{batchId},
// the answer of a close, the data of batch.closed).
type BatchWire struct {
	BatchID    string     `json:"batchId"`
	TerminalID string     `json:"terminalId"`
	State      BatchState `json:"state"`
	// Number is the terminal's batch number (null until it answered).
	Number         *int64                `json:"number"`
	OpenedAt       time.Time             `json:"openedAt"`
	ClosedAt       time.Time             `json:"closedAt"`
	TerminalTotals []BatchTotal          `json:"terminalTotals"`
	ServiceTotals  []BatchTotal          `json:"serviceTotals"`
	Matched        bool                  `json:"matched"`
	Differences    []BatchDifferenceWire `json:"differences"`
	// ErrorCode is the WP code the close was answered with when it failed
	// (WP25, WP23); null otherwise.
	ErrorCode NullString `json:"errorCode"`
}

// BatchItemWire is one side's record of a transaction in a difference.
type BatchItemWire struct {
	Type     TransactionType   `json:"type"`
	StatusID TransactionStatus `json:"statusId"`
	Status   string            `json:"status"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Offline  bool              `json:"offline"`
}

// BatchDifferenceWire is a difference as the Online API shows it.
// OnlineAPIRefID is the transaction's onlineAPIRefId, or the terminal's
// own reference of a transaction the service never sent.
type BatchDifferenceWire struct {
	Kind           DifferenceKind `json:"kind"`
	OnlineAPIRefID string         `json:"onlineAPIRefId"`
	Terminal       *BatchItemWire `json:"terminal"`
	Service        *BatchItemWire `json:"service"`
}

// BatchWire is b's wire form, statuses named from the code lists.
func (meta *Metadata) BatchWire(b *Batch) *BatchWire {
	out := &BatchWire{BatchID: b.ID, TerminalID: b.TerminalID, State: b.State, OpenedAt: b.OpenedAt.UTC(), ClosedAt: b.ClosedAt.UTC(),
		TerminalTotals: nonNil(b.TerminalTotals), ServiceTotals: nonNil(b.ServiceTotals), Matched: b.Matched,
		Differences: make([]BatchDifferenceWire, len(b.Differences))}
	if b.ReportedAt != nil {
		n := b.Number
		out.Number = &n
	}
	if b.ErrorID != nil {
		if c, ok := meta.ErrorCodeByID(*b.ErrorID); ok {
			out.ErrorCode = NullString(c.Code)
		}
	}
	item := func(it *BatchItem) *BatchItemWire {
		if it == nil {
			return nil
		}
		w := &BatchItemWire{Type: it.Type, StatusID: it.StatusID, Amount: it.Amount, Currency: it.Currency, Offline: it.Offline}
		if c, ok := meta.TransactionStatus(it.StatusID); ok {
			w.Status = c.Code
		}
		return w
	}
	for i, d := range b.Differences {
		out.Differences[i] = BatchDifferenceWire{Kind: d.Kind, OnlineAPIRefID: d.Ref, Terminal: item(d.Terminal), Service: item(d.Service)}
	}
	return out
}

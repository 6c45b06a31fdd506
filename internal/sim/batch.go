package sim

import (
	"fmt"
	"slices"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// The virtual terminal's batch (docs/terminal-protocol.md, section 14):
// every transaction it ended since its last close, answered to a close
// and then started anew, numbered one more. The answer is kept with the
// results and resent after every hello until the gateway confirms it; a
// close it answered already is answered with the same batch again.

// batchBook is the open batch. Guarded by Terminal.mu.
type batchBook struct {
	number int64 // the open batch's number (0: 1)
	items  []protocol.BatchTransaction
	extras int // how many sales the sandbox added (batch-extra)
	closed []ClosedBatch
}

// ClosedBatch is a batch the terminal closed: the close it answered (its
// batchId), the batch's number and the transactions it listed.
type ClosedBatch struct {
	BatchID      string
	Number       int64
	Transactions []protocol.BatchTransaction
}

// typeOfKind is the transaction type of a command kind.
var typeOfKind = map[string]instore.TransactionType{
	protocol.TypePurchase: instore.TypePurchase, protocol.TypeRefund: instore.TypeRefund, protocol.TypeReversal: instore.TypeReversal,
	protocol.TypePreAuth: instore.TypePreAuth, protocol.TypeIncrement: instore.TypeIncrement, protocol.TypeCapture: instore.TypeCapture,
	protocol.TypeVoid: instore.TypeVoid,
}

// recordLocked adds the transaction tx, ended with status and the tip
// tipAmount, to the open batch: its amount as the card saw it (a sale's
// tip on top; a capture's amount is its total already). An approved
// reversal of the ECR takes its purchase's amount and marks it REVERSED;
// offline: the sale was approved offline (offline.go).
func (t *Terminal) recordLocked(tx *txn, status instore.TransactionStatus, tipAmount int64, offline bool) {
	b := &t.batch
	item := protocol.BatchTransaction{Reference: tx.ref, Type: typeOfKind[tx.kind], StatusID: status, Amount: tx.pay.Amount,
		Currency: tx.pay.Currency, Offline: offline}
	if tx.kind == protocol.TypePurchase || tx.kind == protocol.TypePreAuth {
		item.Amount += tipAmount
	}
	if tx.kind == protocol.TypeReversal {
		if orig := b.find(tx.pay.OriginalRef); orig != nil {
			item.Amount, item.Currency = orig.Amount, orig.Currency
			if status == instore.StatusApproved {
				orig.StatusID = instore.StatusReversed
			}
		}
	}
	if item.Type == "" || item.Currency == "" {
		return // nothing the terminal could have charged
	}
	if i := b.index(tx.ref); i >= 0 {
		b.items[i] = item
		return
	}
	b.items = append(b.items, item)
}

// reversedLocked marks the transaction ref REVERSED in the open batch (a
// reversal of a late approval or of an unconfirmed sale).
func (t *Terminal) reversedLocked(ref string) {
	if it := t.batch.find(ref); it != nil && it.StatusID == instore.StatusApproved {
		it.StatusID = instore.StatusReversed
	}
}

func (b *batchBook) index(ref string) int {
	for i := range b.items {
		if b.items[i].Reference == ref {
			return i
		}
	}
	return -1
}

func (b *batchBook) find(ref string) *protocol.BatchTransaction {
	if i := b.index(ref); i >= 0 {
		return &b.items[i]
	}
	return nil
}

// closeBatch answers a close with the open batch, which it then starts
// anew; a close answered already gets the same answer again.
func (t *Terminal) closeBatch(s *session, env protocol.Envelope) {
	if env.Ref == "" {
		t.log.Warn("sim: ignoring a close without a reference")
		return
	}
	var r *stored
	t.update(func() {
		if r = t.resultLocked(env.Ref); r != nil {
			return // a repeat
		}
		b := &t.batch
		if b.number == 0 {
			b.number = 1
		}
		items := b.items
		if items == nil {
			items = []protocol.BatchTransaction{}
		}
		if len(items) > protocol.MaxBatchTransactions {
			// More than one batch message holds (docs/decisions.md, "Day
			// close"): no answer, so the close ends WP25 and the batch
			// stays open; never a message the server must refuse, which
			// the terminal would resend after every reconnect.
			t.log.Warn("sim: batch too large to report", "transactions", len(items), "max", protocol.MaxBatchTransactions)
			if t.tx == nil {
				t.showLocked(fmt.Sprintf("BATCH TOO LARGE (%d)", len(items)))
			}
			return
		}
		r = &stored{ref: env.Ref, env: t.envelope(protocol.TypeBatch, "", env.Ref, protocol.Batch{Number: b.number, Transactions: items})}
		t.results = append(t.results, r)
		b.closed = append(b.closed, ClosedBatch{BatchID: env.Ref, Number: b.number, Transactions: slices.Clone(items)})
		t.log.Info("sim: batch closed", "number", b.number, "transactions", len(items))
		b.number++
		b.items = nil
		if t.tx == nil {
			t.showLocked(fmt.Sprintf("BATCH %d CLOSED", b.number-1))
		}
	})
	if r == nil {
		return // too large to report
	}
	t.sendOn(s, r.env)
}

// AddBatchExtra adds to the open batch an approved transaction of typ and
// amount (minor units of currency) that the service never saw, under the
// terminal's own reference, which it returns: the next close shows it
// MISSING_IN_SERVICE (the sandbox's batch-extra).
func (t *Terminal) AddBatchExtra(typ instore.TransactionType, amount int64, currency string) string {
	var ref string
	t.update(func() {
		t.batch.extras++
		ref = fmt.Sprintf("%s-X%d", t.idPrefix, t.batch.extras)
		if len(ref) > protocol.MaxIDLen {
			ref = ref[len(ref)-protocol.MaxIDLen:]
		}
		t.batch.items = append(t.batch.items, protocol.BatchTransaction{Reference: ref, Type: typ, StatusID: instore.StatusApproved,
			Amount: amount, Currency: currency})
	})
	return ref
}

// BatchNumber is the number of the terminal's open batch.
func (t *Terminal) BatchNumber() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.batch.number, 1)
}

// ClosedBatches lists every batch the terminal closed since it started, in
// the order it answered the closes (a close answered again is listed once).
func (t *Terminal) ClosedBatches() []ClosedBatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ClosedBatch, len(t.batch.closed))
	for i, b := range t.batch.closed {
		out[i] = ClosedBatch{BatchID: b.BatchID, Number: b.Number, Transactions: slices.Clone(b.Transactions)}
	}
	return out
}

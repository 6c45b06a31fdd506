package instore

import "time"

// Change is everything one change of a transaction writes, in one database
// transaction, passed to the store as one value (TransactionStore.Commit,
// CreateTransaction, HistoryStore.CreateOnOriginal): nothing a write
// stores travels beside it.
//
//   - T is the new state. For an update, the write is a compare-and-set:
//     it applies only if the stored version is still From, and sets
//     T.Version to From+1; for a creation (From 0), T is inserted with
//     Version 1.
//   - Events are its timeline entries (timeline.go), each with the
//     integrator event it tells (TransactionEvent.Outbox, events.go),
//     inserted only with its entry.
//   - Effects are the messages the change makes owed to the terminal
//     (effect.go), Job the print job one of them prints (nil: none).
//   - Idempotency, for a creation only, is the idempotency record of the
//     request: it is tied to T in the same database transaction, or
//     nothing is stored (ErrIdempotencyLost).
//   - Pair is another transaction's change written with this one, both or
//     neither: an approved REVERSAL turns its original REVERSED.
//   - CaptureTolerance is the setting the rule of a new CAPTURE applies
//     inside the store's database transaction (CheckOnPreAuth), and
//     PreAuthValidity the one the retry schedule of an expiry VOID does
//     (lifecycle.CheckExpiryVoid).
//   - OnDevice, for a creation only, is the serial number of the device
//     the new transaction's command goes to: the row is written only if
//     T's terminal ID is linked to that device when it is (locked against
//     a link or unlink until the creation commits), ErrRelinked
//     otherwise. Empty: no such condition (a transaction the store is
//     given whole, as in the store suite).
//   - Relaxed marks a change of the progress stage only, which need not
//     wait for the disk: a crash may lose the last such changes (the
//     transaction then shows an earlier stage and version), never any
//     other change, whose commit also makes every earlier one durable. A
//     relaxed change has no effects, job or pair.
type Change struct {
	T           *Transaction
	From        int64
	Events      []TransactionEvent
	Effects     []*Effect
	Job         *PrintJob
	Idempotency *IdempotencyClaim
	Pair        *Change
	Relaxed     bool
	OnDevice    string
	// CaptureTolerance is the capture tolerance CheckOnPreAuth applies to
	// the creation of a CAPTURE (HistoryStore.CreateOnOriginal).
	CaptureTolerance float64
	// PreAuthValidity is the pre-auth validity lifecycle.CheckExpiryVoid
	// applies to the creation of an expiry VOID (CreateOnOriginal).
	PreAuthValidity time.Duration
}

// Transactions returns the transactions c writes: T, then its pair's.
func (c *Change) Transactions() []*Transaction {
	if c.Pair == nil {
		return []*Transaction{c.T}
	}
	return []*Transaction{c.T, c.Pair.T}
}

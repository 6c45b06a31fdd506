package crashtest

import (
	"fmt"
	"slices"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// The raw terminal's day close (docs/terminal-protocol.md, section 14): it
// answers a close at once with its open batch (numbered from 1, one more
// at each close), kept and resent after every reconnect until confirmed,
// and a close it answered already with the same batch again; a close
// taken with holdClose is left for the test to answer (answerClose),
// its resends ignored until then.

// rawBatches is the raw terminal's batch book. Guarded by rawTerminal.mu.
type rawBatches struct {
	number   int64 // the last batch closed
	open     []protocol.BatchTransaction
	extras   int
	answered map[string]protocol.Envelope // the batch message of each close answered, by batchId
	closed   []rawClosed                  // in the order answered
	held     chan protocol.Envelope       // receives the next new close (holdClose)
	holding  map[string]bool              // closes held and not answered yet
}

// rawClosed is a batch the raw terminal closed.
type rawClosed struct {
	batchID string
	batch   protocol.Batch
}

// onClose answers a close: again with the same batch if it answered it
// already, not at all while it is held, else with the open batch.
func (r *rawTerminal) onClose(conn *websocket.Conn, env protocol.Envelope) {
	r.mu.Lock()
	b := &r.batches
	if prev, ok := b.answered[env.Ref]; ok {
		r.mu.Unlock()
		r.write(conn, prev)
		return
	}
	if b.holding[env.Ref] {
		r.mu.Unlock()
		return
	}
	if b.held != nil {
		held := b.held
		b.held = nil
		if b.holding == nil {
			b.holding = map[string]bool{}
		}
		b.holding[env.Ref] = true
		r.mu.Unlock()
		held <- env
		return
	}
	r.mu.Unlock()
	r.answerClose(env.Ref)
}

// holdClose makes the next new close come to the returned channel,
// unanswered.
func (r *rawTerminal) holdClose() <-chan protocol.Envelope {
	ch := make(chan protocol.Envelope, 1)
	r.mu.Lock()
	r.batches.held = ch
	r.mu.Unlock()
	return ch
}

// answerClose closes the open batch for the close batchID and sends the
// batch message (kept until confirmed); it returns the message and the
// error of its write (no session: sent after the reconnect).
func (r *rawTerminal) answerClose(batchID string) (protocol.Envelope, error) {
	r.mu.Lock()
	b := &r.batches
	b.number++
	items := b.open
	if items == nil {
		items = []protocol.BatchTransaction{}
	}
	b.open = nil
	delete(b.holding, batchID)
	batch := protocol.Batch{Number: b.number, Transactions: items}
	r.mu.Unlock()
	env := r.envelope(protocol.TypeBatch, "", batchID, batch)
	r.mu.Lock()
	if b.answered == nil {
		b.answered = map[string]protocol.Envelope{}
	}
	b.answered[batchID] = env
	b.closed = append(b.closed, rawClosed{batchID: batchID, batch: batch})
	r.mu.Unlock()
	return env, r.report(env)
}

// addExtra adds to the open batch an approved sale the service never saw
// (MISSING_IN_SERVICE at the next close).
func (r *rawTerminal) addExtra(amount int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches.extras++
	r.batches.open = append(r.batches.open, protocol.BatchTransaction{Reference: fmt.Sprintf("RAW-X%d", r.batches.extras),
		Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: amount, Currency: "SEK"})
}

// closedBatches lists the batches the raw terminal closed.
func (r *rawTerminal) closedBatches() []rawClosed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches.closed)
}

package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// The checks of TestCrashClose on the quiet store.

// storedBatch is a close as the store holds it.
type storedBatch struct {
	id, terminalID     string
	state              instore.BatchState
	number             int64
	openedAt, closedAt time.Time
	late               bool // it has an error (it was FAILED) and a report: a late answer closed it
	reportedAt         time.Time
	items              []instore.BatchItem // the terminal's list
	cmp                instore.BatchComparison
}

// reportJSON is the batches.report column (internal/sqlstore/batch.go).
type reportJSON struct {
	Items          []itemJSON           `json:"items"`
	TerminalTotals []instore.BatchTotal `json:"terminalTotals"`
	ServiceTotals  []instore.BatchTotal `json:"serviceTotals"`
	Matched        bool                 `json:"matched"`
	Differences    []struct {
		Kind     instore.DifferenceKind `json:"kind"`
		Ref      string                 `json:"ref"`
		Terminal *itemJSON              `json:"terminal"`
		Service  *itemJSON              `json:"service"`
	} `json:"differences"`
}

type itemJSON struct {
	Ref      string                    `json:"ref"`
	Type     instore.TransactionType   `json:"type"`
	StatusID instore.TransactionStatus `json:"statusId"`
	Amount   int64                     `json:"amount"`
	Currency string                    `json:"currency"`
	Offline  bool                      `json:"offline"`
}

func (it *itemJSON) item() *instore.BatchItem {
	if it == nil {
		return nil
	}
	return &instore.BatchItem{Ref: it.Ref, Type: it.Type, StatusID: it.StatusID, Amount: it.Amount, Currency: it.Currency, Offline: it.Offline}
}

func (c *closeEnv) batches(ctx context.Context) []storedBatch {
	var out []storedBatch
	c.scanRows(ctx, `SELECT id, terminal_id, state, number, opened_at, closed_at, error_id, reported_at, report FROM batches ORDER BY closed_at, id`,
		func(rs *sql.Rows) error {
			var b storedBatch
			var opened, closed int64
			var errID, reported sql.NullInt64
			var report string
			if err := rs.Scan(&b.id, &b.terminalID, &b.state, &b.number, &opened, &closed, &errID, &reported, &report); err != nil {
				return err
			}
			b.openedAt, b.closedAt = time.UnixMicro(opened), time.UnixMicro(closed)
			b.reportedAt, b.late = time.UnixMicro(reported.Int64), errID.Valid && reported.Valid
			b.items = []instore.BatchItem{}
			var r reportJSON
			if err := json.Unmarshal([]byte(report), &r); err != nil {
				return fmt.Errorf("close %s: report: %w", b.id, err)
			}
			for i := range r.Items {
				b.items = append(b.items, *r.Items[i].item())
			}
			b.cmp = instore.BatchComparison{TerminalTotals: r.TerminalTotals, ServiceTotals: r.ServiceTotals, Matched: r.Matched,
				Differences: []instore.BatchDifference{}}
			for _, d := range r.Differences {
				b.cmp.Differences = append(b.cmp.Differences, instore.BatchDifference{Kind: d.Kind, Ref: d.Ref, Terminal: d.Terminal.item(), Service: d.Service.item()})
			}
			out = append(out, b)
			return nil
		})
	return out
}

// batchTxs are the transactions as InBatch and BatchItemOf read them.
func (c *closeEnv) batchTxs(ctx context.Context) []*instore.Transaction {
	var out []*instore.Transaction
	c.scanRows(ctx, `SELECT id, terminal_id, type, status_id, amount, tip_amount, currency, acknowledged_at, COALESCE(result_message_id, ''), completed_at
		FROM transactions ORDER BY created_at, id`, func(rs *sql.Rows) error {
		var t instore.Transaction
		var acked, completed sql.NullInt64
		if err := rs.Scan(&t.ID, &t.TerminalID, &t.Type, &t.StatusID, &t.Amount, &t.TipAmount, &t.Currency, &acked, &t.ResultMessageID, &completed); err != nil {
			return err
		}
		if acked.Valid {
			at := time.UnixMicro(acked.Int64)
			t.AcknowledgedAt = &at
		}
		if completed.Valid {
			at := time.UnixMicro(completed.Int64)
			t.CompletedAt = &at
		}
		out = append(out, &t)
		return nil
	})
	return out
}

// settleCloses waits, for up to keyBudget, until no close and no
// transaction is PENDING and every batch a terminal closed is stored
// CLOSED, and returns the closes then.
func (c *closeEnv) settleCloses(ctx context.Context) []storedBatch {
	return untilSettled(ctx, keyBudget, func() []storedBatch { return c.batches(ctx) }, func(bs []storedBatch) bool {
		closed := map[string]bool{}
		busy := false
		for _, b := range bs {
			closed[b.id] = b.state == instore.BatchClosed
			busy = busy || b.state == instore.BatchPending
		}
		for _, tx := range c.transactions(ctx) {
			busy = busy || tx.statusID == instore.StatusPending
		}
		for _, tb := range c.terminalBatches() {
			for _, b := range tb {
				busy = busy || !closed[b.batchID]
			}
		}
		return busy
	})
}

// untilSettled reads (read) every 100 ms until busy finds nothing in progress
// in what it read, bound passes or ctx ends, and returns the last read.
func untilSettled[T any](ctx context.Context, bound time.Duration, read func() T, busy func(T) bool) T {
	for start := time.Now(); ; sleep(ctx, 100*time.Millisecond) {
		v := read()
		if !busy(v) || time.Since(start) > bound || ctx.Err() != nil {
			return v
		}
	}
}

// terminalBatch is a batch as its terminal closed it.
type terminalBatch struct {
	batchID string
	number  int64
	items   []instore.BatchItem
}

// terminalBatches are the batches each terminal closed, by index.
func (c *closeEnv) terminalBatches() [][]terminalBatch {
	out := make([][]terminalBatch, len(c.terms))
	for i, vt := range c.sims {
		for _, b := range vt.ClosedBatches() {
			out[i] = append(out[i], terminalBatch{b.BatchID, b.Number, batchItems(b.Transactions)})
		}
	}
	for _, b := range c.raw.closedBatches() {
		out[len(c.terms)-1] = append(out[len(c.terms)-1], terminalBatch{b.batchID, b.batch.Number, batchItems(b.batch.Transactions)})
	}
	return out
}

func batchItems(ts []protocol.BatchTransaction) []instore.BatchItem {
	items := []instore.BatchItem{}
	for _, t := range ts {
		items = append(items, instore.BatchItem{Ref: t.Reference, Type: t.Type, StatusID: t.StatusID, Amount: t.Amount, Currency: t.Currency, Offline: t.Offline})
	}
	return items
}

// checkCloses checks the promises on the quiet store.
func (c *closeEnv) checkCloses(ctx context.Context, bs []storedBatch) {
	var bad []string
	say := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	byID := map[string]storedBatch{}
	for _, b := range bs {
		byID[b.id] = b
		if b.state == instore.BatchPending {
			say("close %s on terminal %d is still PENDING after the settle time", b.id, c.terminalIndex(b.terminalID))
		}
	}
	c.mu.Lock()
	for id, n := range c.acked {
		if b := byID[id]; b.state != instore.BatchClosed || b.number != n {
			say("close %s was answered 201 (batch %d); the store holds it %q, batch %d", id, n, b.state, b.number)
		}
	}
	c.mu.Unlock()
	txs := c.batchTxs(ctx)
	for i, tbs := range c.terminalBatches() {
		bad = append(bad, c.checkTerminalBatches(i, tbs, bs, txs)...)
	}
	events := c.closedEvents(ctx)
	closed := 0
	for _, b := range bs {
		want := 0
		if b.state == instore.BatchClosed {
			want = 1
			closed++
		}
		if events[b.id] != want {
			say("close %s (%s) has %d batch.closed events, want %d", b.id, b.state, events[b.id], want)
		}
	}
	for _, tx := range c.transactions(ctx) {
		if tx.statusID == instore.StatusPending {
			say("transaction %s on terminal %d is still PENDING after the settle time", tx.id, c.terminalIndex(tx.terminalID))
		}
	}
	named, _ := c.led.known()
	c.mu.Lock()
	busy := slices.Clone(c.busyKeys)
	c.mu.Unlock()
	for _, key := range busy {
		for ref, k := range named {
			if k == key {
				say("key %s, a purchase answered WP09 BATCH_CLOSE, created transaction %s", key, ref)
			}
		}
	}
	for _, tx := range txs {
		if _, ok := named[tx.ID]; !ok {
			say("%s %s (status %d) on terminal %d is named by no answer the ECR got for its keys", tx.Type, tx.ID, tx.StatusID, c.terminalIndex(tx.TerminalID))
		}
	}
	bad = append(bad, c.checkKeyColumn(ctx, named)...)
	c.t.Logf("%s: %d closes stored, %d CLOSED (%d of them late, after FAILED)", c.backend(), len(bs), closed, countLate(bs))
	c.report("the closes", append(bad, c.led.takeViolations()...))
}

func countLate(bs []storedBatch) int {
	n := 0
	for _, b := range bs {
		if b.state == instore.BatchClosed && b.late {
			n++
		}
	}
	return n
}

// checkTerminalBatches checks terminal i's closes: each batch it closed
// (tbs) is stored CLOSED as it listed it, once; the differences are
// CompareBatch's of its list and the service's record of the window; the
// windows of its CLOSED batches follow each other; none of its
// transactions is in no window, or in two.
func (c *closeEnv) checkTerminalBatches(i int, tbs []terminalBatch, all []storedBatch, txs []*instore.Transaction) []string {
	var bad []string
	say := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("terminal %d: ", i)+fmt.Sprintf(format, args...))
	}
	var mine, closed []storedBatch // by closedAt
	for _, b := range all {
		if b.terminalID == c.terms[i] {
			mine = append(mine, b)
			if b.state == instore.BatchClosed {
				closed = append(closed, b)
			}
		}
	}
	answered := map[string]terminalBatch{}
	for _, tb := range tbs {
		answered[tb.batchID] = tb
		b := storedBatch{}
		for _, x := range mine {
			if x.id == tb.batchID {
				b = x
			}
		}
		switch {
		case b.state != instore.BatchClosed:
			say("it closed batch %d for close %s, which the store holds %q", tb.number, tb.batchID, b.state)
		case b.number != tb.number || !reflect.DeepEqual(b.items, tb.items):
			say("close %s is stored with batch %d of %d transactions; the terminal closed batch %d of %d: stored %+v, the terminal's %+v",
				b.id, b.number, len(b.items), tb.number, len(tb.items), b.items, tb.items)
		}
	}
	numbers, refs := map[int64]string{}, map[string]string{}
	for _, b := range closed {
		if _, ok := answered[b.id]; !ok {
			say("close %s is stored CLOSED (batch %d), an answer the terminal never gave", b.id, b.number)
		}
		if other, ok := numbers[b.number]; ok {
			say("closes %s and %s are both stored with batch %d", other, b.id, b.number)
		}
		numbers[b.number] = b.id
		for _, it := range b.items {
			if other, ok := refs[it.Ref]; ok {
				say("transaction %s is in the terminal's list of two CLOSED batches, %s and %s", it.Ref, other, b.id)
			}
			refs[it.Ref] = b.id
		}
		var service []instore.BatchItem
		for _, tx := range txs {
			if tx.TerminalID == b.terminalID && instore.InBatch(tx, b.openedAt, b.closedAt) {
				service = append(service, instore.BatchItemOf(tx))
			}
		}
		if want := instore.CompareBatch(b.items, service); !reflect.DeepEqual(b.cmp, want) {
			say("close %s: the stored comparison %+v is not CompareBatch's of the terminal's list and the service's record of its window %+v", b.id, b.cmp, want)
		}
	}
	overlaps := c.checkWindows(mine, closed, say)
	if len(closed) == 0 {
		return bad
	}
	last := closed[len(closed)-1].closedAt
	for _, tx := range txs {
		if tx.TerminalID != c.terms[i] || !instore.InBatch(tx, mine[0].openedAt, last) {
			continue
		}
		var in []string
		for _, b := range closed {
			if instore.InBatch(tx, b.openedAt, b.closedAt) {
				in = append(in, b.id)
			}
		}
		if len(in) == 0 || len(in) > 1 && !slices.ContainsFunc(in, func(id string) bool { return overlaps[id] }) {
			say("%s %s (status %d, completed %s) is in the windows of the CLOSED batches %v, want one",
				tx.Type, tx.ID, tx.StatusID, tx.CompletedAt.UTC().Format(time.RFC3339Nano), in)
		}
	}
	return bad
}

// checkWindows checks that each CLOSED batch's window opens where the
// previous CLOSED batch's closed (the first's where the terminal ID's
// first close opened), or, when a close FAILED was closed by a late answer
// only after the next close was made (docs/decisions.md, "Day close"),
// where the CLOSED batch before it closed. It returns the batches whose
// windows overlap a late-closed one's.
func (c *closeEnv) checkWindows(mine, closed []storedBatch, say func(string, ...any)) map[string]bool {
	overlaps := map[string]bool{}
	for n, b := range closed {
		// The CLOSED batches b's window may skip: those closed late after b was made.
		k := n - 1
		for k >= 0 && closed[k].late && closed[k].reportedAt.After(b.closedAt) && !closed[k].closedAt.Equal(b.openedAt) {
			k--
		}
		start := mine[0].openedAt
		if k >= 0 {
			start = closed[k].closedAt
		}
		if !b.openedAt.Equal(start) {
			say("CLOSED batch %s (batch %d) opens at %s; the previous CLOSED batch closed at %s",
				b.id, b.number, b.openedAt.UTC().Format(time.RFC3339Nano), start.UTC().Format(time.RFC3339Nano))
		}
		if k < n-1 {
			overlaps[b.id] = true
			c.t.Logf("%s: CLOSED batch %s's window overlaps %d batches closed late after it was made", c.backend(), b.id, n-1-k)
		}
	}
	return overlaps
}

// closedEvents counts the batch.closed events of each close.
func (c *closeEnv) closedEvents(ctx context.Context) map[string]int {
	out := map[string]int{}
	c.scanRows(ctx, `SELECT data FROM events WHERE type = 'batch.closed'`, func(rs *sql.Rows) error {
		var data string
		if err := rs.Scan(&data); err != nil {
			return err
		}
		var b struct {
			ID string `json:"batchId"`
		}
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			return err
		}
		out[b.ID]++
		return nil
	})
	return out
}

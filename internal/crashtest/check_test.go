package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/instore-dev/instore"
)

// The checks after a restart (crashEnv.check) and what they read of the
// store.

// storedTx is a transaction as the store holds it.
type storedTx struct {
	id, terminalID string
	statusID       instore.TransactionStatus
	deadline       time.Time
}

func (e *crashEnv) transactions(ctx context.Context) []storedTx {
	var out []storedTx
	e.scanRows(ctx, `SELECT id, terminal_id, status_id, deadline_at FROM transactions WHERE type = 'PURCHASE'`, func(rows *sql.Rows) error {
		var tx storedTx
		var deadline sql.NullInt64
		if err := rows.Scan(&tx.id, &tx.terminalID, &tx.statusID, &deadline); err != nil {
			return err
		}
		if deadline.Valid {
			tx.deadline = time.UnixMicro(deadline.Int64)
		}
		out = append(out, tx)
		return nil
	})
	return out
}

// scanRows runs a query of the transactions and calls scan on each row;
// an error fails the test.
func (e *crashEnv) scanRows(ctx context.Context, query string, scan func(*sql.Rows) error) {
	rows, err := e.db.QueryContext(ctx, query)
	if err != nil {
		e.t.Fatalf("read the transactions: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			e.t.Fatalf("read the transactions: %v", err)
		}
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("read the transactions: %v", err)
	}
}

// check verifies the promises on the quiet system after a restart:
// nothing acknowledged lost, no key with two transactions (and no
// transaction no key's answer named), no transaction PENDING past its
// deadline, and every terminal takes a payment.
func (e *crashEnv) check(ctx context.Context, label string) {
	var bad []string
	bad = append(bad, e.led.takeViolations()...)

	// The server acts on deadlines that passed while it was down as it
	// starts; give it a moment.
	sleep(ctx, time.Until(e.srv.upSince.Add(2*time.Second)))
	stored := e.transactions(ctx)
	byID := map[string]storedTx{}
	now := time.Now()
	for _, tx := range stored {
		byID[tx.id] = tx
		if tx.statusID == instore.StatusPending && !tx.deadline.IsZero() && tx.deadline.Before(now.Add(-time.Second)) && e.first("pending", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s on terminal %d is PENDING %s past its deadline",
				tx.id, e.terminalIndex(tx.terminalID), now.Sub(tx.deadline).Round(time.Millisecond)))
		}
	}

	named, acked := e.led.known()
	for _, ref := range acked {
		if _, ok := byID[ref]; !ok && e.first("lost", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s was acknowledged to the ECR (201, key %s) and is not in the store", ref, named[ref]))
			continue
		}
		if a := e.ecr.do(ctx, "GET", "/in-store/api/v1/transaction/"+ref, nil, ""); (a.err != nil || a.status != http.StatusOK || a.ref != ref) && e.first("get", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s was acknowledged to the ECR (201, key %s); GET answers %s", ref, named[ref], a))
		}
	}
	for ref, key := range named {
		if _, ok := byID[ref]; !ok && !containsString(acked, ref) && e.first("lost", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s named to key %s is not in the store", ref, key))
		}
	}
	// Every purchase here carries a key: a transaction no answer named was
	// created by a key whose retries never learned of it, or is a key's
	// second.
	for _, tx := range stored {
		if _, ok := named[tx.id]; !ok && e.first("unnamed", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s on terminal %d (status %d) is named by no answer the ECR got for its keys (keys left without a definitive answer so far: %s)",
				tx.id, e.terminalIndex(tx.terminalID), tx.statusID, strings.Join(e.led.stuckSoFar(), ", ")))
		}
	}
	bad = append(bad, e.checkKeyColumn(ctx, named)...)
	bad = append(bad, e.checkUsable(ctx, label)...)
	bad = append(bad, e.checkBusy(ctx)...)
	e.report(label, append(bad, e.led.takeViolations()...))
}

// report fails the test with each finding of a check, and shows the
// server's last warnings and errors when there are any.
func (e *crashEnv) report(label string, bad []string) {
	for _, b := range bad {
		e.t.Errorf("%s, %s (INSTORE_CRASH_SEED=%d): %s", e.backend(), label, e.set.seed, b)
	}
	if len(bad) > 0 {
		if w := e.srv.warnings(10); w != "" {
			e.t.Logf("the server's warnings and errors since its start:\n%s", w)
		}
	}
}

// checkKeyColumn checks, once the store keeps the transaction each
// Idempotency-Key created (idempotency_keys.transaction_id), that every
// transaction is the one of exactly the key the ECR's answers tied it to.
func (e *crashEnv) checkKeyColumn(ctx context.Context, named map[string]string) []string {
	rows, err := e.db.QueryContext(ctx, `SELECT key, transaction_id FROM idempotency_keys WHERE transaction_id IS NOT NULL`)
	if err != nil {
		return nil // no such column yet
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var key, ref string
		if err := rows.Scan(&key, &ref); err != nil {
			return []string{fmt.Sprintf("read idempotency_keys: %v", err)}
		}
		if k, ok := named[ref]; ok && k != key {
			bad = append(bad, fmt.Sprintf("the store ties transaction %s to key %s, the ECR's answers to key %s", ref, key, k))
		}
	}
	return bad
}

// checkBusy finds the sales a terminal answered TERMINAL_IS_BUSY. The
// service sent each to a terminal it counted idle (no transaction
// PENDING on it); the terminals here have no user of their own and no
// update, so the terminal was still running a transaction the service had
// ended (a cancel overtaken by the next command: internal/service/owed.go). There must be
// none.
func (e *crashEnv) checkBusy(ctx context.Context) []string {
	var bad []string
	for _, tx := range e.busySales(ctx) {
		if e.first("busy", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s was answered TERMINAL_IS_BUSY by terminal %d, which the service counted idle",
				tx.id, e.terminalIndex(tx.terminalID)))
		}
	}
	return bad
}

// busySales returns the transactions that ended TERMINAL_IS_BUSY.
func (e *crashEnv) busySales(ctx context.Context) []storedTx {
	var out []storedTx
	for _, tx := range e.transactions(ctx) {
		if tx.statusID == instore.StatusTerminalIsBusy {
			out = append(out, tx)
		}
	}
	return out
}

// checkUsable pays one purchase on every terminal: each must end APPROVED.
// A terminal still busy with a transaction of before the kill, or still
// reconnecting, is asked again with a new key for up to keyBudget.
func (e *crashEnv) checkUsable(ctx context.Context, label string) []string {
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	slug := strings.ReplaceAll(label, " ", "-")
	for i := range e.terms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			for n := 0; ; n++ {
				out := e.ecr.purchase(ctx, i, e.terms[i], 5000, fmt.Sprintf("usable-%s-t%d-%d", slug, i, n))
				if out.kind == "acked" {
					st, ok := e.ecr.final(ctx, out.ref)
					if !ok || st != instore.StatusApproved {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("terminal %d: a purchase after the restart ended with status %d (final: %t), want APPROVED", i, st, ok))
						mu.Unlock()
					}
					return
				}
				if time.Since(start) > keyBudget || ctx.Err() != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("terminal %d takes no purchase within %s of the check; the last answer: %s", i, keyBudget, out.last))
					mu.Unlock()
					return
				}
				sleep(ctx, 200*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return bad
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// countOn counts the purchases in the store on a terminal.
func (e *crashEnv) countOn(ctx context.Context, terminalID string) int {
	n := 0
	for _, tx := range e.transactions(ctx) {
		if tx.terminalID == terminalID {
			n++
		}
	}
	return n
}

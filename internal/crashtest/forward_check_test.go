package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/instore-dev/instore"
)

// The checks of TestCrashForwards on the store once the terminals have
// forwarded everything.

// fwdRow is a transaction as stored, with its forwarding.
type fwdRow struct {
	id, terminalID, typ, original string
	forwarding                    instore.ForwardingState // "": not approved offline
	status                        instore.TransactionStatus
	amount                        int64
}

func (f *fwdEnv) fwdRows(ctx context.Context) []fwdRow {
	var out []fwdRow
	f.scanRows(ctx, `SELECT id, terminal_id, type, COALESCE(original_id, ''), COALESCE(forwarding_state, ''), status_id, amount
		FROM transactions ORDER BY created_at, id`, func(rs *sql.Rows) error {
		var r fwdRow
		if err := rs.Scan(&r.id, &r.terminalID, &r.typ, &r.original, &r.forwarding, &r.status, &r.amount); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out
}

// settleForwards waits, for up to keyBudget, until no transaction is
// PENDING, and returns the rows then.
func (f *fwdEnv) settleForwards(ctx context.Context) []fwdRow {
	return untilSettled(ctx, keyBudget, func() []fwdRow { return f.fwdRows(ctx) }, func(rows []fwdRow) bool {
		return slices.ContainsFunc(rows, func(r fwdRow) bool { return r.status == instore.StatusPending })
	})
}

// refundAtEnd tries a refund of every sale whose forward was declined
// (refused: the merchant was not paid) and of one forwarded sale per
// terminal (approved: a forwarded sale is refunded like any other).
func (f *fwdEnv) refundAtEnd(ctx context.Context, rows []fwdRow) {
	refunded := map[int]bool{}
	for _, r := range rows {
		if r.typ != string(instore.TypePurchase) || r.status != instore.StatusApproved {
			continue
		}
		term := f.terminalIndex(r.terminalID)
		key := "fwd-end-refund-" + r.id
		switch {
		case r.forwarding == instore.ForwardDeclined:
			f.mu.Lock()
			f.queuedRefunds = append(f.queuedRefunds, key) // refused as one of a QUEUED sale is
			f.mu.Unlock()
			out, _ := f.runTaken(ctx, term, key, func(key string) paOp { return refundOp(r.terminalID, r.id, r.amount, key) })
			if a := out.last; out.kind != "refused" || a.status != 409 || a.code != "conflict" {
				f.led.violation("key %s: a refund of %s, whose forward was declined, was answered %s (%s), want 409 conflict", key, r.id, a, out.kind)
			}
		case r.forwarding == instore.ForwardForwarded && !refunded[term]:
			refunded[term] = true
			if out, ok := f.runTaken(ctx, term, key, func(key string) paOp { return refundOp(r.terminalID, r.id, 100, key) }); !ok {
				f.led.violation("key %s: a refund of 1.00 of %s, forwarded, ended %s %s, want APPROVED", key, r.id, out.kind, out.last)
			}
		}
	}
}

// checkForwards checks the promises on the quiet store.
func (f *fwdEnv) checkForwards(ctx context.Context, rows []fwdRow) {
	var bad []string
	say := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	byID := map[string]fwdRow{}
	for _, r := range rows {
		byID[r.id] = r
		if r.status == instore.StatusPending {
			say("%s %s is still PENDING after the settle time", r.typ, r.id)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every offline approval a terminal made is stored, forwarded as the
	// terminal reported it, once.
	entries, events := f.forwardEntries(ctx), f.forwardEvents(ctx)
	for _, ref := range slices.Sorted(maps.Keys(f.want)) {
		want := f.want[ref]
		r, ok := byID[ref]
		switch {
		case !ok:
			say("offline approval %s, which a terminal queued and forwarded, is not in the store", ref)
			continue
		case r.forwarding != want:
			say("offline approval %s (status %d) is %q; its terminal reported it %s", ref, r.status, r.forwarding, want)
		}
		kind, typ := instore.EventForwarded, instore.EventTransactionForwarded
		if want == instore.ForwardDeclined {
			kind, typ = instore.EventForwardDeclined, instore.EventTransactionForwardDeclined
		}
		if e := entries[ref]; len(e) != 1 || e[0] != string(kind) {
			say("offline approval %s (%s) has the forwarding timeline entries %v, want one %s", ref, want, e, kind)
		}
		if e := events[ref]; len(e) != 1 || e[0] != string(typ) {
			say("offline approval %s (%s) has the forwarding events %v, want one %s", ref, want, e, typ)
		}
	}
	var sevens, nines int
	for _, r := range rows {
		if r.forwarding != "" {
			if _, ok := f.want[r.id]; !ok {
				say("%s %s (status %d) is an offline approval %s that no terminal forwarded", r.typ, r.id, r.status, r.forwarding)
			}
		}
		if r.typ == string(instore.TypeRefund) {
			if o := byID[r.original]; o.forwarding == instore.ForwardDeclined || o.forwarding == instore.ForwardQueued {
				say("refund %s (status %d) of %s, an offline approval %s, was accepted", r.id, r.status, r.original, o.forwarding)
			}
		}
		term := f.terminalIndex(r.terminalID)
		if r.typ != string(instore.TypePurchase) || term < 0 || term >= len(f.sims) {
			continue
		}
		// Every sale on a virtual terminal was paid while its card
		// network was down.
		above := r.amount > fwdFloor
		switch r.status {
		case instore.StatusTerminalIsOffline:
			nines++
			if !above {
				say("sale %s of %d ended TERMINAL_IS_OFFLINE (9), at or below the floor limit %d", r.id, r.amount, fwdFloor)
			}
		case instore.StatusOfflineQueueIsFull:
			sevens++
			if above || !f.full[term] {
				say("sale %s of %d ended OFFLINE_QUEUE_IS_FULL (7); above the floor limit %d: %t, terminal %d's queue filled: %t", r.id, r.amount, fwdFloor, above, term, f.full[term])
			}
		case instore.StatusApproved:
			if above || r.forwarding == "" {
				say("sale %s of %d was APPROVED (forwarding %q) while its card network was down; the floor limit is %d", r.id, r.amount, r.forwarding, fwdFloor)
			}
		}
	}
	if sevens == 0 || nines == 0 {
		say("the run made %d sales OFFLINE_QUEUE_IS_FULL (7) and %d TERMINAL_IS_OFFLINE (9), want some of each", sevens, nines)
	}
	f.t.Logf("%s: %d sales ended OFFLINE_QUEUE_IS_FULL (7), %d TERMINAL_IS_OFFLINE (9); %d refunds of QUEUED or DECLINED sales tried",
		f.backend(), sevens, nines, len(f.queuedRefunds))
	for ref, st := range f.told {
		if r, ok := byID[ref]; !ok {
			say("transaction %s, whose end (status %d) the ECR was told, is not in the store", ref, st)
		} else if (st == instore.StatusApproved) != (r.status == instore.StatusApproved) {
			say("%s %s: the ECR was told status %d, the store holds %d", r.typ, ref, st, r.status)
		}
	}
	named, _ := f.led.known()
	for _, key := range f.queuedRefunds {
		for ref, k := range named {
			if k == key || strings.HasPrefix(k, key+"-") { // runTaken's next keys
				say("key %s, a refund of a QUEUED or DECLINED sale, created transaction %s", key, ref)
			}
		}
	}
	for _, r := range rows {
		if _, ok := named[r.id]; !ok {
			say("%s %s (status %d) is named by no answer the ECR got for its keys", r.typ, r.id, r.status)
		}
	}
	bad = append(bad, f.checkKeyColumn(ctx, named)...)
	f.report("the forwards", append(bad, f.led.takeViolations()...))
}

// forwardEntries are the forwarding timeline entries (FORWARDED,
// FORWARD_DECLINED) of each transaction, in order.
func (f *fwdEnv) forwardEntries(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	f.scanRows(ctx, `SELECT transaction_id, kind FROM transaction_events WHERE kind IN ('FORWARDED', 'FORWARD_DECLINED')
		ORDER BY transaction_id, version`, func(rs *sql.Rows) error {
		var ref, kind string
		if err := rs.Scan(&ref, &kind); err != nil {
			return err
		}
		out[ref] = append(out[ref], kind)
		return nil
	})
	return out
}

// forwardEvents are the forwarding events (transaction.forwarded,
// transaction.forward_declined) of each transaction, in order.
func (f *fwdEnv) forwardEvents(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	f.scanRows(ctx, `SELECT type, data FROM events WHERE type IN ('transaction.forwarded', 'transaction.forward_declined') ORDER BY seq`,
		func(rs *sql.Rows) error {
			var typ, data string
			if err := rs.Scan(&typ, &data); err != nil {
				return err
			}
			var tx struct {
				Ref string `json:"onlineAPIRefId"`
			}
			if err := json.Unmarshal([]byte(data), &tx); err != nil {
				return fmt.Errorf("event %s: %w", typ, err)
			}
			out[tx.Ref] = append(out[tx.Ref], typ)
			return nil
		})
	return out
}

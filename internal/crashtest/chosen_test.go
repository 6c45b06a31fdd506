package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The chosen kills of TestCrash: between a terminal's ack and the 201, and
// during ECR confirmation windows.

// ackedThenKilled kills the server after the terminal acknowledged a
// purchase and before the purchase's 201 was stored, then retries the
// purchase with its key: the answer must be about the same transaction,
// at once and after the record would count as abandoned, and never a
// second transaction.
//
// "frozen" (both stores): the server is stopped (SIGSTOP) as the raw
// terminal receives the command, the terminal sends its ack, and the
// server is killed: the terminal acknowledged, the server stored neither
// the ack nor the 201. "locked" (PostgreSQL): the test holds the row lock
// of the key's record, the terminal acknowledges, the server commits the
// ack and blocks storing the 201, and is killed there.
func (e *crashEnv) ackedThenKilled(ctx context.Context, variant string) {
	t := e.t
	label := "the kill between the ack and the 201 (" + variant + ")"
	rawTerm := len(e.terms) - 1
	key := "acked-then-killed-" + variant
	before := e.countOn(ctx, e.terms[rawTerm])

	held := e.raw.hold()
	first := make(chan answer, 1)
	body, _ := json.Marshal(map[string]any{"terminalId": e.terms[rawTerm], "amount": 4200, "currency": "SEK"})
	go func() { first <- e.ecr.do(ctx, "POST", "/in-store/api/v1/purchase", body, key) }()
	var ref string
	select {
	case env := <-held:
		ref = env.Ref
		if variant == "locked" {
			e.ackLocked(ctx, env, key)
			break
		}
		if err := e.srv.freeze(); err != nil {
			t.Fatal(err)
		}
		if err := e.raw.ack(env); err != nil {
			t.Fatalf("ack: %v", err)
		}
		e.srv.kill9()
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: the command never reached the raw terminal", label)
	}
	if a := <-first; a.err == nil {
		t.Errorf("%s: the first request was answered %s; the server was to die before", label, a)
	}
	var status sql.NullInt64
	if err := e.db.QueryRowContext(ctx, e.q(`SELECT status_code FROM idempotency_keys WHERE key = ?`), key).Scan(&status); err != nil {
		t.Fatalf("%s: the key's record: %v", label, err)
	}
	if status.Valid {
		t.Fatalf("%s: the key's record holds a response (%d): the kill came too late for this round", label, status.Int64)
	}
	// The terminal goes on with its payment: approved, resent until
	// confirmed, as the protocol has it.
	e.raw.finish(ref, instore.StatusApproved)
	if err := e.srv.start(ctx); err != nil {
		t.Fatalf("%s: restart: %v", label, err)
	}

	retry := func(when string) {
		out := e.ecr.purchaseQuiet(ctx, rawTerm, e.terms[rawTerm], 4200, key)
		switch {
		case out.kind == "stuck":
			t.Errorf("%s (INSTORE_CRASH_SEED=%d): the retry %s got no answer about transaction %s within %s; the last: %s",
				e.backend(), e.set.seed, when, ref, keyBudget, out.last)
		case out.ref != ref:
			t.Errorf("%s, %s: the retry %s answered %s about transaction %q, want %s: never a second transaction",
				e.backend(), label, when, out.last, out.ref, ref)
		}
	}
	retry("after the restart")
	// Later: the record would count as abandoned (5 minutes); aged here
	// rather than waited for.
	if _, err := e.db.ExecContext(ctx, e.q(`UPDATE idempotency_keys SET created_at = created_at - ? WHERE key = ?`), (6 * time.Minute).Microseconds(), key); err != nil {
		t.Fatalf("age the key's record: %v", err)
	}
	retry("6 minutes later")
	if got := e.countOn(ctx, e.terms[rawTerm]); got != before+1 {
		t.Errorf("%s, %s: %d purchases on the terminal, want %d: one for the key", e.backend(), label, got-before, 1)
	}
	e.check(ctx, label)
}

// ackLocked acknowledges a held command while the test holds the row lock
// of the key's Idempotency-Key record (PostgreSQL): the server commits the
// acknowledgement and then blocks storing the 201 on the lock; it is killed
// there, and the store connection it blocked on is ended before the lock is
// released, so that the 201 is never stored.
func (e *crashEnv) ackLocked(ctx context.Context, cmd protocol.Envelope, key string) {
	t := e.t
	lock, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var pid int
	if err := lock.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `SELECT 1 FROM idempotency_keys WHERE key = $1 FOR UPDATE`, key); err != nil {
		t.Fatalf("lock the key's record: %v", err)
	}
	if err := e.raw.ack(cmd); err != nil {
		t.Fatalf("ack: %v", err)
	}
	e.waitAcknowledged(ctx, cmd.Ref)
	// The server's store connection waiting on the lock: the 201 is ready.
	blocked := `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`
	testwait.For(t, "the server to try to store the 201 after the acknowledgement", func() bool {
		var n int
		if err := e.db.QueryRowContext(ctx, `SELECT count(*) FROM (`+blocked+`) b`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	e.srv.kill9()
	if _, err := e.db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM (`+blocked+`) b`, pid); err != nil {
		t.Fatal(err)
	}
}

// waitAcknowledged waits until the store holds the acknowledgement of ref.
func (e *crashEnv) waitAcknowledged(ctx context.Context, ref string) {
	testwait.For(e.t, "the server to store the acknowledgement of "+ref, func() bool {
		var at sql.NullInt64
		err := e.db.QueryRowContext(ctx, e.q(`SELECT acknowledged_at FROM transactions WHERE id = ?`), ref).Scan(&at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			e.t.Fatalf("read the acknowledgement: %v", err)
		}
		return at.Valid
	})
}

// unconfirmedKilled: two sales on the raw terminal ask for ECR confirmation
// within 10 s and are approved; the ECR confirms one. The server is killed
// (SIGKILL) before either window ends and started again only after both
// passed: the unconfirmed sale must still be reversed (REVERSED,
// AUTO_REVERSED, a CONFIRM_TIMEOUT reversal reaches the terminal), the
// confirmed one must stay APPROVED. No timer outlives the process; the
// store's deadline is the record.
func (e *crashEnv) unconfirmedKilled(ctx context.Context) {
	t := e.t
	label := "the kill during the confirmation windows"
	rawTerm := len(e.terms) - 1
	const window = 10 * time.Second
	sale := func(key string) string {
		body, _ := json.Marshal(map[string]any{"terminalId": e.terms[rawTerm], "amount": 4300, "currency": "SEK",
			"confirmWithinSeconds": int(window / time.Second)})
		for start := time.Now(); time.Since(start) < keyBudget; sleep(ctx, retryPause) {
			a := e.ecr.do(ctx, "POST", "/in-store/api/v1/purchase", body, key)
			e.led.answer(key, rawTerm, a)
			if a.err == nil && a.status == http.StatusCreated {
				if st, ok := e.ecr.final(ctx, a.ref); !ok || st != instore.StatusApproved {
					t.Fatalf("%s: sale %s ended %d (%v), want APPROVED", label, a.ref, st, ok)
				}
				return a.ref
			}
			if !a.retry() && a.code != "WP09" {
				t.Fatalf("%s: purchase answered %s %s", label, a, a.body)
			}
		}
		t.Fatalf("%s: no purchase within %s", label, keyBudget)
		return ""
	}
	kept, dropped := sale("confirm-kept"), sale("confirm-dropped")
	if a := e.ecr.do(ctx, "POST", "/in-store/api/v1/transaction/"+kept+"/confirm", nil, "confirm-kept-confirm"); a.status != http.StatusOK {
		t.Fatalf("%s: confirm answered %s %s", label, a, a.body)
	}
	var deadline int64
	if err := e.db.QueryRowContext(ctx, e.q(`SELECT confirm_deadline FROM transactions WHERE id = ? AND confirm_state = 'PENDING'`), dropped).Scan(&deadline); err != nil {
		t.Fatalf("%s: the unconfirmed sale's deadline: %v", label, err)
	}
	e.srv.kill9()
	sleep(ctx, time.Until(time.UnixMicro(deadline))+time.Second)
	if err := e.srv.start(ctx); err != nil {
		t.Fatalf("%s: restart: %v", label, err)
	}
	for start := time.Now(); e.raw.reversal(dropped) == ""; sleep(ctx, 50*time.Millisecond) {
		if time.Since(start) > keyBudget {
			t.Fatalf("%s: the unconfirmed sale %s was never reversed on the terminal", label, dropped)
		}
	}
	if r := e.raw.reversal(dropped); r != instore.ReversalConfirmTimeout {
		t.Errorf("%s: reversal reason %q, want %s", label, r, instore.ReversalConfirmTimeout)
	}
	state := func(ref string) (status instore.TransactionStatus, confirm instore.ConfirmState) {
		if err := e.db.QueryRowContext(ctx, e.q(`SELECT status_id, confirm_state FROM transactions WHERE id = ?`), ref).Scan(&status, &confirm); err != nil {
			t.Fatalf("%s: %s: %v", label, ref, err)
		}
		return status, confirm
	}
	if st, c := state(dropped); st != instore.StatusReversed || c != instore.ConfirmAutoReversed {
		t.Errorf("%s: the unconfirmed sale is %d %s, want REVERSED AUTO_REVERSED", label, st, c)
	}
	if st, c := state(kept); st != instore.StatusApproved || c != instore.ConfirmConfirmed || e.raw.reversal(kept) != "" {
		t.Errorf("%s: the confirmed sale is %d %s (reversal %q), want APPROVED CONFIRMED and no reversal", label, st, c, e.raw.reversal(kept))
	}
	e.check(ctx, label)
}

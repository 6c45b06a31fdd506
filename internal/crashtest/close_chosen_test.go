package crashtest

import (
	"context"
	"database/sql"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The chosen kills of TestCrashClose, on the raw terminal's closes: the
// ECR's close request is sent once (a retry with its key after the kill
// would be a new close, the first not being tied to the key), and the
// close must end CLOSED with the terminal's answer.

// heldClose closes the raw terminal's batch with its next close held (a
// sale the service never saw in it): it returns the close as the terminal
// got it and a channel closed once the ECR's request ended. A purchase on
// the terminal while the close runs must be answered WP09 BATCH_CLOSE.
func (c *closeEnv) heldClose(ctx context.Context, label string) (protocol.Envelope, <-chan struct{}) {
	term := len(c.terms) - 1
	if !testwait.Until(keyBudget, func() bool { return c.raw.connected() || ctx.Err() != nil }) {
		c.t.Fatalf("%s: the raw terminal has no session", label)
	}
	c.raw.addExtra(700)
	held := c.raw.holdClose()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.closeBatch(ctx, term, "close-raw-"+label, false)
	}()
	var cmd protocol.Envelope
	select {
	case cmd = <-held:
	case <-time.After(keyBudget):
		c.t.Fatalf("%s: the close never reached the raw terminal", label)
	}
	op := purchaseOp(c.terms[term], 1200)
	op.key = "close-raw-" + label + "-purchase"
	out, _ := c.run(ctx, term, op)
	if out.kind != "refused" || out.last.code != "WP09" || reasonOf(out.last) != instore.ReasonBatchClose {
		c.led.violation("key %s: a purchase on the raw terminal while its close %s ran was answered %s (%s), want 409 WP09 BATCH_CLOSE",
			op.key, cmd.Ref, out.last, out.kind)
	} else {
		c.busy(op.key)
	}
	return cmd, done
}

// rawCutBeforeAnswer kills the server right after the raw terminal got a
// close, before it answered. answerNow: the terminal answers at once (its
// batch reaches the server after the restart); else only once the close,
// which it got again after the restart and ignored, is stored FAILED (a
// late answer).
func (c *closeEnv) rawCutBeforeAnswer(ctx context.Context, answerNow bool) {
	label := "cut-before-late-answer"
	if answerNow {
		label = "cut-before-answer"
	}
	cmd, done := c.heldClose(ctx, label)
	c.srv.kill9()
	<-done
	if answerNow {
		c.raw.answerClose(cmd.Ref)
	}
	c.restartAfter(ctx, 200*time.Millisecond, label)
	if !answerNow {
		if st := c.awaitBatch(ctx, cmd.Ref, instore.BatchFailed); st != instore.BatchFailed {
			c.led.violation("%s: close %s, unanswered, is %q %s after the restart, want FAILED", label, cmd.Ref, st, keyBudget)
		}
		c.raw.answerClose(cmd.Ref)
	}
	if st := c.awaitBatch(ctx, cmd.Ref, instore.BatchClosed); st != instore.BatchClosed {
		c.led.violation("%s: close %s is %q %s after the raw terminal answered it, want CLOSED", label, cmd.Ref, st, keyBudget)
	}
	c.t.Logf("%s: SIGKILL after the raw terminal got close %s, before it answered (answered %s)",
		c.backend(), cmd.Ref, map[bool]string{true: "at once", false: "once the close was FAILED"}[answerNow])
}

// rawCutBeforeConfirm kills the server right after the raw terminal's
// batch was written, before its confirm came back: the terminal resends it
// after the restart, and it is applied once.
func (c *closeEnv) rawCutBeforeConfirm(ctx context.Context) {
	label := "cut-before-confirm"
	cmd, done := c.heldClose(ctx, label)
	env, err := c.raw.answerClose(cmd.Ref)
	c.srv.kill9()
	cut := err == nil && c.raw.unconfirmed(env.ID)
	<-done
	c.restartAfter(ctx, 200*time.Millisecond, label)
	if st := c.awaitBatch(ctx, cmd.Ref, instore.BatchClosed); st != instore.BatchClosed {
		c.led.violation("%s: close %s is %q %s after the restart, want CLOSED", label, cmd.Ref, st, keyBudget)
	}
	c.t.Logf("%s: SIGKILL right after the raw terminal's batch for close %s was written (write error: %v; its confirm not yet received: %t)",
		c.backend(), cmd.Ref, err, cut)
}

// awaitBatch waits, for up to keyBudget, until the close id is stored in
// state want, and returns the state it saw last ("" if none).
func (c *closeEnv) awaitBatch(ctx context.Context, id string, want instore.BatchState) instore.BatchState {
	var st instore.BatchState
	testwait.Until(keyBudget, func() bool {
		st = c.batchState(ctx, id)
		return st == want || ctx.Err() != nil
	})
	return st
}

func (c *closeEnv) batchState(ctx context.Context, id string) instore.BatchState {
	var st instore.BatchState
	err := c.db.QueryRowContext(ctx, c.q(`SELECT state FROM batches WHERE id = ?`), id).Scan(&st)
	if err != nil && err != sql.ErrNoRows && ctx.Err() == nil {
		c.t.Fatalf("read close %s: %v", id, err)
	}
	return st
}

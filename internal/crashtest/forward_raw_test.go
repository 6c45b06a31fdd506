package crashtest

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The raw terminal's part in TestCrashForwards: it approves a purchase
// offline each cycle, and forwards it when the test says, which lets the
// test kill the server right after the `forwarded` message went out.

// rawOffline pays a purchase on the raw terminal, which approves it
// offline; the sale is kept for rawForward.
func (f *fwdEnv) rawOffline(ctx context.Context, cycle int) {
	term := len(f.terms) - 1
	held := f.raw.hold()
	type ended struct {
		out      outcome
		approved bool
	}
	done := make(chan ended, 1)
	go func() {
		out, ok := f.runTaken(ctx, term, fmt.Sprintf("fwd-c%d-raw", cycle), func(key string) paOp {
			return paOp{path: "/in-store/api/v1/purchase", key: key, body: map[string]any{"terminalId": f.terms[term], "amount": 2000, "currency": "SEK"}}
		})
		done <- ended{out, ok}
	}()
	select {
	case cmd := <-held:
		if err := f.raw.ack(cmd); err != nil {
			f.t.Fatalf("cycle %d: the raw terminal's ack: %v", cycle, err)
		}
		res := protocol.Result{StatusID: instore.StatusApproved, MaskedPAN: "******0119", AuthorizationCode: "CRASH1",
			EntryMode: "CHIP", CardBrand: "VISA", Offline: true}
		f.raw.report(f.raw.envelope(protocol.TypeResult, "", cmd.Ref, res))
	case <-time.After(2 * keyBudget): // runTaken's bound, and a purchase's
		f.t.Fatalf("cycle %d: the raw terminal's purchase never reached it", cycle)
	}
	if e := <-done; !e.approved {
		f.t.Fatalf("cycle %d: the raw terminal's offline approval ended %s %s", cycle, e.out.kind, e.out.last)
	} else {
		f.rawSales = append(f.rawSales, e.out.ref)
	}
}

// rawForward sends the raw terminal's `forwarded` report of the cycle's
// offline approval (declined or not) and kills the server as soon as the
// frame is written: the server may have applied it or not, and its
// confirm has not reached the terminal, which resends the report after
// the restart. It counts the kills at which the report was indeed still
// unconfirmed.
func (f *fwdEnv) rawForward(ctx context.Context, cycle int, declined bool) {
	ref := f.rawSales[cycle-1]
	if !testwait.Until(keyBudget, func() bool { return f.raw.connected() || ctx.Err() != nil }) {
		f.t.Fatalf("cycle %d: the raw terminal has no session", cycle)
	}
	env := f.raw.envelope(protocol.TypeForwarded, "", ref, protocol.Forwarded{Declined: &declined, ForwardedAt: time.Now().UTC()})
	f.mu.Lock()
	f.want[ref] = instore.ForwardForwarded
	if declined {
		f.want[ref] = instore.ForwardDeclined
	}
	f.mu.Unlock()
	err := f.raw.report(env)
	f.srv.kill9()
	cut := err == nil && f.raw.unconfirmed(env.ID)
	if cut {
		f.chosen++
	}
	f.restartAfter(ctx, 200*time.Millisecond, fmt.Sprintf("cycle %d, the raw terminal's forward", cycle))
	f.t.Logf("%s cycle %d: SIGKILL right after the raw terminal's forward (declined %t) was written (write error: %v; its confirm not yet received: %t)",
		f.backend(), cycle, declined, err, cut)
}

// report keeps a message the terminal sends until confirmed (a result, a
// forwarded report) and sends it; it is resent after every reconnect. It
// returns the error of the write (no session: sent after the reconnect).
func (r *rawTerminal) report(env protocol.Envelope) error {
	r.mu.Lock()
	r.results = append(r.results, &rawResult{ref: env.Ref, env: env})
	conn := r.conn
	r.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("no session")
	}
	return r.write(conn, env)
}

// unconfirmed reports whether the message id is still kept for a confirm.
func (r *rawTerminal) unconfirmed(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.results {
		if x.env.ID == id {
			return true
		}
	}
	return false
}

// unconfirmedCount is how many messages wait for a confirm.
func (r *rawTerminal) unconfirmedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.results)
}

func (r *rawTerminal) connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn != nil
}

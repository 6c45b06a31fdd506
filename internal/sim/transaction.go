package sim

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// Progress stages a terminal reports.
const (
	StageWaitingForCard = instore.ProgressWaitingForCard
	StageWaitingForPIN  = instore.ProgressWaitingForPIN
	StageAuthorizing    = instore.ProgressAuthorizing
)

const (
	// defaultWindow is the transaction deadline assumed when a command
	// carries none.
	defaultWindow = 120 * time.Second
	// giveUpGrace: a transaction that waits for a cancel (outcome 92) ends
	// TECHNICAL_ERROR on its own this long after its deadline, so that a
	// cancel lost with a session cannot keep the terminal busy for ever.
	giveUpGrace = 30 * time.Second
	// resultHold is how long the outcome stays on the screen.
	resultHold = 5 * time.Second
	// keepConfirmed is how many confirmed results are remembered, to answer
	// a command or cancel the gateway repeats.
	keepConfirmed = 16
	// keepPrinted is how many answered print jobs are remembered, so that
	// a job the gateway sends again is not printed twice.
	keepPrinted = 64
)

// mode is how a transaction behaves, chosen by the sandbox outcome rules.
type mode int

const (
	modeNormal mode = iota // the planned status after Delay
	modeNoAck              // 91: never acknowledged, nothing held
	modeSilent             // 92: acknowledged, answered only after a cancel
	modeDrop               // 93: approved, delivered after a dropped session
	modeLate               // 94: approved after half the deadline
)

// sandboxOutcome applies the amount rule: the last two digits of the amount
// pick the outcome.
func sandboxOutcome(amount int64) (status instore.TransactionStatus, m mode) {
	switch d := amount % 100; {
	case d == 1, d >= 3 && d <= 12:
		return instore.TransactionStatus(d), modeNormal
	case d == 91:
		return 0, modeNoAck
	case d == 92:
		return 0, modeSilent
	case d == 93:
		return instore.StatusApproved, modeDrop
	case d == 94:
		return instore.StatusApproved, modeLate
	}
	return instore.StatusApproved, modeNormal
}

// txn is the transaction in progress.
type txn struct {
	ref     string
	kind    string // protocol.TypePurchase, TypeRefund, TypePreAuth, or a cardless kind (cardless)
	pay     protocol.Payment
	status  instore.TransactionStatus // the planned outcome
	mode    mode
	arrived time.Time
	window  time.Duration // from arrival to the deadline

	// decide receives the outcome a person chose (interactive mode only).
	decide chan instore.TransactionStatus
	// decided: a person's outcome was sent on decide (one only).
	decided bool
	// tip is the tip charged if approved (tip.go); tipWait receives a
	// person's answer to the tip prompt (interactive mode only).
	tip         int64
	tipWait     chan int64
	tipAnswered bool // guarded by Terminal.mu

	// Guarded by Terminal.mu.
	acked     bool
	cancel    string        // the cancel reason, once one came
	cancelled chan struct{} // closed when cancel is set
}

// stored is a result the terminal reported: resent after every hello until
// confirmed, and kept a little longer to answer repeated commands.
type stored struct {
	ref       string
	env       protocol.Envelope
	status    instore.TransactionStatus // as reported
	confirmed bool
}

// command handles purchase, refund, preauth, and the cardless increment,
// capture and void (played with the authorising stage only).
func (t *Terminal) command(ctx context.Context, s *session, env protocol.Envelope) {
	if env.Ref == "" {
		t.log.Warn("sim: ignoring a command without a reference", "type", env.Type)
		return
	}
	arrived := time.Now()
	var p protocol.Payment
	perr := json.Unmarshal(env.Data, &p)
	ack := t.envelope(protocol.TypeAck, env.ID, env.Ref, nil)
	tx := &txn{ref: env.Ref, kind: env.Type, pay: p, arrived: arrived, cancelled: make(chan struct{})}

	t.mu.Lock()
	// The gateway repeated a command: acknowledge it again, and resend its
	// result if there is one.
	if t.tx != nil && t.tx.ref == env.Ref {
		t.mu.Unlock()
		t.sendOn(s, ack)
		return
	}
	if r := t.resultLocked(env.Ref); r != nil {
		t.mu.Unlock()
		t.sendOn(s, ack)
		t.sendOn(s, r.env)
		return
	}
	if slices.Contains(t.cancelledUnknown, env.Ref) {
		// Its cancel came first: the gateway resent the command (after a
		// reconnect) as the service ended it. Dropped, as the cancel says,
		// not started: the terminal stays free for the next command.
		t.mu.Unlock()
		t.log.Info("sim: command after its cancel; dropped", "ref", env.Ref)
		return
	}
	// Busy (a transaction, an installation), below the minimum software
	// version, or a command it cannot read: acknowledge and answer at once.
	if t.tx != nil || perr != nil || t.installing != nil || t.mustUpdateLocked() {
		status := instore.StatusTerminalIsBusy
		switch {
		case perr != nil:
			status = instore.StatusTechnicalError
			t.log.Warn("sim: malformed payment command", "ref", env.Ref, "err", perr)
		case t.tx == nil && t.installing == nil:
			status = instore.StatusTerminalMustUpdate
		}
		r := t.storeLocked(tx, status)
		t.mu.Unlock()
		t.log.Info("sim: reporting", "ref", env.Ref, "statusId", status)
		t.sendOn(s, ack)
		t.sendOn(s, r.env)
		return
	}

	tx.status, tx.mode = sandboxOutcome(p.Amount)
	if t.nextOutcome != nil {
		tx.status, tx.mode = *t.nextOutcome, modeNormal
		t.nextOutcome = nil
	} else if t.interactive && !cardless(tx.kind) {
		// A person decides (Decide), whatever the amount says. An
		// increment, capture or void involves no cardholder: it plays
		// by its amount, or the next outcome set, as on any terminal.
		tx.status, tx.mode, tx.decide = instore.StatusApproved, modeNormal, make(chan instore.TransactionStatus, 1)
	}
	t.planTipLocked(tx)
	if tx.mode == modeNoAck {
		t.mu.Unlock()
		t.log.Info("sim: sandbox outcome: not acknowledging", "ref", env.Ref)
		return
	}
	tx.window = defaultWindow
	if !p.Deadline.IsZero() {
		tx.window = max(p.Deadline.Sub(arrived), 0)
	}
	t.tx = tx
	t.txScreen = amountScreen(tx)
	t.screenGen++
	ls := t.changedLocked()
	t.mu.Unlock()
	for _, l := range ls {
		l()
	}
	t.log.Info("sim: transaction", "type", env.Type, "ref", env.Ref)

	ok := t.sendOn(s, ack)
	t.mu.Lock()
	tx.acked = ok
	t.mu.Unlock()

	if tx.mode == modeDrop {
		// 93: the approval is decided now and kept as an unconfirmed
		// result; the session goes down for a quarter of the deadline and
		// the result is delivered after the next hello.
		hold := tx.window / 4
		t.update(func() {
			t.tx = nil
			t.showOutcomeLocked(t.storeLocked(tx, instore.StatusApproved).status)
			t.holdUntil = time.Now().Add(hold)
		})
		t.log.Info("sim: sandbox outcome: dropping the session", "ref", env.Ref, "for", hold)
		s.drop()
		return
	}
	t.txWG.Add(1)
	go t.process(ctx, tx)
}

// process plays a transaction to its end. It runs on its own goroutine, so
// the transaction goes on while the session drops and comes back.
func (t *Terminal) process(ctx context.Context, tx *txn) {
	defer t.txWG.Done()
	t.play(ctx, tx)
	if ctx.Err() != nil {
		// Run ended: the terminal is switched off and forgets it.
		t.update(func() {
			if t.tx == tx {
				t.tx, t.txScreen = nil, ""
			}
		})
		return
	}
	t.finish(tx)
}

// play reports the progress stages spread over the delay and waits for the
// moment of the result; a cancel or the end of Run cuts it short.
func (t *Terminal) play(ctx context.Context, tx *txn) {
	if tx.decide != nil {
		// Interactive: ask for the tip, present the card prompt and wait
		// for a person.
		if !t.awaitTip(ctx, tx) {
			return
		}
		t.progress(tx, StageWaitingForCard)
		select {
		case st := <-tx.decide:
			t.update(func() { tx.status = st })
		case <-tx.cancelled:
			return
		case <-ctx.Done():
			return
		}
		t.progress(tx, StageAuthorizing)
		return
	}
	total := t.cfg.Delay
	if tx.mode == modeLate {
		total = max(total, tx.window/2)
	}
	stages := []instore.Progress{StageWaitingForCard, StageWaitingForPIN, StageAuthorizing}
	switch {
	case cardless(tx.kind):
		stages = []instore.Progress{StageAuthorizing}
	case tx.pay.PaymentMethodID != nil:
		stages = []instore.Progress{StageWaitingForCard, StageAuthorizing}
	}
	start := time.Now()
	for i, stage := range stages {
		if !t.sleepUntil(ctx, tx, start.Add(total*time.Duration(i)/time.Duration(len(stages)))) {
			return
		}
		t.progress(tx, stage)
		if tx.mode == modeSilent {
			// 92: no answer until the gateway cancels.
			t.sleepUntil(ctx, tx, tx.arrived.Add(tx.window+giveUpGrace))
			return
		}
	}
	t.sleepUntil(ctx, tx, start.Add(total))
}

// sleepUntil waits until when; it reports false if the transaction was
// cancelled or ctx ended first.
func (t *Terminal) sleepUntil(ctx context.Context, tx *txn, when time.Time) bool {
	timer := time.NewTimer(time.Until(when))
	defer timer.Stop()
	select {
	case <-tx.cancelled:
		return false
	case <-ctx.Done():
		return false
	default:
	}
	select {
	case <-timer.C:
		return true
	case <-tx.cancelled:
		return false
	case <-ctx.Done():
		return false
	}
}

func (t *Terminal) progress(tx *txn, stage instore.Progress) {
	t.update(func() {
		if t.tx == tx && tx.cancel == "" {
			t.txScreen = stageScreen(tx, stage)
			t.screenGen++
		}
	})
	t.send(t.envelope(protocol.TypeProgress, "", tx.ref, protocol.Progress{Stage: stage}))
}

// finish decides the final status, a cancel taking precedence over the
// planned one, stores the result and sends it.
func (t *Terminal) finish(tx *txn) {
	var (
		r      *stored
		s      *session
		status instore.TransactionStatus
	)
	mine := false
	t.update(func() {
		if t.tx != tx {
			return // finished already (a cancel)
		}
		mine = true
		t.tx = nil
		status = tx.status
		switch tx.cancel {
		case "":
			if tx.mode == modeSilent { // gave up waiting for a cancel
				status = instore.StatusTechnicalError
			}
		case instore.CancelByECR:
			status = instore.StatusAbortedByCashier
		case instore.CancelAckTimeout:
			if !tx.acked { // dropped: the gateway never saw it start
				t.txScreen = ""
				return
			}
			status = instore.StatusTechnicalError
		default: // DEADLINE, or a reason this version does not know
			status = instore.StatusTechnicalError
		}
		r = t.storeLocked(tx, status)
		status = r.status
		t.showOutcomeLocked(status)
		s = t.sess
	})
	if !mine {
		return
	}
	if r == nil {
		t.log.Info("sim: transaction dropped", "ref", tx.ref, "reason", tx.cancel)
		return
	}
	t.log.Info("sim: reporting", "ref", tx.ref, "statusId", status)
	t.sendOn(s, r.env)
}

// storeLocked builds the result of tx and keeps it until confirmed.
func (t *Terminal) storeLocked(tx *txn, status instore.TransactionStatus) *stored {
	status, offline := t.offlineLocked(tx, status) // the card network's say (offline.go)
	res := buildResult(tx, status, t.terminalID, time.Now())
	res.Offline = offline
	t.recordLocked(tx, status, res.TipAmount, offline)
	r := &stored{ref: tx.ref, env: t.envelope(protocol.TypeResult, "", tx.ref, res), status: status}
	t.results = append(t.results, r)
	return r
}

// resultLocked returns the latest result for ref, or nil.
func (t *Terminal) resultLocked(ref string) *stored {
	for i := len(t.results) - 1; i >= 0; i-- {
		if t.results[i].ref == ref {
			return t.results[i]
		}
	}
	return nil
}

// showOutcomeLocked puts the outcome on the screen for resultHold.
func (t *Terminal) showOutcomeLocked(status instore.TransactionStatus) {
	t.showLocked(outcomeText(status))
}

func (t *Terminal) showLocked(screen string) {
	t.txScreen = screen
	t.screenGen++
	gen := t.screenGen
	time.AfterFunc(resultHold, func() {
		t.update(func() {
			if t.screenGen == gen && t.tx == nil {
				t.txScreen = ""
			}
		})
	})
}

// confirm forgets the result the gateway confirmed (keeping the last few).
func (t *Terminal) confirm(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.results {
		if r.env.ID == id {
			r.confirmed = true
		}
	}
	confirmed := 0
	for _, r := range t.results {
		if r.confirmed {
			confirmed++
		}
	}
	kept := t.results[:0]
	for _, r := range t.results {
		if r.confirmed && confirmed > keepConfirmed {
			confirmed--
			continue
		}
		kept = append(kept, r)
	}
	clear(t.results[len(kept):])
	t.results = kept
}

// cancel handles a cancel: the transaction in progress stops and finish
// reports per the reason; a transaction that already has a result keeps
// it, and the result is resent. Either way, and for a ref it does not
// know, the terminal confirms the cancel, so that the gateway stops
// sending it after every reconnect.
func (t *Terminal) cancel(s *session, env protocol.Envelope) {
	var d protocol.Cancel
	_ = json.Unmarshal(env.Data, &d)
	reason := d.Reason
	if reason == "" {
		reason = "UNSPECIFIED"
	}
	defer t.confirmOn(s, env)
	t.mu.Lock()
	if tx := t.tx; tx != nil && tx.ref == env.Ref {
		if tx.cancel == "" {
			tx.cancel = reason
			close(tx.cancelled)
		}
		t.mu.Unlock()
		t.log.Info("sim: cancelled", "ref", env.Ref, "reason", reason)
		// Stopped at once, before the next message is read: a command
		// the gateway sends right after the cancel (it sends the cancels
		// of the transactions it ended first) finds the terminal free,
		// not TERMINAL_IS_BUSY. The transaction's goroutine finds it
		// finished.
		t.finish(tx)
		return
	}
	r := t.resultLocked(env.Ref)
	if r == nil && !slices.Contains(t.cancelledUnknown, env.Ref) {
		// Remembered: its command, if it comes after all, is dropped.
		t.cancelledUnknown = append(t.cancelledUnknown, env.Ref)
		if n := len(t.cancelledUnknown); n > keepConfirmed {
			t.cancelledUnknown = slices.Delete(t.cancelledUnknown, 0, n-keepConfirmed)
		}
	}
	t.mu.Unlock()
	if r != nil && !r.confirmed {
		t.log.Info("sim: cancel after the result; resending it", "ref", env.Ref, "reason", reason)
		t.sendOn(s, r.env)
		return
	}
	t.log.Debug("sim: nothing to cancel", "ref", env.Ref, "reason", reason)
}

// reversal reverses an approved transaction at once, with no card
// interaction. The ECR's reversal (reason ECR) is a transaction of its
// own: acknowledged and answered with a result, once per ref. A late
// approval's or an unconfirmed sale's (reasons LATE_APPROVAL and
// CONFIRM_TIMEOUT: the service reverses on its own) is confirmed, and
// reported on no further.
func (t *Terminal) reversal(s *session, env protocol.Envelope) {
	if env.Ref == "" {
		t.log.Warn("sim: ignoring a reversal without a reference")
		return
	}
	var d protocol.Reversal
	_ = json.Unmarshal(env.Data, &d)
	var r *stored
	t.update(func() {
		if d.Reason == instore.ReversalByECR {
			if r = t.resultLocked(env.Ref); r == nil { // not a repeat
				r = t.storeLocked(&txn{ref: env.Ref, kind: protocol.TypeReversal, pay: protocol.Payment{OriginalRef: d.OriginalRef}}, instore.StatusApproved)
			}
		} else {
			t.reversedLocked(env.Ref)
		}
		if t.tx == nil {
			t.showLocked("REVERSED")
		}
	})
	t.log.Info("sim: reversed", "ref", env.Ref, "reason", d.Reason)
	if r == nil {
		t.confirmOn(s, env)
		return
	}
	t.sendOn(s, t.envelope(protocol.TypeAck, env.ID, env.Ref, nil))
	t.sendOn(s, r.env)
}

// print prints a job and reports its print status: the sandbox's next
// print outcome if one is set (TIMEOUT: no answer at all), ERROR on the
// PIN pad (no printer), BUSY during a transaction, SUCCESS otherwise. It
// confirms the job first. A printId it answered already (the gateway sends
// a job again after a reconnect until it has its result) is not printed
// twice: its status is reported again.
func (t *Terminal) print(s *session, env protocol.Envelope) {
	var d protocol.Print
	if err := json.Unmarshal(env.Data, &d); err != nil || env.Ref == "" {
		t.log.Warn("sim: ignoring a malformed print message")
		return
	}
	status := instore.PrintSuccess
	repeat := false
	t.update(func() {
		if st, ok := t.printed[env.Ref]; ok {
			status, repeat = st, true
			return
		}
		switch {
		case t.nextPrint != nil:
			status, t.nextPrint = *t.nextPrint, nil
		case !instore.ModelHasPrinter(t.cfg.Model):
			status = instore.PrintError
		case t.tx != nil:
			status = instore.PrintBusy
		}
		if status == instore.PrintTimeout {
			return
		}
		if t.printed == nil {
			t.printed = map[string]instore.PrintStatus{}
		}
		if len(t.printedOrder) >= keepPrinted {
			delete(t.printed, t.printedOrder[0])
			t.printedOrder = t.printedOrder[1:]
		}
		t.printed[env.Ref] = status
		t.printedOrder = append(t.printedOrder, env.Ref)
		if t.tx == nil && status == instore.PrintSuccess {
			t.showLocked("Printing")
		}
	})
	if status == instore.PrintTimeout {
		t.log.Info("sim: print never answered", "printId", env.Ref)
		return
	}
	if repeat {
		t.log.Info("sim: print already answered; reporting it again", "printId", env.Ref)
	}
	t.confirmOn(s, env)
	t.sendOn(s, t.envelope(protocol.TypePrintResult, "", env.Ref, protocol.PrintResult{StatusID: status}))
}

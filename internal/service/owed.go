package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

// effectIDPrefix starts every effect id, and so the message id of every
// message sent for an effect.
const effectIDPrefix = "eff_"

// newEffect returns a new effect of kind for ref, owed to serial.
func (s *Service) newEffect(kind instore.EffectKind, serial, ref, reason string) *instore.Effect {
	now := s.now()
	return &instore.Effect{ID: s.newID(effectIDPrefix, now), Kind: kind, SerialNumber: serial, Ref: ref, Reason: reason, CreatedAt: now}
}

func (s *Service) effectTTL() time.Duration {
	if s.EffectTTL > 0 {
		return s.EffectTTL
	}
	return instore.DefaultEffectTTL
}

// deliver sends an effect to its device; lines are a print's. A device
// offline now, or whose session broke on the write (the gateway then
// closes it: ErrOffline too), gets it after its next hello. Any other error
// is a message the gateway refuses, logged. It returns the error of the
// send.
func (s *Service) deliver(ctx context.Context, e *instore.Effect, lines []string) error {
	var err error
	switch e.Kind {
	case instore.EffectCancel:
		err = s.Gateway.SendCancel(ctx, e.SerialNumber, e.ID, e.Ref, e.Reason)
	case instore.EffectReversal:
		err = s.Gateway.SendReversal(ctx, e.SerialNumber, e.ID, e.Ref, e.Reason)
	case instore.EffectPrint:
		err = s.Gateway.SendPrint(ctx, e.SerialNumber, e.ID, e.Ref, lines)
	default:
		err = fmt.Errorf("unknown effect kind %q", e.Kind)
	}
	if err == nil && mutant.On(mutant.EffectEndedOnSend) {
		_ = s.Store.EndEffect(ctx, e.ID, e.SerialNumber, instore.EffectConfirmed, s.now())
	}
	if err != nil && !errors.Is(err, instore.ErrOffline) {
		s.log().Warn("send owed message", "kind", e.Kind, "ref", e.Ref, "serialNumber", e.SerialNumber, "error", err)
	}
	return err
}

// endOwed marks the open effects of kind for ref done as moot: what they
// asked for no longer matters. A failure only means they are sent again
// after the next hello, which the device answers without effect.
func (s *Service) endOwed(ctx context.Context, ref string, kind instore.EffectKind) {
	if _, err := s.Store.EndEffectsOf(ctx, ref, kind, instore.EffectMoot, s.now()); err != nil {
		s.log().Warn("end owed messages", "kind", kind, "ref", ref, "error", err)
	}
}

// The order of what a device is sent: a command goes after every cancel
// the device is owed for its other transactions, on the same session. A
// transaction the service ended without the terminal's result (WP25,
// WP23, WP36) may still run on the terminal until its cancel arrives; a
// command that overtook the cancel would be answered TERMINAL_IS_BUSY by
// a terminal the service counts idle. The cancel of such a transaction is
// committed with its end, before any new transaction of the terminal can
// be created; so reading the device's open effects after the command's
// transaction is known (created, or read as PENDING) always finds it.
// Each path that sends a command applies the rule: start (the command's
// first send) through cancelsBefore, sendOwed (a hello, a wake-up of
// another node) through splitOwed. The terminal handles messages in order
// (docs/terminal-protocol.md, section 6).

// cancelsBefore sends serial the cancels it is owed for transactions
// other than ref, before the command of ref goes (the rule above). A
// failure to read them is returned: the command must not go then (its
// caller ends it as not sent), since it might overtake a cancel.
func (s *Service) cancelsBefore(ctx context.Context, serial, ref string) error {
	es, err := s.Store.OpenEffects(ctx, serial)
	if err != nil {
		s.log().Error("owed cancels before a command", "ref", ref, "error", err)
		return err
	}
	es = slices.DeleteFunc(es, func(e *instore.Effect) bool { return e.Kind != instore.EffectCancel || e.Ref == ref })
	s.resendOwed(ctx, serial, es)
	return nil
}

// unacknowledged returns the terminal's PENDING transaction when its
// device has not acknowledged it (nil otherwise): its command may have
// been lost with the previous session, and is sent again. A terminal
// acknowledges a command whose ref it knows again and never starts it
// twice (docs/terminal-protocol.md, section 6); the ack timeout still
// ends one that stays unacknowledged.
func (s *Service) unacknowledged(ctx context.Context, term *instore.Terminal, rows *terminalRows) *instore.Transaction {
	var t *instore.Transaction
	var err error
	if rows != nil { // a hello read it
		if t = rows.active; t == nil {
			err = instore.ErrNotFound
		}
	} else {
		t, err = s.Store.ActiveTransaction(ctx, term.TerminalID)
	}
	if errors.Is(err, instore.ErrNotFound) {
		return nil
	} else if err != nil {
		s.log().Error("resend command: active transaction", "terminalId", term.TerminalID, "error", err)
		return nil
	}
	if t.Acknowledged() || t.SerialNumber != term.SerialNumber {
		return nil
	}
	return t
}

// splitOwed splits effects into those of the transaction ref and the others.
func splitOwed(es []*instore.Effect, ref string) (of, others []*instore.Effect) {
	for _, e := range es {
		if ref != "" && e.Ref == ref {
			of = append(of, e)
		} else {
			others = append(others, e)
		}
	}
	return of, others
}

// resendOwed sends a device the effects es still owed to it (its open
// effects, oldest first), each with its own id. One that became moot
// without being marked (a failure after its transaction's result or its
// print job's end) is marked now instead; one past EffectTTL is left to
// the sweep. It reports false when the session went away (the next hello
// sends the rest).
func (s *Service) resendOwed(ctx context.Context, serial string, es []*instore.Effect) bool {
	now := s.now()
	for _, e := range es {
		if now.Sub(e.CreatedAt) > s.effectTTL() {
			continue
		}
		var lines []string
		moot := false
		switch e.Kind {
		case instore.EffectCancel:
			// A cancel whose transaction cannot be read goes all the same:
			// left out, a command sent after it could overtake it, and a
			// moot cancel is harmless (the terminal ignores a ref it does
			// not run, or sends its result again).
			t, err := s.Store.Transaction(ctx, e.Ref)
			if err != nil {
				s.log().Error("resend owed messages: transaction", "ref", e.Ref, "error", err)
			}
			moot = err == nil && t.ResultMessageID != ""
		case instore.EffectPrint:
			j, err := s.Store.PrintJob(ctx, e.Ref)
			if err != nil {
				s.log().Error("resend owed messages: print job", "printId", e.Ref, "error", err)
				continue
			}
			if j.StatusID == nil && !now.Before(lifecycle.PrintDue(j, s.printTimeout())) {
				continue // ending TIMEOUT now (its timer, or the sweep)
			}
			moot, lines = j.StatusID != nil, j.Lines
		}
		if moot {
			s.endOwed(ctx, e.Ref, e.Kind)
			continue
		}
		s.log().Info("owed message sent again", "kind", e.Kind, "ref", e.Ref, "reason", e.Reason, "serialNumber", serial)
		if err := s.deliver(ctx, e, lines); err != nil {
			return false
		}
	}
	return true
}

// TerminalConfirmed records a device's confirm of a server message: an
// effect it confirms is done and not sent again. A confirm of any other
// message, of an effect done already or of another device's is ignored.
func (s *Service) TerminalConfirmed(ctx context.Context, serial, messageID string) error {
	if !strings.HasPrefix(messageID, effectIDPrefix) {
		return nil // a message nothing is owed for (linked, a command...)
	}
	err := s.Store.EndEffect(ctx, messageID, serial, instore.EffectConfirmed, s.now())
	if ok, err := found(err, "end effect"); !ok {
		return err
	}
	s.log().Debug("owed message confirmed", "effectId", messageID, "serialNumber", serial)
	return nil
}

// Sweep ends what a lost timer, a failed write or another node left
// behind: every PENDING transaction past its ack time (unacknowledged) or
// deadline ends as its timer would have ended it, every print job past its
// print timeout ends TIMEOUT, and every effect owed longer than EffectTTL
// is dropped (a reversal never), each with a log line. RunSweep runs it
// periodically; Recover does the print jobs' part at start.
func (s *Service) Sweep(ctx context.Context) {
	now := s.now()
	// PENDING transactions past their ack time or deadline: a timer lost,
	// or an expiry whose write failed.
	pending, err := s.Store.PendingTransactions(ctx)
	if s.sweepFailed(ctx, "sweep: pending transactions", err) {
		return
	}
	// Each as its timer would (lifecycle.Due).
	overdue := func(ts []*instore.Transaction) {
		for _, t := range ts {
			if at, kind, ok := lifecycle.Due(*t, s.rules()); ok && !now.Before(at) {
				s.expire(t.ID, kind)
			}
		}
	}
	overdue(pending)
	// Unconfirmed sales past their confirmation deadline: a timer lost
	// (armed on a node that died), or a reversal whose write failed.
	unconfirmed, err := s.Store.UnconfirmedTransactions(ctx, now)
	if s.sweepFailed(ctx, "sweep: unconfirmed transactions", err) {
		return
	}
	if !mutant.On(mutant.UnconfirmedNotRecovered) {
		overdue(unconfirmed)
	}
	if !mutant.On(mutant.ExpiryNotRecovered) {
		s.sweepPreAuths(ctx)
	}
	s.sweepBatches(ctx)
	jobs, err := s.Store.RunningPrintJobs(ctx)
	if s.sweepFailed(ctx, "sweep: running print jobs", err) {
		return
	}
	for _, j := range jobs {
		if !now.Before(lifecycle.PrintDue(j, s.printTimeout())) {
			s.completePrint(ctx, j.ID, lifecycle.PrintEvent{Kind: lifecycle.PrintTimedOut})
		}
	}
	dropped, err := s.Store.ExpireEffects(ctx, now.Add(-s.effectTTL()), now)
	if s.sweepFailed(ctx, "sweep: expire owed messages", err) {
		return
	}
	for _, e := range dropped {
		s.log().Warn("owed message dropped: not confirmed within its bound", "kind", e.Kind, "ref", e.Ref, "reason", e.Reason,
			"serialNumber", e.SerialNumber, "effectId", e.ID, "createdAt", e.CreatedAt, "bound", s.effectTTL().String())
	}
}

// sweepFailed says whether a sweep's read failed (err is not nil), and
// logs the failure as what unless ctx ended: a sweep cut short by a
// shutdown is no failure.
func (s *Service) sweepFailed(ctx context.Context, what string, err error) bool {
	if err != nil && ctx.Err() == nil {
		s.log().Error(what, "error", err)
	}
	return err != nil
}

// RunSweep runs Sweep every interval (DefaultSweep when 0) until ctx ends.
func (s *Service) RunSweep(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = instore.DefaultSweep
	}
	Every(ctx, s.clock(), interval, func() { s.Sweep(ctx) })
}

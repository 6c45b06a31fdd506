package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// rules are the Rules of this Service for Next, made once (the settings
// do not change once the Service runs).
func (s *Service) rules() lifecycle.Rules {
	s.rulesOnce.Do(func() { s.rulesV = s.makeRules() })
	return s.rulesV
}

func (s *Service) makeRules() lifecycle.Rules {
	return lifecycle.Rules{
		AckTimeout: s.ackTimeout(),
		Deadline:   s.deadline(),
		ErrorID:    s.errorID,
		Status: func(id int) string {
			if c, ok := s.Metadata.TransactionStatus(id); ok {
				return c.Code
			}
			return fmt.Sprint(id)
		},
	}
}

// apply runs the state machine (Next) for one event of the transaction
// ref and carries out what it decides: the new state, its timeline event
// and the effects it owes (a cancel, a reversal, a receipt's print job)
// are written in one database transaction (compare-and-set, retried from
// a fresh read when another writer moved it); after the commit, the
// effects are sent, the timer armed and moot cancels ended. known is a
// state of the transaction just read (nil: read it). A progress stage is
// written without waiting for the disk (UpdateProgress): losing it in a
// crash loses nothing the terminal will not report again.
func (s *Service) apply(ctx context.Context, ref string, known *instore.Transaction, e lifecycle.Event) (*instore.Transaction, lifecycle.Step, error) {
	var o owed
	var step lifecycle.Step
	update := s.write(&o)
	if e.Kind == instore.EventProgress {
		update = s.Store.UpdateProgress
	}
	t, err := s.finishWith(ctx, ref, known, update, func(t *instore.Transaction) bool {
		o.reset()
		next, st := lifecycle.Next(*t, e, s.rules())
		step = st
		if !st.Changed {
			return false
		}
		*t = next
		if st.Cancel != "" {
			o.effects = append(o.effects, s.newEffect(instore.EffectCancel, t.SerialNumber, t.ID, st.Cancel))
		}
		if st.Reverse != "" {
			o.effects = append(o.effects, s.newEffect(instore.EffectReversal, t.SerialNumber, t.ID, st.Reverse))
		}
		if st.Print != nil {
			job, pe := s.receiptJob(t, t.SerialNumber, st.Print)
			o.job, o.effects = job, append(o.effects, pe)
		}
		return true
	})
	if err != nil {
		return nil, step, err
	}
	if step.Refused != nil {
		return t, step, step.Refused
	}
	s.carryOut(ctx, t, step, &o)
	return t, step, nil
}

// carryOut does, after the commit of a step, what it owes: moot cancels
// ended, the timer armed, the effects sent (a device offline gets them
// after its next hello: the root's effect.go) and the receipt's print job started.
func (s *Service) carryOut(ctx context.Context, t *instore.Transaction, st lifecycle.Step, o *owed) {
	bg := context.WithoutCancel(ctx)
	if st.EndCancels {
		s.endOwed(bg, t.ID, instore.EffectCancel)
	}
	switch {
	case st.Arm != nil && st.ArmKind == lifecycle.EventConfirmDeadline:
		s.arm(t.ID, *st.Arm, s.confirmExpired)
	case st.Arm != nil && !t.Final():
		s.arm(t.ID, *st.Arm, s.deadlineExpired)
	}
	if !st.Changed {
		return
	}
	switch {
	case st.Event.Kind == instore.EventAckTimeout || st.Event.Kind == instore.EventDeadline:
		s.log().Info("transaction expired", "ref", t.ID, "event", st.Event.Kind)
	case st.Reverse == instore.ReversalConfirmTimeout:
		s.log().Warn("unconfirmed sale reversed", "ref", t.ID)
	case st.Reverse != "":
		s.log().Warn("late approval reversed", "ref", t.ID)
		s.lateApprovalReversed(t)
	}
	for _, e := range o.effects {
		switch e.Kind {
		case instore.EffectPrint:
			// After the result's confirm, mostly: the gateway confirms once
			// the result's apply returns.
			go s.startPrint(bg, o.job, e)
		default:
			s.deliver(bg, e, nil)
		}
	}
}

// applyReversal records an approved REVERSAL and turns its original
// REVERSED, both in one database transaction (NextReversalPair). A
// REVERSAL the service had already ended (WP25, WP36) keeps its final
// status and gets the result; the original is reversed all the same,
// since the terminal did reverse it.
func (s *Service) applyReversal(ctx context.Context, rev *instore.Transaction, e lifecycle.Event) error {
	for {
		rv, err := s.Store.Transaction(ctx, rev.ID)
		if err != nil {
			return fmt.Errorf("transaction: %w", err)
		}
		orig, err := s.Store.Transaction(ctx, rv.OriginalID)
		if err != nil {
			return fmt.Errorf("original: %w", err)
		}
		nrv, norig, st, ok := lifecycle.NextReversalPair(*rv, *orig, e, s.rules())
		if !ok {
			return nil
		}
		s.stamp(&nrv)
		s.stamp(&norig)
		err = s.Store.UpdateTransactionPair(ctx, &nrv, rv.Version, &norig, orig.Version)
		if errors.Is(err, instore.ErrConflict) {
			continue
		} else if err != nil {
			return fmt.Errorf("apply reversal: %w", err)
		}
		s.disarm(nrv.ID)
		if st.EndCancels {
			s.endOwed(ctx, nrv.ID, instore.EffectCancel)
		}
		s.eventsWritten()
		nrv.Events, norig.Events = nil, nil
		rvDone, origDone := nrv, norig
		s.running.put(&rvDone)
		s.running.put(&origDone)
		s.changes.publish(rvDone.ID)
		s.changes.publish(origDone.ID)
		if !rv.Final() {
			s.ended(&rvDone)
		}
		return nil
	}
}

// finishWith applies change to the stored transaction with compare-and-set,
// writing with update (write(&o) for a change with effects, UpdateProgress
// for a progress stage), re-reading and retrying when another writer
// moved it; change returns false to leave it as it is. known is a state of
// the transaction the caller just read (nil: read it), which it does not
// keep: change is applied to a copy. It publishes the change. Only apply
// (apply.go) calls it: every change of a transaction is a step of Next.
func (s *Service) finishWith(ctx context.Context, ref string, known *instore.Transaction, update func(context.Context, *instore.Transaction, int64) error, change func(*instore.Transaction) bool) (*instore.Transaction, error) {
	for {
		var t *instore.Transaction
		if known != nil {
			cp := *known
			t, known = &cp, nil
		} else {
			var err error
			if t, err = s.Store.Transaction(ctx, ref); err != nil {
				return nil, fmt.Errorf("transaction: %w", err)
			}
		}
		from, wasFinal := t.Version, t.Final()
		if !change(t) {
			return t, nil
		}
		s.stamp(t)
		err := update(ctx, t, from)
		if errors.Is(err, instore.ErrConflict) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("update transaction: %w", err)
		}
		if len(t.Events) > 0 {
			s.eventsWritten()
		}
		t.Events = nil // written
		if t.Final() {
			s.disarm(ref)
			// Access API: an update waiting for the terminal to be idle goes now.
			s.terminalIdle(t.TerminalID)
		}
		published := *t
		s.running.put(&published)
		s.changes.publishState(ref, &published)
		if !wasFinal && t.Final() {
			s.ended(&published)
		}
		return t, nil
	}
}

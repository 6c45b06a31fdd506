package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
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
		AckTimeout:      s.ackTimeout(),
		Deadline:        s.deadline(),
		PreAuthValidity: s.preAuthValidity(),
		ErrorID:         s.errorID,
		Status: func(id instore.TransactionStatus) string {
			if c, ok := s.Metadata.TransactionStatus(id); ok {
				return c.Code
			}
			return fmt.Sprint(id)
		},
	}
}

// apply runs the state machine for one event of the transaction ref and
// carries out what it decides. It is the one commit path of a
// transaction's change: decide computes the change (instore.Change: the
// new state, its timeline entry, the effects it owes, a receipt's print
// job; for an approved REVERSAL, its original turned REVERSED too), the
// store commits it in one database transaction (compare-and-set, retried
// from a fresh read when another writer moved it), and after the commit
// committed publishes it (the terminal made idle for a waiting update) and
// carryOut sends the effects, arms the timer and ends moot cancels. known
// is a state of the transaction just read (nil: read it), which apply does
// not keep. A progress stage is written without waiting for the disk
// (Change.Relaxed): losing it in a crash loses nothing the terminal will
// not report again.
func (s *Service) apply(ctx context.Context, ref string, known *instore.Transaction, e lifecycle.Event) (*instore.Transaction, lifecycle.Step, error) {
	for {
		var t *instore.Transaction
		if known != nil {
			cp := *known
			t, known = &cp, nil
		} else {
			var err error
			if t, err = s.Store.Transaction(ctx, ref); err != nil {
				return nil, lifecycle.Step{}, fmt.Errorf("transaction: %w", err)
			}
		}
		ch, step, err := s.decide(ctx, t, e)
		if err != nil {
			return nil, step, err
		}
		if step.Refused != nil {
			return t, step, step.Refused
		}
		if ch == nil {
			s.carryOut(ctx, t, step, nil)
			return t, step, nil
		}
		s.stamp(ch)
		err = s.Store.Commit(ctx, ch)
		if errors.Is(err, instore.ErrConflict) {
			continue
		} else if err != nil {
			return nil, step, fmt.Errorf("update transaction: %w", err)
		}
		s.committed(ch, step)
		s.carryOut(ctx, ch.T, step, ch)
		return ch.T, step, nil
	}
}

// carryOut does, after the commit of a step, what it owes: moot cancels
// ended, the timer armed, the effects of ch (nil: nothing was written)
// sent (a device offline gets them after its next hello: the root's
// effect.go) and the receipt's print job started.
func (s *Service) carryOut(ctx context.Context, t *instore.Transaction, st lifecycle.Step, ch *instore.Change) {
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
	if ch == nil {
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
	for _, e := range ch.Effects {
		switch e.Kind {
		case instore.EffectPrint:
			// After the result's confirm, mostly: the gateway confirms once
			// the result's apply returns.
			s.spawn(func() { s.startPrint(bg, ch.Job, e) })
		default:
			s.deliver(bg, e, nil)
		}
	}
}

// decide runs the state machine for e on t (a copy apply owns) and
// returns the change to commit (nil: nothing changes). When e moves t's
// original too (lifecycle.Pairs: an approved REVERSAL reverses it, an
// approved INCREMENT, CAPTURE or VOID moves its pre-auth's
// authorisation), the machine decides the pair (lifecycle.NextPair) from
// the original as last committed, and both go in one change.
func (s *Service) decide(ctx context.Context, t *instore.Transaction, e lifecycle.Event) (*instore.Change, lifecycle.Step, error) {
	var (
		next instore.Transaction
		st   lifecycle.Step
		pair *instore.Change
	)
	if lifecycle.Pairs(*t, e) {
		orig, err := s.Store.Transaction(ctx, t.OriginalID)
		if err != nil {
			return nil, lifecycle.Step{}, fmt.Errorf("original: %w", err)
		}
		var norig instore.Transaction
		var paired bool
		next, norig, st, paired = lifecycle.NextPair(*t, *orig, e, s.rules())
		if paired {
			pair = &instore.Change{T: &norig, From: orig.Version, Events: []instore.TransactionEvent{*st.PairEvent}}
		}
	} else {
		if e.Kind == instore.EventForwarded && mutant.On(mutant.ForwardAppliedTwice) && t.Forwarding != nil {
			t.Forwarding = &instore.Forwarding{State: instore.ForwardQueued} // the once-check skipped
		}
		next, st = lifecycle.Next(*t, e, s.rules())
	}
	if !st.Changed {
		return nil, st, nil
	}
	mutate(&next, &st, e)
	ch := &instore.Change{T: &next, From: t.Version, Events: []instore.TransactionEvent{*st.Event},
		Relaxed: e.Kind == instore.EventProgress, Pair: pair}
	if st.Cancel != "" {
		ch.Effects = append(ch.Effects, s.newEffect(instore.EffectCancel, next.SerialNumber, next.ID, st.Cancel))
	}
	if st.Reverse != "" {
		ch.Effects = append(ch.Effects, s.newEffect(instore.EffectReversal, next.SerialNumber, next.ID, st.Reverse))
	}
	if st.Print != nil {
		job, pe := s.receiptJob(&next, next.SerialNumber, st.Print)
		ch.Job, ch.Effects = job, append(ch.Effects, pe)
	}
	return ch, st, nil
}

// committed publishes a committed change of every transaction it wrote:
// the sequencer is poked for its events; a final transaction is disarmed
// and its terminal made idle (an update waiting for it is delivered now);
// the new state goes to the running set and the watchers; a transaction
// that reached its final status with the change (st.Ended, of ch.T only:
// a pair's original was final already) is reported ended once.
func (s *Service) committed(ch *instore.Change, st lifecycle.Step) {
	if len(ch.Events) > 0 || ch.Pair != nil && len(ch.Pair.Events) > 0 {
		s.eventsWritten()
	}
	for _, t := range ch.Transactions() {
		if t.Final() {
			s.disarm(t.ID)
			// Access API: an update waiting for the terminal to be idle goes now.
			s.terminalIdle(t.TerminalID)
			// An OPEN pre-auth's expiry (approved now, or still OPEN).
			s.armExpiry(t)
			// A sale still awaiting its confirmation keeps its window's
			// timer through a change that does not end it (a forwarded
			// report on an offline approval).
			if at, kind, ok := lifecycle.Due(*t, s.rules()); ok {
				s.arm(t.ID, at, s.timerOf(kind))
			}
		}
		published := *t
		s.running.put(&published)
		s.changes.publishState(t.ID, &published)
		if st.Ended && t == ch.T {
			s.ended(&published)
		}
	}
}

// mutate switches on, in a step the lifecycle decided, the mutant of the
// deterministic simulation's TestMutants that concerns it
// (internal/mutant); with none on, it changes nothing.
func mutate(next *instore.Transaction, st *lifecycle.Step, e lifecycle.Event) {
	switch {
	case e.Kind == instore.EventAcknowledged && mutant.On(mutant.NoDeadlineAfterAck):
		next.DeadlineAt, st.Arm = nil, nil
	case st.Reverse == instore.ReversalLateApproval && mutant.On(mutant.LateApprovalNotReversed):
		st.Reverse = ""
	}
}

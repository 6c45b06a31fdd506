package service

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

// arm runs fn(ref) at a time (or at once if it passed), replacing any
// timer the transaction had.
func (s *Service) arm(ref string, at time.Time, fn func(ref string)) {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	if s.closed {
		return
	}
	if s.timers == nil {
		s.timers = map[string]instore.Timer{}
	}
	if old := s.timers[ref]; old != nil {
		old.Stop()
	}
	s.timers[ref] = s.clock().AfterFunc(at.Sub(s.Now()), func() { fn(ref) })
}

func (s *Service) disarm(ref string) {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	if t := s.timers[ref]; t != nil {
		t.Stop()
		delete(s.timers, ref)
	}
}

// ackExpired ends a transaction that was not acknowledged in time: it is
// stored TECHNICAL_ERROR with WP25 and the terminal is told to drop it.
func (s *Service) ackExpired(ref string) { s.expire(ref, instore.EventAckTimeout) }

// deadlineExpired ends an acknowledged transaction that got no result in
// time: TECHNICAL_ERROR with WP36, and the terminal is told to abort.
func (s *Service) deadlineExpired(ref string) { s.expire(ref, instore.EventDeadline) }

// confirmExpired reverses an APPROVED sale the ECR did not confirm within
// its window (confirmWithinSeconds): REVERSED, and a reversal
// CONFIRM_TIMEOUT owed to its terminal.
func (s *Service) confirmExpired(ref string) { s.expire(ref, lifecycle.EventConfirmDeadline) }

// timerOf is the function of the timer that fires the event kind
// (lifecycle.Due's).
func (s *Service) timerOf(kind instore.TimelineKind) func(ref string) {
	return func(ref string) { s.expire(ref, kind) }
}

// expire applies a timer's event (EventAckTimeout, EventDeadline) to a
// transaction: a PENDING one ends TECHNICAL_ERROR and its terminal is
// told why, the cancel stored with the change (the root's effect.go); a failure is
// logged and the sweep tries again (Sweep, overdue transactions).
func (s *Service) expire(ref string, kind instore.TimelineKind) {
	if _, _, err := s.apply(context.Background(), ref, nil, lifecycle.Event{Kind: kind, At: s.now()}); err != nil && !s.isClosed() {
		// At shutdown the store may be gone already.
		s.log().Error("expire transaction", "ref", ref, "event", kind, "error", err)
	}
}

// Recover re-arms the time-outs the store implies after a start: an
// unacknowledged PENDING transaction expires at its ack time (at once if
// it passed), an acknowledged one at its deadline, an unconfirmed sale is
// reversed at its confirmation deadline, an OPEN pre-auth is voided at its
// expiry, a running print job times out at its print timeout. What the service owes terminals needs no re-arming:
// each device is sent it after its next hello.
func (s *Service) Recover(ctx context.Context) error {
	ts, err := s.Store.PendingTransactions(ctx)
	if err != nil {
		return fmt.Errorf("pending transactions: %w", err)
	}
	unconfirmed, err := s.Store.UnconfirmedTransactions(ctx, time.Time{})
	if err != nil {
		return fmt.Errorf("unconfirmed transactions: %w", err)
	}
	if mutant.On(mutant.UnconfirmedNotRecovered) {
		unconfirmed = nil
	}
	for _, t := range append(ts, unconfirmed...) {
		if at, kind, ok := lifecycle.Due(*t, s.rules()); ok {
			s.arm(t.ID, at, s.timerOf(kind))
		}
	}
	if err := s.recoverPreAuths(ctx); err != nil {
		return err
	}
	jobs, err := s.Store.RunningPrintJobs(ctx)
	if err != nil {
		return fmt.Errorf("running print jobs: %w", err)
	}
	for _, j := range jobs {
		s.arm(j.ID, lifecycle.PrintDue(j, s.printTimeout()), s.printExpired)
	}
	return s.recoverBatches(ctx)
}

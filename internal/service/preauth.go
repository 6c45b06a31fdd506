package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

// Pre-authorisation (the root's preauth.go): a PRE_AUTH is created like a
// purchase; an INCREMENT, CAPTURE or VOID of it runs on its terminal
// without a card, decided by instore.CheckOnPreAuth inside the database
// transaction that locks it (Store.CreateOnOriginal), and its approval
// moves the pre-auth's authorisation in the same write (decide,
// lifecycle.NextPair). An OPEN pre-auth past its expiresAt is voided
// by the service (preAuthExpired), a durable timer: armed when it opens,
// re-armed at start (Recover), retried by the sweep.

// Preauthorize creates a PRE_AUTH on a terminal, as Purchase creates a
// purchase (the same errors, in the same order).
func (s *Service) Preauthorize(ctx context.Context, p *instore.Principal, req *instore.PreAuthRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	return relinked(func() (*instore.Transaction, error) {
		return s.sale(ctx, p, req, &req.PurchaseRequest, instore.TypePreAuth, claim)
	})
}

// PreAuthOp creates an INCREMENT, CAPTURE or VOID (req.Op) of the
// merchant's pre-auth req.OnlineAPIRefID on its terminal, and answers once
// the terminal acknowledged it, like Purchase. Errors, in order:
// validation, WP03, WP04, conflict (not an OPEN pre-auth, a capture or
// void of it in flight, or a void of it whose outcome is unknown),
// validation (a capture past the tolerance, an increment past
// instore.MaxAuthorizedAmount), WP16, WP01, WP30, WP23, WP09.
func (s *Service) PreAuthOp(ctx context.Context, p *instore.Principal, req *instore.PreAuthOpRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	pre, resumed, done, err := s.admitOn(ctx, p, req, claim, req.OnlineAPIRefID)
	if done {
		return resumed, err
	}
	t := &instore.Transaction{Type: req.Op, ECRReference: req.ECRReference}
	switch req.Op {
	case instore.TypeIncrement:
		t.Amount = *req.Amount
	case instore.TypeCapture:
		t.Amount = *req.Amount
		if req.TipAmount != nil {
			// amount is the total: the tip shows apart (totalAmount = amount + tipAmount).
			t.Amount, t.TipAmount = *req.Amount-*req.TipAmount, *req.TipAmount
		}
	case instore.TypeVoid:
		if pre.Authorization != nil {
			t.Amount = pre.Authorization.AuthorizedAmount
		}
	default:
		return nil, fmt.Errorf("pre-auth operation %q", req.Op)
	}
	return relinked(func() (*instore.Transaction, error) {
		op := *t
		return s.onPreAuth(ctx, pre, &op, claim)
	})
}

// onPreAuth checks t, a new INCREMENT, CAPTURE or VOID of pre, in the
// contract's order (the rule is decided again with the creation, in the
// database transaction that locks pre), and starts it on pre's terminal.
func (s *Service) onPreAuth(ctx context.Context, pre, t *instore.Transaction, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	others, err := s.Store.OnOriginal(ctx, pre.ID)
	if err != nil {
		return nil, fmt.Errorf("on pre-auth: %w", err)
	}
	if mutant.On(mutant.VoidAfterCapture) && t.Type == instore.TypeVoid && pre.Authorization != nil {
		pre.Authorization.State = instore.AuthOpen
	}
	if err := instore.CheckOnPreAuth(pre, others, t, s.captureTolerance()); err != nil {
		return nil, err
	}
	term, serial, err := s.originalTerminal(ctx, pre.MerchantID, pre)
	if err != nil {
		return nil, err
	}
	t.ID, t.MerchantID, t.TerminalID, t.SerialNumber = s.NewRef(), pre.MerchantID, term.TerminalID, serial
	t.Currency, t.OriginalID, t.CreatedAt = pre.Currency, pre.ID, s.now()
	t.StatusID, t.Progress = instore.StatusPending, instore.ProgressSent
	create := func(ctx context.Context, ch *instore.Change) error {
		ch.CaptureTolerance, ch.PreAuthValidity = s.captureTolerance(), s.rules().PreAuthValidity
		return s.Store.CreateOnOriginal(ctx, ch)
	}
	return s.start(ctx, t, claim, create, func(ctx context.Context) error { return s.Gateway.SendPayment(ctx, serial, t) })
}

// preAuthExpired voids the pre-auth ref on its terminal if it is still
// OPEN past its expiresAt: a VOID with actor TIMER (ByTimer), which, once
// approved, ends it EXPIRED. It runs on a goroutine of its own; nothing
// waits for the VOID's ack (start). A terminal busy (WP09: tried again
// once it is idle, waitIdle) or offline, or a capture or void in flight,
// leaves it for the next sweep (or the outcome of that one); a VOID of it
// that ended without an approval, for its retry (lifecycle.ExpiryDue).
func (s *Service) preAuthExpired(ref string) {
	s.spawn(func() {
		// One at a time per pre-auth on this node: the timer, the sweep and
		// an idle terminal may all call for it, and one that read the
		// pre-auth before another's VOID ended would send the retry at
		// once, not at its time (lifecycle.ExpiryDue).
		// One asked for while another runs is decided again after it, on
		// what that one wrote (a VOID it sent, ended meanwhile, wants its
		// retry armed).
		if !s.beginExpiry(ref) {
			return
		}
		defer func() {
			if s.endExpiry(ref) {
				s.preAuthExpired(ref)
			}
		}()
		ctx := context.Background()
		pre, err := s.Store.Transaction(ctx, ref)
		if err != nil {
			s.log().Error("expire pre-auth", "ref", ref, "error", err)
			return
		}
		others, err := s.Store.OnOriginal(ctx, ref)
		if err != nil {
			s.log().Error("expire pre-auth", "ref", ref, "error", err)
			return
		}
		at, ok := lifecycle.ExpiryDue(*pre, others, s.rules())
		if !ok {
			return
		}
		// Past its expiresAt, a pre-auth no device can void lapses now,
		// without waiting for the retry of an expiry VOID that ended
		// without an answer (found by the simulation: the books showed it
		// OPEN for the retry's hour).
		if a := pre.Authorization; a != nil && !s.now().Before(a.ExpiresAt) && s.lapsed(ctx, pre, others) {
			return
		}
		if s.now().Before(at) {
			s.arm(ref, at, s.preAuthExpired)
			return
		}
		var amount int64
		if pre.Authorization != nil {
			amount = pre.Authorization.AuthorizedAmount
		}
		void := &instore.Transaction{Type: instore.TypeVoid, Amount: amount, ByTimer: true}
		_, err = s.onPreAuth(ctx, pre, void, nil)
		var e *instore.Error
		var notDue *lifecycle.ExpiryNotDue
		switch {
		case err == nil:
			s.log().Info("pre-auth expired: void sent", "ref", ref, "void", void.ID)
		case errors.As(err, &notDue):
			// Decided on an older read: a VOID of it ended meanwhile
			// without an approval, and the store, reading it under the
			// pre-auth's lock, refused the retry before its time.
			s.arm(ref, notDue.At, s.preAuthExpired)
		case errors.As(err, &e) && e.Code == instore.EConflict:
			// A capture or void of it is in flight: its outcome decides.
			// Or its terminal ID was linked to another device between
			// lapsed's read and this VOID (CheckHeldByDevice): the next
			// sweep finds it lapsed.
		case errors.Is(err, instore.ErrRelinked):
			// Its terminal ID was linked to another device between the
			// read and the VOID's creation: decided again at once, on the
			// new link (lapsed, most likely).
			s.preAuthExpired(ref)
		case errors.As(err, &e) && e.Code == instore.WP09:
			// The terminal is busy: tried again once it is idle
			// (terminalIdle), or at the next sweep.
			s.waitIdle(pre.TerminalID, ref)
		case !s.isClosed():
			s.log().Warn("pre-auth expired: void not sent; the sweep retries", "ref", ref, "error", err)
		}
	})
}

// lapsed ends pre's authorisation EXPIRED without a VOID
// (lifecycle.EventAuthLapsed) when no device can void it: its terminal
// ID is linked to another device than the one that authorised it
// (instore.CheckHeldByDevice), or to none (the device that holds it is
// reached through its terminal ID only; the VOID would end WP01 at
// every sweep for ever, found by the simulation), and nothing of it is
// in flight (a CAPTURE or VOID sent to its device before the relink
// decides first). It
// reports whether it decided the expiry (lapsed, or failed to: the sweep
// asks again).
//
// The link and "nothing in flight" are read before the lapse's commit,
// which is a compare-and-set on the pre-auth alone. What may come between
// needs the ID linked back to the old device and a CAPTURE or INCREMENT
// created on it (CheckHeldByDevice and the creation's OnDevice refuse it
// otherwise); its approval then finds the authorisation EXPIRED and is
// reversed on the terminal (lifecycle's closedApproval), so no money is
// taken on an authorisation the books show ended.
func (s *Service) lapsed(ctx context.Context, pre *instore.Transaction, others []*instore.Transaction) bool {
	term, err := s.Store.Terminal(ctx, pre.TerminalID)
	if err != nil || term.Linked() && instore.CheckHeldByDevice(pre, term.SerialNumber) == nil {
		return false
	}
	for _, o := range others {
		if !o.Final() {
			return true // its outcome decides; the sweep asks again
		}
	}
	if _, _, err := s.apply(ctx, pre.ID, nil, lifecycle.Event{Kind: lifecycle.EventAuthLapsed, At: s.now()}); err != nil {
		s.log().Error("expire pre-auth without a void", "ref", pre.ID, "error", err)
		return true
	}
	s.log().Warn("pre-auth expired without a void: its device is no longer linked to its terminal ID; the hold lapses at the issuer", "ref", pre.ID)
	return true
}

// beginExpiry marks the expiry of the pre-auth ref as being decided on
// this node; false if it is already (then it is decided again after).
func (s *Service) beginExpiry(ref string) bool {
	s.expiryMu.Lock()
	defer s.expiryMu.Unlock()
	if _, running := s.expiring[ref]; running {
		s.expiring[ref] = true
		return false
	}
	if s.expiring == nil {
		s.expiring = map[string]bool{}
	}
	s.expiring[ref] = false
	return true
}

// endExpiry ends beginExpiry's mark and says whether the expiry was asked
// for again meanwhile.
func (s *Service) endExpiry(ref string) bool {
	s.expiryMu.Lock()
	defer s.expiryMu.Unlock()
	again := s.expiring[ref]
	delete(s.expiring, ref)
	return again
}

// waitIdle notes that the expiry of the pre-auth ref waits for its
// terminal to be idle.
func (s *Service) waitIdle(terminalID, ref string) {
	s.expiryMu.Lock()
	defer s.expiryMu.Unlock()
	if s.expiryWaits == nil {
		s.expiryWaits = map[string]map[string]bool{}
	}
	if s.expiryWaits[terminalID] == nil {
		s.expiryWaits[terminalID] = map[string]bool{}
	}
	s.expiryWaits[terminalID][ref] = true
}

// recoverPreAuths arms the expiry of every OPEN pre-auth (Recover).
func (s *Service) recoverPreAuths(ctx context.Context) error {
	if mutant.On(mutant.ExpiryNotRecovered) {
		return nil
	}
	open, err := s.Store.OpenPreAuths(ctx, time.Time{})
	if err != nil {
		return fmt.Errorf("open pre-auths: %w", err)
	}
	for _, t := range open {
		s.armExpiry(t)
	}
	return nil
}

// sweepPreAuths voids the OPEN pre-auths past their expiry (Sweep): a
// timer lost, or a void that could not start.
func (s *Service) sweepPreAuths(ctx context.Context) {
	due, err := s.Store.OpenPreAuths(ctx, s.now())
	if s.sweepFailed(ctx, "sweep: open pre-auths", err) {
		return
	}
	for _, t := range due {
		s.preAuthExpired(t.ID)
	}
}

// armExpiry arms the expiry of t if it is an OPEN pre-auth; if t is an
// expiry VOID that ended without an approval, its pre-auth's expiry is
// tried again (lifecycle.ExpiryDue's retry).
func (s *Service) armExpiry(t *instore.Transaction) {
	if t.Type == instore.TypeVoid && t.ByTimer && t.Final() && t.StatusID != instore.StatusApproved {
		s.log().Warn("pre-auth expired: its void ended without an approval; tried again later", "ref", t.OriginalID, "void", t.ID, "status", t.StatusID)
		s.preAuthExpired(t.OriginalID)
		return
	}
	if at, ok := lifecycle.ExpiryDue(*t, nil, s.rules()); ok {
		s.arm(t.ID, at, s.preAuthExpired)
	}
}

func (s *Service) captureTolerance() float64 {
	switch {
	case mutant.On(mutant.CaptureToleranceSkipped):
		return 1e6 // no limit to speak of
	case s.CaptureTolerance > 0:
		return s.CaptureTolerance
	case s.CaptureTolerance < 0:
		return 0
	}
	return instore.DefaultCaptureTolerance
}

func (s *Service) preAuthValidity() time.Duration {
	if s.PreAuthValidity > 0 {
		return s.PreAuthValidity
	}
	return instore.DefaultPreAuthValidity
}

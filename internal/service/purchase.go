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

// Purchase creates a purchase on a terminal and answers once the terminal
// acknowledged it. Errors, in the contract's order: validation, WP03, WP22,
// WP16, WP01, WP30, WP23, WP09; WP25 when no ack came in time. claim is
// the request's idempotency record (nil: it has no Idempotency-Key): the
// purchase is tied to it, or, for a retry of the request that created one,
// answers about that one (Resume).
func (s *Service) Purchase(ctx context.Context, p *instore.Principal, req *instore.PurchaseRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	return relinked(func() (*instore.Transaction, error) { return s.sale(ctx, p, req, req, instore.TypePurchase, claim) })
}

// relinked runs op, a request that creates a transaction, once more when
// its creation found the terminal ID linked to another device than the
// one op read (instore.ErrRelinked: a link or unlink committed between;
// nothing was stored and the idempotency record is still op's): the second
// run reads the terminal again and answers as a request made after the
// link does (its command sent to the new device, or refused by the
// checks, instore.CheckHeldByDevice for one on an original). A second
// such race answers WP09, as a link racing a running transaction does.
func relinked(op func() (*instore.Transaction, error)) (*instore.Transaction, error) {
	t, err := op()
	if errors.Is(err, instore.ErrRelinked) {
		t, err = op()
	}
	if errors.Is(err, instore.ErrRelinked) {
		return nil, instore.Errorf(instore.WP09, "The terminal ID was linked to another device while the request ran; retry.")
	}
	return t, err
}

// sale creates a PURCHASE or a PRE_AUTH (typ) of req, checked by v
// (req's own rules, or a pre-auth's), as Purchase says.
func (s *Service) sale(ctx context.Context, p *instore.Principal, v interface{ Validate() error }, req *instore.PurchaseRequest, typ instore.TransactionType, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	if t, done, err := s.admit(ctx, p, v, claim); done {
		return t, err
	}
	if req.PaymentMethodID != nil {
		if _, ok := s.Metadata.PaymentMethod(*req.PaymentMethodID); !ok {
			return nil, instore.Errorf(instore.WP22, "paymentMethodId %d is not in the paymentMethods list.", *req.PaymentMethodID)
		}
	}
	term, update, err := s.ownTerminalWithUpdate(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	serial, err := s.readyToCreate(ctx, term, update)
	if err != nil {
		return nil, err
	}
	t := &instore.Transaction{
		ID: s.NewRef(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, SerialNumber: serial,
		Type: typ, Amount: *req.Amount, VATAmount: req.VATAmount, Currency: req.Currency,
		PaymentMethodID: req.PaymentMethodID, ECRReference: req.ECRReference, PrintReceipt: req.PrintReceipt,
		StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: s.now(), Tip: req.Tip,
	}
	if req.CashbackAmount != nil {
		t.CashbackAmount = *req.CashbackAmount
	}
	if req.ConfirmWithinSeconds != nil {
		t.ConfirmWithin, t.ConfirmState = time.Duration(*req.ConfirmWithinSeconds)*time.Second, instore.ConfirmPending
	}
	return s.start(ctx, t, claim, s.Store.CreateTransaction, func(ctx context.Context) error {
		return s.Gateway.SendPayment(ctx, serial, t)
	})
}

// start stores a new PENDING transaction with create, sends it to its
// terminal with send and waits for the ack (or a final status) up to the
// ack timeout. With an idempotency record (claim), the record gets the
// transaction in the creation's database transaction.
func (s *Service) start(ctx context.Context, t *instore.Transaction, claim *instore.IdempotencyClaim, create func(context.Context, *instore.Change) error, send func(context.Context) error) (*instore.Transaction, error) {
	// PENDING, its first timeline entry, its deadline and its ack timer
	// (lifecycle.Create), written with the idempotency tie in one change.
	created, step := lifecycle.Create(*t, s.rules())
	*t = created
	// Written only while its terminal ID is still linked to the device
	// the command goes to (OnDevice; relinked).
	ch := &instore.Change{T: t, Idempotency: claim, Events: []instore.TransactionEvent{*step.Event}, OnDevice: t.SerialNumber}
	// Subscribed before anything can change it: the wait for the ack starts
	// from the created state without reading it back.
	w, gen, release := s.changes.subscribe(t.ID)
	defer release()
	var rule *instore.Error
	s.stamp(ch)
	switch err := create(ctx, ch); {
	case err == nil:
	case errors.As(err, &rule):
		return nil, rule
	case errors.Is(err, instore.ErrConflict):
		return nil, s.busy(ctx, t.TerminalID)
	case errors.Is(err, instore.ErrIdempotencyLost):
		return nil, instore.Errorf(instore.EConflict, "Another request with this Idempotency-Key took it over; retry with the same key for its answer.")
	case errors.Is(err, instore.ErrRelinked):
		return nil, err // the request runs again (relinked)
	default:
		return nil, fmt.Errorf("create transaction: %w", err)
	}
	// Published as every committed change is (the sequencer poked, the
	// running set and the watchers told); its ack timer armed.
	s.committed(ch, step)
	created = *t
	if !mutant.On(mutant.AckTimeoutNotArmed) {
		s.arm(t.ID, *step.Arm, s.timerOf(step.ArmKind))
	}
	// What the terminal is owed for its previous transactions goes first
	// (owed.go): one the service ended may still run on it.
	err := s.cancelsBefore(ctx, t.SerialNumber, t.ID)
	if err == nil {
		err = send(ctx)
	}
	if err != nil {
		// The session went away between the check and the send (or what
		// the terminal is owed could not be read, and the command was held
		// back so as not to overtake a cancel): the command most likely
		// never left. Record it as a technical error and say so;
		// in case its frame reached the terminal all the same, the terminal
		// is owed a cancel ACK_TIMEOUT (it drops a command it never
		// acknowledged, and ignores a ref it does not know), sent after its
		// next hello.
		if _, _, err := s.apply(context.WithoutCancel(ctx), t.ID, nil, lifecycle.Event{Kind: instore.EventSendFailed, At: s.now()}); err != nil {
			s.log().Error("end a transaction whose command was not sent", "ref", t.ID, "error", err)
		}
		return nil, s.wp23(t.ID)
	}
	if t.ByTimer {
		// The service's own VOID at a pre-auth's expiry: nobody waits for
		// its ack (its ack timer ends it if none comes).
		return &created, nil
	}
	return s.awaitAck(ctx, &created, w, gen)
}

// admit begins a request that creates a transaction: a retry of the
// request that created one answers about that one (resume); otherwise the
// request must be valid (validation) and its merchant known (WP03). done
// says the request is answered with t and err.
func (s *Service) admit(ctx context.Context, p *instore.Principal, req interface{ Validate() error }, claim *instore.IdempotencyClaim) (t *instore.Transaction, done bool, err error) {
	if claim != nil && claim.Resume != "" {
		t, err := s.resume(ctx, p, claim.Resume)
		return t, true, err
	}
	if err := req.Validate(); err != nil {
		return nil, true, err
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// admitOn is admit for a request on one of the merchant's transactions,
// ref (WP04 otherwise): done says the request is answered with t and err;
// otherwise orig is that transaction.
func (s *Service) admitOn(ctx context.Context, p *instore.Principal, req interface{ Validate() error }, claim *instore.IdempotencyClaim,
	ref string) (orig, t *instore.Transaction, done bool, err error) {
	if resumed, answered, err := s.admit(ctx, p, req, claim); answered {
		return nil, resumed, true, err
	}
	orig, err = s.ownTransaction(ctx, p, ref)
	return orig, nil, err != nil, err
}

// resume answers a retry of a request that created the transaction ref
// (its idempotency record is tied to it), after a crash or while the first
// still runs, as the first answered or would have: once the terminal
// acknowledged it or it ended, with the problem the first got (WP25,
// WP23). It creates and sends nothing.
func (s *Service) resume(ctx context.Context, p *instore.Principal, ref string) (*instore.Transaction, error) {
	w, gen, release := s.changes.subscribe(ref)
	defer release()
	t, err := s.currentTransaction(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	return s.awaitAck(ctx, t, w, gen)
}

// currentTransaction reads one of the merchant's transactions (WP04
// otherwise): a running one from running (this node commits every change
// of it, and puts each there before answering anyone), a finished one from
// the store.
func (s *Service) currentTransaction(ctx context.Context, p *instore.Principal, ref string) (*instore.Transaction, error) {
	if t := s.runningState(ref); t != nil && t.MerchantID == p.MerchantID {
		return t, nil
	}
	return s.ownTransaction(ctx, p, ref)
}

// awaitAck waits until the transaction t (its state read or created after
// w was subscribed at generation gen) is acknowledged or final, at most
// until its ack time-out has passed, and answers as a creating request
// does: the transaction, or WP25 / WP23 when it ended unacknowledged for
// that reason.
func (s *Service) awaitAck(ctx context.Context, t *instore.Transaction, w *watch, gen uint64) (*instore.Transaction, error) {
	ackBy := t.CreatedAt.Add(s.ackTimeout())
	got, err := s.waitOn(ctx, t.ID, w, gen, t, ackBy.Add(time.Second), func(t *instore.Transaction) bool { return t.Acknowledged() || t.Final() })
	if err != nil {
		return nil, err
	}
	if !got.Acknowledged() && !got.Final() && !s.Now().Before(ackBy) {
		// Its ack time passed and its timer has not ended it (late, or not
		// armed yet after a start): end it now, so that the answer is the
		// WP25 the first request got or would have got, never a 201 for a
		// sale that is about to fail.
		s.ackExpired(got.ID)
		if got, err = s.Store.Transaction(context.WithoutCancel(ctx), got.ID); err != nil {
			return nil, fmt.Errorf("transaction: %w", err)
		}
	}
	if !got.Acknowledged() && got.Final() && got.ErrorID != nil {
		switch *got.ErrorID {
		case *s.errorID(instore.WP25):
			e := instore.Errorf(instore.WP25, "The terminal did not acknowledge the request in time.")
			e.OnlineAPIRefID = got.ID
			return nil, e
		case *s.errorID(instore.WP23):
			return nil, s.wp23(got.ID)
		}
	}
	return got, nil
}

// wp23 is the problem of a transaction whose command never reached its
// terminal.
func (s *Service) wp23(ref string) error {
	e := instore.Errorf(instore.WP23, "The terminal went offline before the request reached it.")
	e.OnlineAPIRefID = ref
	return e
}

func (s *Service) ackTimeout() time.Duration {
	if s.AckTimeout > 0 {
		return s.AckTimeout
	}
	return DefaultAckTimeout
}

func (s *Service) deadline() time.Duration {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return DefaultDeadline
}

// Transaction returns one of the merchant's transactions. With wait > 0 it
// holds the answer while the transaction is PENDING, until it is final or
// wait passes; with afterVersion as well, also until its version is past
// afterVersion (any change: a progress stage, the acknowledgement), which
// is how a till follows the terminal's progress. Errors: WP03, WP04.
func (s *Service) Transaction(ctx context.Context, p *instore.Principal, ref string, wait time.Duration, afterVersion *int64) (*instore.Transaction, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(ref) {
		return nil, instore.Errorf(instore.WP04, "No transaction with this onlineAPIRefId.")
	}
	var w *watch
	var gen uint64
	if wait > 0 {
		// Subscribed before the read, so that the read serves the wait too.
		var release func()
		w, gen, release = s.changes.subscribe(ref)
		defer release()
	}
	t, err := s.currentTransaction(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if wait <= 0 || t.Final() {
		return t, nil
	}
	cond := (*instore.Transaction).Final
	if afterVersion != nil {
		after := *afterVersion
		cond = func(t *instore.Transaction) bool { return t.Version > after || t.Final() }
	}
	return s.waitOn(ctx, ref, w, gen, t, s.Now().Add(wait), cond)
}

// waitOn waits until cond holds for the transaction ref, the deadline
// passes or ctx ends, and returns its latest state in every case but a
// store error. t is its state read (or created) after w was subscribed at
// generation gen, so no change is missed. It is woken by the changes
// themselves (no polling), and a change published with its state costs no
// read.
func (s *Service) waitOn(ctx context.Context, ref string, w *watch, gen uint64, t *instore.Transaction, until time.Time, cond func(*instore.Transaction) bool) (*instore.Transaction, error) {
	var err error
	// On the service's clock, which tests drive.
	timeout, stop := After(s.clock(), until.Sub(s.Now()))
	defer stop()
	for {
		if cond(t) {
			return t, nil
		}
		newGen, latest, changed, ch := s.changes.since(w, gen)
		if changed {
			gen = newGen
			switch {
			case latest == nil:
				if t, err = s.Store.Transaction(ctx, ref); err != nil {
					return nil, fmt.Errorf("transaction: %w", err)
				}
			case latest.Version > t.Version:
				cp := *latest
				t = &cp
			}
			continue
		}
		select {
		case <-ch:
		case <-timeout:
			return t, nil
		case <-ctx.Done():
			return t, nil
		}
	}
}

// Cancel asks the terminal to abort its running transaction (the one
// req names, if it names one). The transaction ends ABORTED_BY_CASHIER
// with WP37, or in the final status the terminal reached first. Errors, in
// order: validation, WP03, WP16, WP01, WP30, WP23, WP18.
func (s *Service) Cancel(ctx context.Context, p *instore.Principal, req *instore.CancelRequest) (*instore.Transaction, error) {
	term, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	_, active, err := s.readiness(ctx, term, needRunning)
	if err != nil {
		return nil, err
	}
	if req.OnlineAPIRefID != "" && req.OnlineAPIRefID != active.ID {
		return nil, instore.Errorf(instore.WP18, "The transaction onlineAPIRefId names is not the one running on this terminal; nothing was cancelled.")
	}
	// The request and the cancel it owes the terminal are stored together:
	// a cancel that cannot be sent now is sent after the device's next
	// hello (the root's effect.go). A transaction the terminal ended first is
	// answered as it is.
	t, _, err := s.apply(ctx, active.ID, nil, lifecycle.Event{Kind: instore.EventCancelRequested, At: s.now()})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Confirm confirms an APPROVED sale that asked for confirmation
// (confirmWithinSeconds) before its window ends; the sale then stays
// APPROVED and is not reversed. It is idempotent: a confirmed sale is
// answered as it is while it stays APPROVED. Errors: WP04 (not the
// merchant's), not-confirmable (no confirmation asked, no APPROVED result
// yet, reversed, confirmed and then reversed by the ECR, or the window
// passed: then the sale is reversed now if its timer had not run yet).
func (s *Service) Confirm(ctx context.Context, p *instore.Principal, ref string) (*instore.Transaction, error) {
	t, err := s.ownTransaction(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	t, _, err = s.apply(ctx, ref, t, lifecycle.Event{Kind: instore.EventConfirmed, At: s.now()})
	if err != nil {
		return nil, err
	}
	if t.ConfirmState != instore.ConfirmConfirmed || t.StatusID != instore.StatusApproved {
		return nil, lifecycle.NotConfirmable(t)
	}
	return t, nil
}

// ptr is a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

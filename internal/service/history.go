package service

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
)

// Refund creates a REFUND on a terminal and answers once the terminal
// acknowledged it, like Purchase. With originalOnlineAPIRefId it refunds
// (part of) an approved purchase: the refunds of one original never exceed
// its amount, and a purchase paid with a payment method (not a card) is
// refunded only with that method. Errors, in order: validation, WP03, WP04
// (original), conflict (original not an approved purchase), WP22, WP16,
// WP01, WP30, WP23, WP09, validation (amount over what is left).
func (s *Service) Refund(ctx context.Context, p *instore.Principal, req *instore.RefundRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	return relinked(func() (*instore.Transaction, error) { return s.refund(ctx, p, req, claim) })
}

func (s *Service) refund(ctx context.Context, p *instore.Principal, req *instore.RefundRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	if t, done, err := s.admit(ctx, p, req, claim); done {
		return t, err
	}
	var orig *instore.Transaction
	if req.OriginalOnlineAPIRefID != "" {
		o, err := s.ownTransaction(ctx, p, req.OriginalOnlineAPIRefID)
		if err != nil {
			return nil, err
		}
		// The original's own state, in the contract's order; the whole rule
		// is decided again with the creation.
		if mutant.On(mutant.QueuedRefundable) && o.Queued() {
			o.Forwarding = nil
		}
		if err := instore.CheckOnOriginal(o, nil, &instore.Transaction{Type: instore.TypeRefund}); err != nil {
			return nil, err
		}
		if o.Currency != req.Currency {
			return nil, &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.",
				Fields: []instore.FieldError{{Field: "/currency", Message: "must be the original's currency " + o.Currency}}}
		}
		orig = o
	}
	if req.PaymentMethodID != nil {
		if _, ok := s.Metadata.PaymentMethod(*req.PaymentMethodID); !ok {
			return nil, instore.Errorf(instore.WP22, "paymentMethodId %d is not in the paymentMethods list.", *req.PaymentMethodID)
		}
	}
	paidWith := func(t *instore.Transaction) *int {
		if t == nil || t.Result == nil {
			return nil
		}
		return t.Result.PaymentMethodID
	}(orig)
	switch {
	case req.PaymentMethodID != nil && orig == nil:
		return nil, instore.Errorf(instore.WP22, "A refund with a payment method must name the original purchase paid with it (originalOnlineAPIRefId).")
	case req.PaymentMethodID != nil && (paidWith == nil || *paidWith != *req.PaymentMethodID):
		return nil, instore.Errorf(instore.WP22, "The original purchase was not paid with paymentMethodId %d.", *req.PaymentMethodID)
	case req.PaymentMethodID == nil && paidWith != nil:
		return nil, instore.Errorf(instore.WP22, "The original purchase was paid with paymentMethodId %d; refund it with the same method.", *paidWith)
	}
	term, err := s.ownTerminal(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	serial, _, err := s.readiness(ctx, term, needIdle)
	if err != nil {
		return nil, err
	}
	t := &instore.Transaction{
		ID: s.NewRef(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, SerialNumber: serial,
		Type: instore.TypeRefund, Amount: *req.Amount, Currency: req.Currency, PaymentMethodID: req.PaymentMethodID,
		ECRReference: req.ECRReference, StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: s.now(),
	}
	create := s.Store.CreateTransaction
	if orig != nil {
		t.OriginalID = orig.ID
		create = s.Store.CreateOnOriginal
		if mutant.On(mutant.RefundLimitOutsideLock) {
			others, err := s.Store.OnOriginal(ctx, orig.ID)
			if err != nil {
				return nil, err
			}
			if err := instore.CheckOnOriginal(orig, others, t); err != nil {
				return nil, err
			}
		}
	}
	return s.start(ctx, t, claim, create, func(ctx context.Context) error { return s.Gateway.SendPayment(ctx, serial, t) })
}

// ownTransaction loads one of the merchant's transactions (WP04 otherwise).
func (s *Service) ownTransaction(ctx context.Context, p *instore.Principal, ref string) (*instore.Transaction, error) {
	if !instore.ValidRef(ref) {
		// Not a ref's shape (PostgreSQL's text refuses NUL and bytes that
		// are not UTF-8): no such transaction, as the store would say.
		return nil, instore.Errorf(instore.WP04, "No transaction with this onlineAPIRefId.")
	}
	t, err := s.Store.Transaction(ctx, ref)
	return merchants(p, t, err, func(t *instore.Transaction) string { return t.MerchantID },
		instore.WP04, "No transaction with this onlineAPIRefId.", "transaction")
}

// Reversal reverses an APPROVED purchase that is the latest transaction of
// its terminal, with no card interaction. When the terminal approves the
// REVERSAL, the original becomes REVERSED and both name each other.
// Errors, in order: validation, WP03, WP04, not-reversible, WP01, WP30,
// WP23, WP09.
func (s *Service) Reversal(ctx context.Context, p *instore.Principal, req *instore.ReversalRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	return relinked(func() (*instore.Transaction, error) { return s.reversal(ctx, p, req, claim) })
}

func (s *Service) reversal(ctx context.Context, p *instore.Principal, req *instore.ReversalRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
	orig, resumed, done, err := s.admitOn(ctx, p, req, claim, req.OnlineAPIRefID)
	if done {
		return resumed, err
	}
	// The original's own state, in the contract's order; the whole rule
	// (its refunds included) is decided again with the creation.
	if err := instore.CheckOnOriginal(orig, nil, &instore.Transaction{Type: instore.TypeReversal}); err != nil {
		return nil, err
	}
	// The latest transaction of its terminal (the rule is decided again
	// with the creation).
	newer, err := s.Store.ListTransactions(ctx, instore.NewerOnTerminal(orig, s.now().Add(time.Hour)))
	if err != nil {
		return nil, fmt.Errorf("newer transactions: %w", err)
	}
	if err := instore.CheckReversalLatest(orig, newer); err != nil {
		return nil, err
	}
	term, serial, err := s.originalTerminal(ctx, p.MerchantID, orig)
	if err != nil {
		return nil, err
	}
	t := &instore.Transaction{
		ID: s.NewRef(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, SerialNumber: serial,
		Type: instore.TypeReversal, Amount: orig.Amount, CashbackAmount: orig.CashbackAmount, TipAmount: orig.TipAmount, Currency: orig.Currency,
		ECRReference: req.ECRReference, OriginalID: orig.ID, Reverses: orig.ID,
		StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: s.now(),
	}
	// A command like a purchase's: acknowledged and reported on.
	return s.start(ctx, t, claim, s.Store.CreateOnOriginal, func(ctx context.Context) error {
		return s.Gateway.SendPayment(ctx, serial, t)
	})
}

// originalTerminal is the terminal of orig, where a transaction acting on
// it without a card (a reversal; an increment, capture or void of a
// pre-auth) runs, once it is the merchant's (WP16), linked to the device
// that made orig (CheckHeldByDevice) and ready for one (readiness,
// needIdle), and the serial number of its device.
func (s *Service) originalTerminal(ctx context.Context, merchantID string, orig *instore.Transaction) (*instore.Terminal, string, error) {
	term, err := s.Store.Terminal(ctx, orig.TerminalID)
	if err != nil {
		return nil, "", fmt.Errorf("terminal: %w", err)
	}
	if term.MerchantID != merchantID {
		return nil, "", instore.Errorf(instore.WP16, "The terminal ID is not one of this merchant's.")
	}
	if term.Linked() {
		if err := instore.CheckHeldByDevice(orig, term.SerialNumber); err != nil {
			return nil, "", err
		}
	}
	serial, _, err := s.readiness(ctx, term, needIdle)
	return term, serial, err
}

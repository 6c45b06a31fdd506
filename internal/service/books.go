package service

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// Totals sums the merchant's transactions of a window (the listing's: the
// last 24 hours by default, at most 30 days, from within the past 90),
// of every status, by currency, type and status; the amounts are
// totalAmounts (tips included). Errors, in order: validation, WP03, WP26,
// WP27, WP16 (terminalId), as the listing's.
func (s *Service) Totals(ctx context.Context, p *instore.Principal, q instore.TotalsQuery) (*instore.TotalsWire, error) {
	var f instore.FieldErrors
	now := s.Now().UTC()
	from, to := windowOf(now, q.From, q.To)
	if !from.Before(to) {
		f.Add("from", "must be before to")
	}
	if q.TerminalID != "" && !instore.ValidTerminalID(q.TerminalID) {
		f.Add("terminalId", "must be 8 digits")
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	flt := instore.TotalsFilter{MerchantID: p.MerchantID, From: from, To: to, TerminalID: q.TerminalID}
	if err := s.booksScope(ctx, p, now, flt); err != nil {
		return nil, err
	}
	ts, err := s.Store.Totals(ctx, flt)
	if err != nil {
		return nil, fmt.Errorf("totals: %w", err)
	}
	for i := range ts {
		ts[i].Status = s.statusCode(ts[i].StatusID)
	}
	return &instore.TotalsWire{From: from, To: to, TerminalID: instore.NullString(q.TerminalID), Totals: ts}, nil
}

// Reconcile compares the ECR's books in req with the merchant's
// transactions of req's window (of its terminal ID, if it names one):
// instore.Reconcile on the service's book entries. Errors, in order:
// validation (the request's shape, instore.ReconcileRequest.Validate),
// WP03, WP26, WP27, WP16, and validation when the window holds more than
// instore.MaxReconcileService transactions.
func (s *Service) Reconcile(ctx context.Context, p *instore.Principal, req *instore.ReconcileRequest) (*instore.ReconcileResult, error) {
	if err := req.Validate(s.Metadata); err != nil {
		return nil, err
	}
	from, to := req.Window()
	flt := instore.TotalsFilter{MerchantID: p.MerchantID, From: from, To: to, TerminalID: req.TerminalID}
	if err := s.booksScope(ctx, p, s.Now().UTC(), flt); err != nil {
		return nil, err
	}
	es, err := s.Store.BookEntries(ctx, flt, instore.MaxReconcileService+1)
	if err != nil {
		return nil, fmt.Errorf("book entries: %w", err)
	}
	if len(es) > instore.MaxReconcileService {
		return nil, &instore.Error{Code: instore.EValidation,
			Detail: fmt.Sprintf("The window holds more than %d of the service's transactions; reconcile a shorter window or one terminal at a time.", instore.MaxReconcileService),
			Fields: []instore.FieldError{{Field: "/to", Message: fmt.Sprintf("the window from from to to holds more than %d transactions", instore.MaxReconcileService)}}}
	}
	for i := range es {
		es[i].Status = s.statusCode(es[i].StatusID)
	}
	res := instore.Reconcile(req.Transactions, es)
	return &res, nil
}

// booksScope checks what totals and reconciliations may read, after the
// request's shape: an active merchant (WP03), the listing's window (WP26,
// WP27) and the merchant's own terminal ID (WP16).
func (s *Service) booksScope(ctx context.Context, p *instore.Principal, now time.Time, f instore.TotalsFilter) error {
	if _, err := s.merchant(ctx, p); err != nil {
		return err
	}
	if err := checkWindow(now, f.From, f.To); err != nil {
		return err
	}
	if f.TerminalID != "" {
		if _, err := s.ownTerminal(ctx, p, f.TerminalID); err != nil {
			return err
		}
	}
	return nil
}

// statusCode is the code of a transaction status (APPROVED...).
func (s *Service) statusCode(id instore.TransactionStatus) string {
	c, _ := s.Metadata.TransactionStatus(id)
	return c.Code
}

package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
)

// What an operation on a terminal needs before it starts (readiness).
type need int

const (
	// needIdle: a new transaction (purchase, refund, reversal) needs the
	// terminal linked (WP01), no transaction waiting on a device that went
	// away (WP30), the device ready (WP23), no transaction running (WP09,
	// TRANSACTION_IN_PROGRESS) and no software update installing (WP09,
	// SOFTWARE_UPDATE); a close running (WP09, BATCH_CLOSE) is found by
	// the creation, which the store refuses then (busy).
	needIdle need = iota
	// needRunning: a cancel needs the terminal linked (WP01), no
	// transaction waiting on a device that went away (WP30), the device
	// online (WP23) and a transaction running (WP18).
	needRunning
	// needOnline: a print needs the terminal linked (WP01) and the device
	// ready (WP23); a running transaction is returned (the job is then
	// BUSY at once, never disturbing it).
	needOnline
)

// readiness applies the readiness rules, in the contract's order, for an
// operation on term that needs n: the one place they live. It returns
// the serial number of the linked device and the transaction running on
// the terminal ID (nil: none).
func (s *Service) readiness(ctx context.Context, term *instore.Terminal, n need) (serial string, active *instore.Transaction, err error) {
	if !term.Linked() {
		return "", nil, instore.Errorf(instore.WP01, "The terminal ID has no linked terminal.")
	}
	active, err = s.Store.ActiveTransaction(ctx, term.TerminalID)
	if err != nil && !errors.Is(err, instore.ErrNotFound) {
		return "", nil, fmt.Errorf("active transaction: %w", err)
	}
	if n != needOnline {
		if e := wp30(active, s.Gateway); e != nil {
			return "", nil, e
		}
	}
	// A cancel goes to a device with a session; a new command waits
	// (briefly) until the device has been sent what it is owed.
	if n == needRunning && !s.Gateway.Online(term.SerialNumber) || n != needRunning && !s.Gateway.Ready(term.SerialNumber) {
		return "", nil, instore.Errorf(instore.WP23, "The terminal is offline.")
	}
	switch n {
	case needRunning:
		if active == nil {
			return "", nil, instore.Errorf(instore.WP18, "No transaction is running on this terminal.")
		}
	case needIdle:
		if active != nil {
			return "", nil, wp09(active)
		}
		// Access API: a terminal installing a software update is busy.
		if err := s.installing(ctx, term.TerminalID); err != nil {
			return "", nil, err
		}
	}
	return term.SerialNumber, active, nil
}

// readyToCreate is readiness(needIdle) for an operation whose creation is
// its next step and has no check of its own between (a purchase): with
// the terminal online, a running transaction is found by the creation
// itself, which the store refuses while the terminal ID has one or is
// closing its batch (ErrConflict; busy then tells WP30 from WP09 and
// names the cause), so the check costs no read of its own. The answers are readiness's. u is the terminal's unfinished
// software update (nil if none), read with the terminal.
func (s *Service) readyToCreate(ctx context.Context, term *instore.Terminal, u *instore.Update) (string, error) {
	if !term.Linked() || !s.Gateway.Ready(term.SerialNumber) {
		serial, _, err := s.readiness(ctx, term, needIdle)
		return serial, err
	}
	if err := s.installingWith(term.TerminalID, u); err != nil {
		return "", err
	}
	// A close running on the terminal ID is found by the creation too:
	// the store refuses a PENDING transaction while the terminal ID has a
	// PENDING close, as while it has a PENDING transaction (busy).
	return term.SerialNumber, nil
}

// busy is the answer when the store refused a transaction, a close or a
// (un)link because the terminal ID has a running transaction or close:
// WP30 or WP09 naming it (reason BATCH_CLOSE for a close). Read only
// after the refusal, it costs nothing when the terminal is free.
func (s *Service) busy(ctx context.Context, terminalID string) error {
	a, err := s.Store.ActiveTransaction(ctx, terminalID)
	if err != nil {
		a = nil
	}
	if e := wp30(a, s.Gateway); e != nil {
		return e
	}
	if a == nil {
		var e *instore.Error
		if err := s.closing(ctx, terminalID); errors.As(err, &e) {
			return e
		}
	}
	return wp09(a)
}

// wp09 is WP09 for a transaction running on the terminal (named, when
// known).
func wp09(active *instore.Transaction) *instore.Error {
	e := instore.Errorf(instore.WP09, "The terminal is processing a transaction.")
	e.Reason = instore.ReasonTransaction
	if active != nil {
		e.OnlineAPIRefID = active.ID
	}
	return e
}

// wp30 is the WP30 error when active (nil: none) was acknowledged by a
// device that has since gone offline, and nil otherwise.
func wp30(active *instore.Transaction, g instore.Gateway) *instore.Error {
	if active == nil || !active.Acknowledged() || g.Online(active.SerialNumber) {
		return nil
	}
	e := instore.Errorf(instore.WP30, "The terminal acknowledged the previous transaction, lost its connection and has not sent its result yet.")
	e.OnlineAPIRefID = active.ID
	return e
}

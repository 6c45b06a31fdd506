package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

// AuthenticateDevice checks a device's serial number and secret. A serial
// number no device can have (NUL, bytes that are not UTF-8, which
// PostgreSQL refuses) fails like an unknown one, without asking the store.
// A serial number and secret that passed before pass again without a read
// of the store (credentials.go): the device then returned has its serial
// number and model only.
func (s *Service) AuthenticateDevice(ctx context.Context, serial, secret string) (*instore.Device, error) {
	unauthorized := instore.Errorf(instore.EUnauthorized, "Unknown device or wrong secret.")
	if !instore.ValidSerialNumber(serial) || secret == "" || len(secret) > 255 {
		return nil, unauthorized
	}
	if d := s.creds.passed(serial, secret); d != nil {
		return d, nil
	}
	d, err := s.device(ctx, serial)
	if errors.Is(err, instore.ErrNotFound) {
		return nil, unauthorized
	} else if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	if s.SecretMatches == nil || !s.SecretMatches(secret, d.SecretHash) {
		return nil, unauthorized
	}
	s.creds.pass(d, secret)
	return d, nil
}

// DeviceWoken sends a device that is online on this node what the store
// says it is owed: its terminal ID or link code, the command of its
// transaction if it has not acknowledged it, every message owed to it. It
// is what a hello sends, and it is idempotent (a terminal acknowledges a
// command it knows again and never starts it twice; an owed message keeps
// its id). Another node that committed something for the device wakes the
// node holding its session with it (internal/cluster); the rescan of lost
// wake-ups runs it too. Its software update is left to the update sweep
// of the node holding the session.
func (s *Service) DeviceWoken(ctx context.Context, serial string) error {
	return s.sendOwed(ctx, serial, nil)
}

// sendOwed is the part of a hello (h set) or a wake-up (h nil) that
// sends the device what it may have missed: its terminal ID (or link
// code), then what it is owed for transactions other than its PENDING
// one, then that one's command if it has not acknowledged it, then what
// it is owed for that one (owed.go: a command never overtakes the cancel
// of a transaction the service ended).
func (s *Service) sendOwed(ctx context.Context, serial string, h *hello) error {
	var t *instore.Terminal
	var err error
	if h != nil && h.read {
		t, err = h.term, h.termErr
	} else {
		t, err = s.Store.TerminalBySerial(ctx, serial)
	}
	rows := h.rowsOf()
	switch {
	case err == nil:
		if err := s.Gateway.SendLinked(ctx, serial, t.TerminalID); err != nil {
			return err
		}
		// The command of its PENDING transaction (read first: see
		// cancelsBefore) goes after what it is owed for its other
		// transactions, before what it is owed for this one (the ECR's
		// cancel of a command not yet acknowledged).
		cmd := s.unacknowledged(ctx, t, rows)
		var es []*instore.Effect
		if rows == nil || !rows.noneOwed {
			if es, err = s.Store.OpenEffects(ctx, serial); err != nil {
				return fmt.Errorf("open effects: %w", err)
			}
		}
		ref := ""
		if cmd != nil {
			ref = cmd.ID
		}
		of, others := splitOwed(es, ref)
		if h != nil && mutant.On(mutant.OwedNotResentOnHello) {
			of, others = nil, nil
		}
		if !s.resendOwed(ctx, serial, others) {
			return nil // the session went away: the next hello sends the rest
		}
		if cmd != nil {
			err := s.Gateway.SendPayment(ctx, serial, cmd)
			if errors.Is(err, instore.ErrOffline) {
				return nil
			} else if err != nil {
				s.log().Warn("resend command", "ref", cmd.ID, "error", err)
			}
		}
		s.resendOwed(ctx, serial, of)
		s.closeOnHello(ctx, t, rows) // a close goes like a command (close.go)
		if h != nil {
			// Access API: finish, resend or deliver the terminal's software update.
			s.updateOnHello(ctx, t, *h)
		}
		return nil
	case errors.Is(err, instore.ErrNotFound):
		d, err := s.Store.Device(ctx, serial)
		if err != nil {
			return fmt.Errorf("device: %w", err)
		}
		code := d.LinkCode
		if code == "" {
			if code, err = s.assignLinkCode(ctx, serial); err != nil {
				return fmt.Errorf("link code: %w", err)
			}
		}
		if err := s.Gateway.SendLinkCode(ctx, serial, code); err != nil {
			return err
		}
		// Unlinked since, it may still run a transaction the service ended.
		es, err := s.Store.OpenEffects(ctx, serial)
		if err != nil {
			return fmt.Errorf("open effects: %w", err)
		}
		s.resendOwed(ctx, serial, es)
		return nil
	default:
		return fmt.Errorf("terminal by serial: %w", err)
	}
}

// transactionOf loads the transaction a device reports on; a report for a
// transaction that was not sent to that device is refused. The state this
// node last committed serves as a first guess even when other nodes
// change the store too: every change is a compare-and-set on the version,
// which reads the store again when the guess was stale, and no report is
// refused on a guess (a final state is never kept, only read).
func (s *Service) transactionOf(ctx context.Context, serial, ref string) (*instore.Transaction, error) {
	t := s.running.get(ref)
	if t == nil {
		var err error
		if t, err = s.Store.Transaction(ctx, ref); err != nil {
			return nil, fmt.Errorf("transaction: %w", err)
		}
	}
	if t.SerialNumber != serial {
		return nil, fmt.Errorf("transaction of another device: %w", instore.ErrNotFound)
	}
	return t, nil
}

// reportedOn is transactionOf for a report the terminal resends until it
// is confirmed: a report on a transaction the device does not have is
// logged (what says which) and answers nil, no transaction and no error,
// so that it is confirmed and ignored.
func (s *Service) reportedOn(ctx context.Context, serial, ref, what string) (*instore.Transaction, error) {
	t, err := s.transactionOf(ctx, serial, ref)
	if errors.Is(err, instore.ErrNotFound) {
		s.log().Warn(what, "ref", ref, "serialNumber", serial)
		return nil, nil
	}
	return t, err
}

// terminalOf loads the terminal ID of what (a print job, an update) a
// device reports on; a report on what was sent to another device is
// refused.
func (s *Service) terminalOf(ctx context.Context, serial, terminalID, what string) (*instore.Terminal, error) {
	t, err := s.Store.Terminal(ctx, terminalID)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if t.SerialNumber != serial {
		return nil, fmt.Errorf("%s of another device: %w", what, instore.ErrNotFound)
	}
	return t, nil
}

// TerminalAcknowledged records the ack: the purchase request answers and
// the deadline starts.
func (s *Service) TerminalAcknowledged(ctx context.Context, serial, ref string) error {
	known, err := s.transactionOf(ctx, serial, ref)
	if err != nil {
		return err
	}
	_, _, err = s.apply(ctx, ref, known, lifecycle.Event{Kind: instore.EventAcknowledged, At: s.now()})
	return err
}

// TerminalProgress records a stage the terminal reached; stages only move
// forward.
func (s *Service) TerminalProgress(ctx context.Context, serial, ref string, stage instore.Progress) error {
	if lifecycle.StageRank(stage) == 0 {
		return fmt.Errorf("unknown progress stage %q", stage)
	}
	known, err := s.transactionOf(ctx, serial, ref)
	if err != nil {
		return err
	}
	_, _, err = s.apply(ctx, ref, known, lifecycle.Event{Kind: instore.EventProgress, At: s.now(), Stage: stage})
	return err
}

// TerminalResult applies a terminal's final outcome, once (Next). A late
// APPROVED for a transaction the service already ended (WP25, WP36) is
// reversed on the terminal at once and the transaction ends REVERSED,
// keeping its error code, so no money is taken for a sale the ECR saw
// fail. It returns nil once the outcome is committed (or was before): the
// gateway then confirms.
func (s *Service) TerminalResult(ctx context.Context, serial string, r instore.TerminalResult) error {
	if r.StatusID < 0 || r.StatusID > instore.StatusWrongPIN {
		return fmt.Errorf("result with status %d is not a terminal outcome", r.StatusID)
	}
	t, err := s.reportedOn(ctx, serial, r.Ref, "result for an unknown transaction")
	if t == nil {
		return err // nil: nothing to apply it to; confirmed, so the terminal stops resending
	}
	if t.ResultMessageID == r.MessageID {
		return nil // a resent result, already applied
	}
	if err := instore.CheckTipAmount(t, r.StatusID, r.TipAmount); err != nil {
		// A terminal's bug, never a reason to lose its result: an approval
		// is stored and reversed on the terminal (lifecycle), any other
		// outcome stored without the tip.
		s.log().Error("terminal reported a tip the transaction does not allow", "ref", r.Ref, "serialNumber", serial, "error", err)
	}
	// An approved reversal, in time or late: the purchase's money went
	// back, so the original is REVERSED either way (apply's decide).
	_, _, err = s.apply(ctx, r.Ref, t, lifecycle.Event{Kind: instore.EventResult, At: s.now(), Result: &r})
	return err
}

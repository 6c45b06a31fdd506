package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
)

// view builds what the Online API shows of a terminal ID.
func (s *Service) view(ctx context.Context, t *instore.Terminal) (*instore.TerminalView, error) {
	v, _, err := s.viewRead(ctx, t)
	return v, err
}

// terminalRows are the rows view read besides the terminal's: a hello
// sends what they say (sendOwed) instead of reading them again. A nil row
// was not found; batchRead says whether PendingBatch was read at all
// (view skips it for a busy terminal).
type terminalRows struct {
	active    *instore.Transaction
	update    *instore.Update
	batch     *instore.Batch
	batchRead bool
}

// viewRead is view, with the rows it read.
func (s *Service) viewRead(ctx context.Context, t *instore.Terminal) (*instore.TerminalView, *terminalRows, error) {
	v := &instore.TerminalView{TerminalID: t.TerminalID, Linked: t.Linked(), LinkedAt: t.LinkedAt}
	rows := &terminalRows{}
	if t.Linked() {
		d, err := s.Store.Device(ctx, t.SerialNumber)
		if err != nil {
			return nil, nil, fmt.Errorf("device: %w", err)
		}
		serial, model, version := d.SerialNumber, d.Model, d.SoftwareVersion
		v.SerialNumber, v.Model, v.SoftwareVersion, v.LastSeenAt = &serial, &model, &version, d.LastSeenAt
		v.Online = s.Gateway.Online(d.SerialNumber)
	}
	active, err := s.Store.ActiveTransaction(ctx, t.TerminalID)
	switch {
	case err == nil:
		v.Busy, v.CurrentRefID = true, &active.ID
		rows.active = active
	case !errors.Is(err, instore.ErrNotFound):
		return nil, nil, fmt.Errorf("active transaction: %w", err)
	}
	u, err := s.Store.OpenUpdate(ctx, t.TerminalID)
	switch {
	case err == nil:
		if s.installs(u) {
			v.Busy, v.Updating = true, true
		}
		rows.update = u
	case !errors.Is(err, instore.ErrNotFound):
		return nil, nil, fmt.Errorf("open update: %w", err)
	}
	if !v.Busy {
		// A close running makes it busy as a transaction does (close.go).
		b, err := s.Store.PendingBatch(ctx, t.TerminalID)
		switch {
		case err == nil:
			v.Busy = true
			rows.batch = b
		case !errors.Is(err, instore.ErrNotFound):
			return nil, nil, fmt.Errorf("pending close: %w", err)
		}
		rows.batchRead = true
	}
	return v, rows, nil
}

// Terminals lists the merchant's terminal IDs.
func (s *Service) Terminals(ctx context.Context, p *instore.Principal) ([]*instore.TerminalView, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	ts, err := s.Store.Terminals(ctx, p.MerchantID)
	if err != nil {
		return nil, fmt.Errorf("terminals: %w", err)
	}
	out := make([]*instore.TerminalView, 0, len(ts))
	for _, t := range ts {
		v, err := s.view(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Terminal shows one of the merchant's terminal IDs. Errors: WP03, WP16.
func (s *Service) Terminal(ctx context.Context, p *instore.Principal, terminalID string) (*instore.TerminalView, error) {
	if !instore.ValidTerminalID(terminalID) {
		return nil, &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.", Fields: []instore.FieldError{{Field: "terminalId", Message: "must be 8 digits"}}}
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	t, err := s.ownTerminal(ctx, p, terminalID)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, t)
}

// OwnTerminal returns one of the merchant's terminal IDs (WP03, WP16), for
// surfaces that act on a terminal outside the transaction life (sandbox).
func (s *Service) OwnTerminal(ctx context.Context, p *instore.Principal, terminalID string) (*instore.Terminal, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	return s.ownTerminal(ctx, p, terminalID)
}

// Link binds the device showing req.LinkCode to req.TerminalID. Relinking
// replaces the old binding on both sides: the terminal ID's previous device
// shows a new link code, the device's previous terminal ID is unlinked.
// Errors, in order: validation, WP03, WP16, link-code-invalid, WP09.
func (s *Service) Link(ctx context.Context, p *instore.Principal, req *instore.LinkRequest) (*instore.TerminalView, error) {
	t, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	d, err := s.Store.DeviceByLinkCode(ctx, req.LinkCode)
	if errors.Is(err, instore.ErrNotFound) || err == nil && d.CustomerID != "" && d.CustomerID != t.CustomerID {
		return nil, instore.Errorf(instore.ELinkCodeInvalid, "No terminal shows this link code.")
	} else if err != nil {
		return nil, fmt.Errorf("device by link code: %w", err)
	}
	at := s.now()
	linked := *t
	linked.SerialNumber, linked.LinkedAt = d.SerialNumber, &at
	var evs []instore.OutboxEvent
	if ev, ok := s.terminalEvent(ctx, &linked, instore.EventTerminalLinked, nil); ok {
		evs = append(evs, ev)
	}
	prevSerial, _, err := s.Store.LinkTerminal(ctx, t.TerminalID, d.SerialNumber, at, evs...)
	if errors.Is(err, instore.ErrConflict) {
		return nil, s.busy(ctx, t.TerminalID)
	} else if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	s.eventsWritten()
	if err := s.Gateway.SendLinked(ctx, d.SerialNumber, t.TerminalID); err != nil && !errors.Is(err, instore.ErrOffline) {
		s.log().Warn("send linked", "serialNumber", d.SerialNumber, "error", err)
	}
	if prevSerial != "" && prevSerial != d.SerialNumber {
		s.showLinkCode(ctx, prevSerial)
	}
	t, err = s.Store.Terminal(ctx, t.TerminalID)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return s.view(ctx, t)
}

// Unlink removes the binding of a terminal ID; its device shows a new link
// code. Errors, in order: validation, WP03, WP16, WP02, WP09.
func (s *Service) Unlink(ctx context.Context, p *instore.Principal, req *instore.TerminalRequest) (*instore.TerminalView, error) {
	t, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	unlinked := *t
	unlinked.SerialNumber, unlinked.LinkedAt = "", nil
	var evs []instore.OutboxEvent
	if ev, ok := s.terminalEvent(ctx, &unlinked, instore.EventTerminalUnlinked, nil); ok {
		evs = append(evs, ev)
	}
	serial, err := s.Store.UnlinkTerminal(ctx, t.TerminalID, evs...)
	switch {
	case errors.Is(err, instore.ErrNotFound):
		return nil, instore.Errorf(instore.WP02, "The terminal ID is not linked to a terminal.")
	case errors.Is(err, instore.ErrConflict):
		return nil, s.busy(ctx, t.TerminalID)
	case err != nil:
		return nil, fmt.Errorf("unlink: %w", err)
	}
	s.eventsWritten()
	s.showLinkCode(ctx, serial)
	t, err = s.Store.Terminal(ctx, t.TerminalID)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return s.view(ctx, t)
}

// showLinkCode gives an unlinked device a fresh link code and tells it.
func (s *Service) showLinkCode(ctx context.Context, serial string) {
	code, err := s.assignLinkCode(ctx, serial)
	if err != nil {
		s.log().Error("assign link code", "serialNumber", serial, "error", err)
		return
	}
	if err := s.Gateway.SendLinkCode(ctx, serial, code); err != nil && !errors.Is(err, instore.ErrOffline) {
		s.log().Warn("send link code", "serialNumber", serial, "error", err)
	}
}

// assignLinkCode stores a new random 6-digit code unique among devices.
func (s *Service) assignLinkCode(ctx context.Context, serial string) (string, error) {
	for range 20 {
		var b [8]byte // uniform to within 2⁻⁴⁴
		s.random(b[:])
		code := fmt.Sprintf("%06d", binary.BigEndian.Uint64(b[:])%1000000)
		err := s.Store.SetLinkCode(ctx, serial, code)
		if errors.Is(err, instore.ErrConflict) {
			continue
		}
		return code, err
	}
	return "", errors.New("no free link code after 20 tries")
}

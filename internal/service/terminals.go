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
	return s.viewRead(ctx, t)
}

// terminalRows are the rows a hello read besides the terminal's
// (DeviceSessions): it sends what they say (sendOwed) instead of reading
// them again. A nil row was not found; batchID is the PENDING close's id
// ("" none), sent to batchSerial; noneOwed says the read found no open
// effect for the device.
type terminalRows struct {
	active               *instore.Transaction
	update               *instore.Update
	batchID, batchSerial string
	noneOwed             bool
}

// viewRead is view: it reads the device, the active transaction, the
// unfinished update and, for a terminal not busy yet, the pending close.
func (s *Service) viewRead(ctx context.Context, t *instore.Terminal) (*instore.TerminalView, error) {
	var d *instore.Device
	if t.Linked() {
		var err error
		if d, err = s.Store.Device(ctx, t.SerialNumber); err != nil {
			return nil, fmt.Errorf("device: %w", err)
		}
	}
	activeID := ""
	active, err := s.Store.ActiveTransaction(ctx, t.TerminalID)
	switch {
	case err == nil:
		activeID = active.ID
	case !errors.Is(err, instore.ErrNotFound):
		return nil, fmt.Errorf("active transaction: %w", err)
	}
	u, err := s.Store.OpenUpdate(ctx, t.TerminalID)
	if errors.Is(err, instore.ErrNotFound) {
		u = nil
	} else if err != nil {
		return nil, fmt.Errorf("open update: %w", err)
	}
	closing := false
	if activeID == "" && !s.installs(u) {
		// A close running makes it busy as a transaction does (close.go).
		_, err := s.Store.PendingBatch(ctx, t.TerminalID)
		switch {
		case err == nil:
			closing = true
		case !errors.Is(err, instore.ErrNotFound):
			return nil, fmt.Errorf("pending close: %w", err)
		}
	}
	v := s.viewOf(t, d, activeID, u, closing)
	if d != nil {
		v.Online = s.Gateway.Online(d.SerialNumber)
	}
	return v, nil
}

// viewOf is the view of the terminal ID t with its device d (nil when
// unlinked), the id of its PENDING transaction (""), its unfinished update
// u (nil) and whether a close runs; Online is left false.
func (s *Service) viewOf(t *instore.Terminal, d *instore.Device, activeID string, u *instore.Update, closing bool) *instore.TerminalView {
	v := &instore.TerminalView{TerminalID: t.TerminalID, Linked: t.Linked(), LinkedAt: t.LinkedAt}
	if d != nil {
		serial, model, version := d.SerialNumber, d.Model, d.SoftwareVersion
		v.SerialNumber, v.Model, v.SoftwareVersion, v.LastSeenAt = &serial, &model, &version, d.LastSeenAt
	}
	if activeID != "" {
		v.Busy, v.CurrentRefID = true, &activeID
	}
	if s.installs(u) {
		v.Busy, v.Updating = true, true
	}
	v.Busy = v.Busy || closing
	return v
}

// Terminals lists the merchant's terminal IDs.
func (s *Service) Terminals(ctx context.Context, p *instore.Principal) ([]*instore.TerminalView, error) {
	return merchantsAll(ctx, s, p, "terminals", s.Store.Terminals, func(t *instore.Terminal) (*instore.TerminalView, error) {
		return s.view(ctx, t)
	})
}

// Terminal shows one of the merchant's terminal IDs. Errors: WP03, WP16.
func (s *Service) Terminal(ctx context.Context, p *instore.Principal, terminalID string) (*instore.TerminalView, error) {
	t, err := s.terminalOp(ctx, p, terminalIDRequest(terminalID), terminalID)
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

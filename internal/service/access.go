package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// forbidden answers a request for something that is not the caller's
// customer's, whether it exists or not.
func forbidden(what string) error {
	return instore.Errorf(instore.EForbidden, "The %s is not one of this customer's.", what)
}

// ownCustomer refuses a customerId that is not the principal's.
func ownCustomer(p *instore.Principal, customerID string) error {
	if p.CustomerID == "" || customerID != p.CustomerID {
		return forbidden("customerId")
	}
	return nil
}

// customerTerminal loads a terminal ID of the principal's customer;
// forbidden when it is another customer's or does not exist.
func (s *Service) customerTerminal(ctx context.Context, p *instore.Principal, terminalID string) (*instore.Terminal, error) {
	t, err := s.Store.Terminal(ctx, terminalID)
	if errors.Is(err, instore.ErrNotFound) || err == nil && (p.CustomerID == "" || t.CustomerID != p.CustomerID) {
		return nil, forbidden("terminal ID")
	} else if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return t, nil
}

// AllocateTerminal allocates a new terminal ID (eight digits, unique across
// the service, never reused) to the principal's customer, optionally for
// one of its merchants (who can then use it on the Online API) and bound
// to one of its devices (which then shows it). Errors, in order:
// validation, forbidden (customerId, merchantId, serialNumber), validation
// (model differs from the device's), conflict (the device is linked to
// another terminal ID).
func (s *Service) AllocateTerminal(ctx context.Context, p *instore.Principal, req *instore.TerminalIDRequest) (*instore.AllocatedTerminal, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ownCustomer(p, req.CustomerID); err != nil {
		return nil, err
	}
	t := &instore.Terminal{CustomerID: p.CustomerID, CreatedAt: s.now()}
	if req.MerchantID != "" {
		m, err := s.Store.Merchant(ctx, req.MerchantID)
		if errors.Is(err, instore.ErrNotFound) || err == nil && m.CustomerID != p.CustomerID {
			return nil, forbidden("merchantId")
		} else if err != nil {
			return nil, fmt.Errorf("merchant: %w", err)
		}
		t.MerchantID = m.ID
	}
	model := req.Model
	if req.SerialNumber != "" {
		d, err := s.Store.Device(ctx, req.SerialNumber)
		if errors.Is(err, instore.ErrNotFound) || err == nil && d.CustomerID != "" && d.CustomerID != p.CustomerID {
			return nil, forbidden("serialNumber")
		} else if err != nil {
			return nil, fmt.Errorf("device: %w", err)
		}
		if model != "" && model != d.Model {
			return nil, &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.",
				Fields: []instore.FieldError{{Field: "/model", Message: "is not the model of the device (" + d.Model + ")"}}}
		}
		model = d.Model
		if _, err := s.Store.TerminalBySerial(ctx, d.SerialNumber); err == nil {
			return nil, instore.Errorf(instore.EConflict, "The device is linked to another terminal ID; unlink it first (Online API POST /terminal/unlink).")
		} else if !errors.Is(err, instore.ErrNotFound) {
			return nil, fmt.Errorf("terminal by serial: %w", err)
		}
		t.SerialNumber, t.LinkedAt = d.SerialNumber, &t.CreatedAt
	}
	if err := s.Store.AllocateTerminal(ctx, t, model); err != nil {
		if errors.Is(err, instore.ErrConflict) && t.SerialNumber != "" {
			return nil, instore.Errorf(instore.EConflict, "The device was linked to another terminal ID meanwhile.")
		}
		return nil, fmt.Errorf("allocate terminal ID: %w", err)
	}
	if t.SerialNumber != "" {
		if err := s.Gateway.SendLinked(ctx, t.SerialNumber, t.TerminalID); err != nil && !errors.Is(err, instore.ErrOffline) {
			s.log().Warn("send linked", "serialNumber", t.SerialNumber, "error", err)
		}
	}
	return &instore.AllocatedTerminal{Terminal: t, Model: model}, nil
}

// TerminalInfo shows one of the customer's terminal IDs: its binding, the
// linked device's model, software version (as reported at its last hello
// or installed since), whether it is online and when it was last seen, the
// minimum version its model's mandatory packages set, and its updates.
// Errors, in order: validation, forbidden.
func (s *Service) TerminalInfo(ctx context.Context, p *instore.Principal, req *instore.TerminalRequest) (*instore.TerminalInfo, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	t, err := s.customerTerminal(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	info := &instore.TerminalInfo{Terminal: t}
	// The updates are read before the device: a terminal's new software
	// version is stored before its update reads INSTALLED, so in this order
	// an INSTALLED update is never shown beside the old version. One read
	// for both fields, so that they come from the same moment: at most one
	// update of a terminal is unfinished and no other can be created while
	// it is, so the unfinished one is always the newest.
	if info.LastUpdate, err = s.Store.LatestUpdate(ctx, t.TerminalID); errors.Is(err, instore.ErrNotFound) {
		info.LastUpdate = nil
	} else if err != nil {
		return nil, fmt.Errorf("latest update: %w", err)
	}
	if info.LastUpdate != nil && !info.LastUpdate.Final() {
		info.PendingUpdate = info.LastUpdate
	}
	if info.Model, err = s.Store.TerminalModel(ctx, t.TerminalID); err != nil {
		return nil, fmt.Errorf("terminal model: %w", err)
	}
	if t.Linked() {
		d, err := s.Store.Device(ctx, t.SerialNumber)
		if err != nil {
			return nil, fmt.Errorf("device: %w", err)
		}
		info.Device, info.Model = d, d.Model
		info.Online = s.Gateway.Online(d.SerialNumber)
		ps, err := s.Store.Packages(ctx, t.CustomerID, d.Model)
		if err != nil {
			return nil, fmt.Errorf("packages: %w", err)
		}
		info.MinSoftwareVersion = instore.MinVersion(ps)
	}
	return info, nil
}

// Packages lists the packages of a model the customer may install (its own
// and those for every customer), newest first; an unknown model has none.
// Errors: forbidden (customerId).
func (s *Service) Packages(ctx context.Context, p *instore.Principal, customerID, model string) ([]*instore.Package, error) {
	if err := ownCustomer(p, customerID); err != nil {
		return nil, err
	}
	if !instore.ValidModel(model) {
		return []*instore.Package{}, nil
	}
	ps, err := s.Store.Packages(ctx, p.CustomerID, model)
	if err != nil {
		return nil, fmt.Errorf("packages: %w", err)
	}
	return ps, nil
}

// CreateUpdate schedules the installation of a package on the device of
// one of the customer's terminal IDs. It is delivered over the device's
// session once the device is online, idle and past notBefore. Errors, in
// order: validation, forbidden (terminalId, packageId), WP01 (no device
// linked), validation (the package is for another model), conflict (an
// unfinished update exists).
func (s *Service) CreateUpdate(ctx context.Context, p *instore.Principal, req *instore.UpdateRequest) (*instore.Update, error) {
	notBefore, err := req.Validate()
	if err != nil {
		return nil, err
	}
	t, err := s.customerTerminal(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	pkg, err := s.Store.Package(ctx, req.PackageID)
	if errors.Is(err, instore.ErrNotFound) || err == nil && pkg.CustomerID != "" && pkg.CustomerID != p.CustomerID {
		return nil, forbidden("packageId")
	} else if err != nil {
		return nil, fmt.Errorf("package: %w", err)
	}
	if !t.Linked() {
		return nil, instore.Errorf(instore.WP01, "The terminal ID has no linked terminal.")
	}
	d, err := s.Store.Device(ctx, t.SerialNumber)
	if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	if pkg.Model != d.Model {
		return nil, &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.",
			Fields: []instore.FieldError{{Field: "/packageId", Message: "is a package for the " + pkg.Model + " model; the terminal is a " + d.Model}}}
	}
	now := s.now()
	u, st := lifecycle.NextUpdate(lifecycle.UpdateNew, instore.Update{ID: s.newUpdateID(now), TerminalID: t.TerminalID, PackageID: pkg.ID,
		NotBefore: notBefore, CreatedAt: now}, lifecycle.UpdateEvent{Kind: lifecycle.UpdateRequested, At: now})
	if err := s.Store.CreateUpdate(ctx, &u, s.updateEvent(ctx, &u, t.MerchantID)...); errors.Is(err, instore.ErrConflict) {
		return nil, instore.Errorf(instore.EConflict, "The terminal has an unfinished update (SCHEDULED or DOWNLOADING); wait until it is INSTALLED or FAILED.")
	} else if err != nil {
		return nil, fmt.Errorf("create update: %w", err)
	}
	s.eventsWritten()
	created := u
	if st.TryDeliver {
		s.deliverUpdate(context.WithoutCancel(ctx), t.TerminalID)
	}
	return &created, nil
}

package instore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The Access API 2.0 operations: terminal-ID allocation, terminal
// information, the package catalogue and software updates. Access API
// credentials belong to a customer (Principal.CustomerID) and see only its
// data: anything else, existing or not, answers 403 forbidden, so a caller
// learns nothing about other customers.

// Statuses of a software update, in the order of its life.
const (
	UpdateScheduled   = "SCHEDULED"
	UpdateDownloading = "DOWNLOADING"
	UpdateInstalled   = "INSTALLED"
	UpdateFailed      = "FAILED"
)

// Update is a software update of a terminal ID's device: SCHEDULED until it
// is delivered and the device reports DOWNLOADING, then INSTALLED (with the
// version the device reports) or FAILED (with its reason). A terminal ID has
// at most one unfinished (SCHEDULED or DOWNLOADING) update.
type Update struct {
	ID         string
	TerminalID string
	PackageID  string
	Status     string
	// Reason says why an update FAILED.
	Reason string
	// NotBefore is the earliest time it may be delivered (nil: at once).
	NotBefore *time.Time
	// SoftwareVersion is the version the device reported when INSTALLED.
	SoftwareVersion string
	// DeliveredAt is when the update was last handed to the device's
	// session while SCHEDULED (nil: not yet, or to be sent again).
	DeliveredAt *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// UpdateWire is a software update as the APIs show it: the Access API, and
// the data of an update.status event.
type UpdateWire struct {
	UpdateID        string     `json:"updateId"`
	TerminalID      string     `json:"terminalId"`
	PackageID       string     `json:"packageId"`
	Status          string     `json:"status"`
	Reason          *string    `json:"reason"`
	SoftwareVersion *string    `json:"softwareVersion"`
	NotBefore       *time.Time `json:"notBefore"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
}

// Wire renders u as the APIs show it (nil for nil).
func (u *Update) Wire() *UpdateWire {
	if u == nil {
		return nil
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &UpdateWire{
		UpdateID: u.ID, TerminalID: u.TerminalID, PackageID: u.PackageID, Status: u.Status,
		Reason: opt(u.Reason), SoftwareVersion: opt(u.SoftwareVersion), NotBefore: u.NotBefore,
		CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt,
	}
}

// Final reports whether the update ended (INSTALLED or FAILED).
func (u *Update) Final() bool { return u.Status == UpdateInstalled || u.Status == UpdateFailed }

// TerminalIDRequest is the body of POST /getTerminalId.
type TerminalIDRequest struct {
	CustomerID   string `json:"customerId"`
	MerchantID   string `json:"merchantId"`
	SerialNumber string `json:"serialNumber"`
	Model        string `json:"model"`
}

// Validate checks the fields' shapes.
func (r *TerminalIDRequest) Validate() error {
	var f fields
	if r.CustomerID == "" {
		f.add("/customerId", "is required")
	} else if !accountPattern.MatchString(r.CustomerID) {
		f.add("/customerId", "is not a customer id")
	}
	if r.MerchantID != "" && !accountPattern.MatchString(r.MerchantID) {
		f.add("/merchantId", "is not a merchant id")
	}
	if r.SerialNumber != "" && !ValidSerialNumber(r.SerialNumber) {
		f.add("/serialNumber", "must be 1-64 of A-Z a-z 0-9 . _ -")
	}
	if r.Model != "" && !ValidModel(r.Model) {
		f.add("/model", "must be one of countertop, mobile, pinpad")
	}
	return f.err()
}

// UpdateRequest is the body of POST /terminal/createUpdate.
type UpdateRequest struct {
	TerminalID string `json:"terminalId"`
	PackageID  string `json:"packageId"`
	// NotBefore is an RFC 3339 time, optional.
	NotBefore string `json:"notBefore"`
}

// Validate checks the fields' shapes and returns notBefore parsed (nil when
// absent).
func (r *UpdateRequest) Validate() (*time.Time, error) {
	var f fields
	checkTerminalID(&f, r.TerminalID)
	if r.PackageID == "" {
		f.add("/packageId", "is required")
	} else if !ValidPackageID(r.PackageID) {
		f.add("/packageId", "is not a packageId")
	}
	var notBefore *time.Time
	if r.NotBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, r.NotBefore)
		if err != nil {
			f.add("/notBefore", "must be an RFC 3339 time such as 2026-03-02T22:00:00Z")
		} else {
			t = t.UTC().Truncate(time.Microsecond)
			notBefore = &t
		}
	}
	return notBefore, f.err()
}

// AllocatedTerminal is a terminal ID as POST /getTerminalId answers it.
type AllocatedTerminal struct {
	*Terminal
	// Model is the model of the bound device, or the one the request
	// declared ("" if neither).
	Model string
}

// TerminalInfo is a terminal ID as POST /getTerminalInfo answers it.
type TerminalInfo struct {
	Terminal *Terminal
	// Device is the linked device (nil while unlinked).
	Device *Device
	// Model is the linked device's model, or the one declared when the
	// terminal ID was allocated ("" if neither).
	Model  string
	Online bool
	// MinSoftwareVersion is the version the newest mandatory package of the
	// device's model sets ("" when none).
	MinSoftwareVersion string
	// PendingUpdate is the unfinished update (nil if none); LastUpdate the
	// latest of any status (nil if there never was one).
	PendingUpdate, LastUpdate *Update
}

// forbidden answers a request for something that is not the caller's
// customer's, whether it exists or not.
func forbidden(what string) error {
	return Errorf(EForbidden, "The %s is not one of this customer's.", what)
}

// ownCustomer refuses a customerId that is not the principal's.
func ownCustomer(p *Principal, customerID string) error {
	if p.CustomerID == "" || customerID != p.CustomerID {
		return forbidden("customerId")
	}
	return nil
}

// customerTerminal loads a terminal ID of the principal's customer;
// forbidden when it is another customer's or does not exist.
func (s *Service) customerTerminal(ctx context.Context, p *Principal, terminalID string) (*Terminal, error) {
	t, err := s.Store.Terminal(ctx, terminalID)
	if errors.Is(err, ErrNotFound) || err == nil && (p.CustomerID == "" || t.CustomerID != p.CustomerID) {
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
func (s *Service) AllocateTerminal(ctx context.Context, p *Principal, req *TerminalIDRequest) (*AllocatedTerminal, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := ownCustomer(p, req.CustomerID); err != nil {
		return nil, err
	}
	t := &Terminal{CustomerID: p.CustomerID, CreatedAt: s.now()}
	if req.MerchantID != "" {
		m, err := s.Store.Merchant(ctx, req.MerchantID)
		if errors.Is(err, ErrNotFound) || err == nil && m.CustomerID != p.CustomerID {
			return nil, forbidden("merchantId")
		} else if err != nil {
			return nil, fmt.Errorf("merchant: %w", err)
		}
		t.MerchantID = m.ID
	}
	model := req.Model
	if req.SerialNumber != "" {
		d, err := s.Store.Device(ctx, req.SerialNumber)
		if errors.Is(err, ErrNotFound) || err == nil && d.CustomerID != "" && d.CustomerID != p.CustomerID {
			return nil, forbidden("serialNumber")
		} else if err != nil {
			return nil, fmt.Errorf("device: %w", err)
		}
		if model != "" && model != d.Model {
			return nil, &Error{Code: EValidation, Detail: "The request is not valid; see errors.",
				Fields: []FieldError{{Field: "/model", Message: "is not the model of the device (" + d.Model + ")"}}}
		}
		model = d.Model
		if _, err := s.Store.TerminalBySerial(ctx, d.SerialNumber); err == nil {
			return nil, Errorf(EConflict, "The device is linked to another terminal ID; unlink it first (Online API POST /terminal/unlink).")
		} else if !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("terminal by serial: %w", err)
		}
		t.SerialNumber, t.LinkedAt = d.SerialNumber, &t.CreatedAt
	}
	if err := s.Store.AllocateTerminal(ctx, t, model); err != nil {
		if errors.Is(err, ErrConflict) && t.SerialNumber != "" {
			return nil, Errorf(EConflict, "The device was linked to another terminal ID meanwhile.")
		}
		return nil, fmt.Errorf("allocate terminal ID: %w", err)
	}
	if t.SerialNumber != "" {
		if err := s.Gateway.SendLinked(ctx, t.SerialNumber, t.TerminalID); err != nil && !errors.Is(err, ErrOffline) {
			s.log().Warn("send linked", "serialNumber", t.SerialNumber, "error", err)
		}
	}
	return &AllocatedTerminal{Terminal: t, Model: model}, nil
}

// TerminalInfo shows one of the customer's terminal IDs: its binding, the
// linked device's model, software version (as reported at its last hello
// or installed since), whether it is online and when it was last seen, the
// minimum version its model's mandatory packages set, and its updates.
// Errors, in order: validation, forbidden.
func (s *Service) TerminalInfo(ctx context.Context, p *Principal, req *TerminalRequest) (*TerminalInfo, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	t, err := s.customerTerminal(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	info := &TerminalInfo{Terminal: t}
	// The updates are read before the device: a terminal's new software
	// version is stored before its update reads INSTALLED, so in this order
	// an INSTALLED update is never shown beside the old version. One read
	// for both fields, so that they come from the same moment: at most one
	// update of a terminal is unfinished and no other can be created while
	// it is, so the unfinished one is always the newest.
	if info.LastUpdate, err = s.Store.LatestUpdate(ctx, t.TerminalID); errors.Is(err, ErrNotFound) {
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
		info.MinSoftwareVersion = MinVersion(ps)
	}
	return info, nil
}

// Packages lists the packages of a model the customer may install (its own
// and those for every customer), newest first; an unknown model has none.
// Errors: forbidden (customerId).
func (s *Service) Packages(ctx context.Context, p *Principal, customerID, model string) ([]*Package, error) {
	if err := ownCustomer(p, customerID); err != nil {
		return nil, err
	}
	if !ValidModel(model) {
		return []*Package{}, nil
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
func (s *Service) CreateUpdate(ctx context.Context, p *Principal, req *UpdateRequest) (*Update, error) {
	notBefore, err := req.Validate()
	if err != nil {
		return nil, err
	}
	t, err := s.customerTerminal(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	pkg, err := s.Store.Package(ctx, req.PackageID)
	if errors.Is(err, ErrNotFound) || err == nil && pkg.CustomerID != "" && pkg.CustomerID != p.CustomerID {
		return nil, forbidden("packageId")
	} else if err != nil {
		return nil, fmt.Errorf("package: %w", err)
	}
	if !t.Linked() {
		return nil, Errorf(WP01, "The terminal ID has no linked terminal.")
	}
	d, err := s.Store.Device(ctx, t.SerialNumber)
	if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	if pkg.Model != d.Model {
		return nil, &Error{Code: EValidation, Detail: "The request is not valid; see errors.",
			Fields: []FieldError{{Field: "/packageId", Message: "is a package for the " + pkg.Model + " model; the terminal is a " + d.Model}}}
	}
	now := s.now()
	u := &Update{ID: newUpdateID(now), TerminalID: t.TerminalID, PackageID: pkg.ID, Status: UpdateScheduled,
		NotBefore: notBefore, CreatedAt: now, UpdatedAt: now}
	if err := s.Store.CreateUpdate(s.updateEventCtx(ctx, u, t.MerchantID), u); errors.Is(err, ErrConflict) {
		return nil, Errorf(EConflict, "The terminal has an unfinished update (SCHEDULED or DOWNLOADING); wait until it is INSTALLED or FAILED.")
	} else if err != nil {
		return nil, fmt.Errorf("create update: %w", err)
	}
	s.eventsWritten()
	created := *u
	s.deliverUpdate(context.WithoutCancel(ctx), t.TerminalID)
	return &created, nil
}

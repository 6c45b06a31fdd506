package instore

import (
	"time"
)

// The Access API 2.0 operations: terminal-ID allocation, terminal
// information, the package catalogue and software updates. Access API
// credentials belong to a customer (Principal.CustomerID) and see only its
// data: anything else, existing or not, answers 403 forbidden, so a caller
// learns nothing about other customers.

// UpdateStatus is the status of a software update.
type UpdateStatus string

// Statuses of a software update, in the order of its life.
const (
	UpdateScheduled   UpdateStatus = "SCHEDULED"
	UpdateDownloading UpdateStatus = "DOWNLOADING"
	UpdateInstalled   UpdateStatus = "INSTALLED"
	UpdateFailed      UpdateStatus = "FAILED"
)

// Update is a software update of a terminal ID's device: SCHEDULED until it
// is delivered and the device reports DOWNLOADING, then INSTALLED (with the
// version the device reports) or FAILED (with its reason). A terminal ID has
// at most one unfinished (SCHEDULED or DOWNLOADING) update.
type Update struct {
	ID         string
	TerminalID string
	PackageID  string
	Status     UpdateStatus
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
	UpdateID        string       `json:"updateId"`
	TerminalID      string       `json:"terminalId"`
	PackageID       string       `json:"packageId"`
	Status          UpdateStatus `json:"status"`
	Reason          *string      `json:"reason"`
	SoftwareVersion *string      `json:"softwareVersion"`
	NotBefore       *time.Time   `json:"notBefore"`
	CreatedAt       time.Time    `json:"createdAt"`
	UpdatedAt       time.Time    `json:"updatedAt"`
}

// Wire renders u as the APIs show it (nil for nil).
func (u *Update) Wire() *UpdateWire {
	if u == nil {
		return nil
	}
	return &UpdateWire{
		UpdateID: u.ID, TerminalID: u.TerminalID, PackageID: u.PackageID, Status: u.Status,
		Reason: optional(u.Reason), SoftwareVersion: optional(u.SoftwareVersion), NotBefore: u.NotBefore,
		CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt,
	}
}

// optional is s as a member the wire shows as null when it is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
	var f FieldErrors
	if r.CustomerID == "" {
		f.Add("/customerId", "is required")
	} else if !accountPattern.MatchString(r.CustomerID) {
		f.Add("/customerId", "is not a customer id")
	}
	if r.MerchantID != "" && !accountPattern.MatchString(r.MerchantID) {
		f.Add("/merchantId", "is not a merchant id")
	}
	if r.SerialNumber != "" && !ValidSerialNumber(r.SerialNumber) {
		f.Add("/serialNumber", "must be 1-64 of A-Z a-z 0-9 . _ -")
	}
	if r.Model != "" && !ValidModel(r.Model) {
		f.Add("/model", "must be one of countertop, mobile, pinpad")
	}
	return f.Err()
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
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	if r.PackageID == "" {
		f.Add("/packageId", "is required")
	} else if !ValidPackageID(r.PackageID) {
		f.Add("/packageId", "is not a packageId")
	}
	var notBefore *time.Time
	if r.NotBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, r.NotBefore)
		if err != nil {
			f.Add("/notBefore", "must be an RFC 3339 time such as 2026-03-02T22:00:00Z")
		} else {
			t = t.UTC().Truncate(time.Microsecond)
			notBefore = &t
		}
	}
	return notBefore, f.Err()
}

// AllocatedTerminal is a terminal ID as POST /getTerminalId answers it.
type AllocatedTerminal struct {
	*Terminal
	// Model is the model of the bound device, or the one the request
	// declared ("" if neither).
	Model string
}

// TerminalIDWire is the members the Access API's answers about a terminal
// ID begin with (api/access-api.yaml, schemas AllocatedTerminal and
// TerminalInfo): the terminal ID, its customer and merchant, and the serial
// number and model of its device; null when there is none.
type TerminalIDWire struct {
	TerminalID   string  `json:"terminalId"`
	CustomerID   string  `json:"customerId"`
	MerchantID   *string `json:"merchantId"`
	SerialNumber *string `json:"serialNumber"`
	Model        *string `json:"model"`
}

// terminalIDWire renders t, with serialNumber and model, as the Access API
// shows it.
func terminalIDWire(t *Terminal, serialNumber, model string) TerminalIDWire {
	return TerminalIDWire{TerminalID: t.TerminalID, CustomerID: t.CustomerID, MerchantID: optional(t.MerchantID),
		SerialNumber: optional(serialNumber), Model: optional(model)}
}

// AllocatedTerminalWire is a terminal ID as POST /getTerminalId shows it
// (api/access-api.yaml, schema AllocatedTerminal).
type AllocatedTerminalWire struct {
	TerminalIDWire
	CreatedAt time.Time `json:"createdAt"`
}

// Wire renders a as POST /getTerminalId shows it.
func (a *AllocatedTerminal) Wire() *AllocatedTerminalWire {
	return &AllocatedTerminalWire{TerminalIDWire: terminalIDWire(a.Terminal, a.SerialNumber, a.Model), CreatedAt: a.CreatedAt}
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

// TerminalInfoWire is a terminal ID as POST /getTerminalInfo shows it
// (api/access-api.yaml, schema TerminalInfo).
type TerminalInfoWire struct {
	// TerminalIDWire's SerialNumber is the linked device's.
	TerminalIDWire
	SoftwareVersion    *string     `json:"softwareVersion"`
	MinSoftwareVersion *string     `json:"minSoftwareVersion"`
	Linked             bool        `json:"linked"`
	Online             bool        `json:"online"`
	LastSeenAt         *time.Time  `json:"lastSeenAt"`
	PendingUpdate      *UpdateWire `json:"pendingUpdate"`
	LastUpdate         *UpdateWire `json:"lastUpdate"`
}

// Wire renders info as POST /getTerminalInfo shows it.
func (info *TerminalInfo) Wire() *TerminalInfoWire {
	out := &TerminalInfoWire{
		TerminalIDWire: terminalIDWire(info.Terminal, "", info.Model), MinSoftwareVersion: optional(info.MinSoftwareVersion),
		Linked: info.Terminal.Linked(), Online: info.Online,
		PendingUpdate: info.PendingUpdate.Wire(), LastUpdate: info.LastUpdate.Wire(),
	}
	if d := info.Device; d != nil {
		out.SerialNumber, out.SoftwareVersion, out.LastSeenAt = optional(d.SerialNumber), optional(d.SoftwareVersion), d.LastSeenAt
	}
	return out
}

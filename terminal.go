package instore

import (
	"slices"
	"time"
)

// Device models. Real models differ, and so do the virtual ones: the
// countertop model has a printer, the mobile model a printer and a battery
// (LOW_BATTERY possible), the PIN pad no printer (print answers ERROR).
const (
	ModelCountertop = "countertop"
	ModelMobile     = "mobile"
	ModelPINPad     = "pinpad"
)

// Models lists the device models in the demo's order.
var Models = []string{ModelCountertop, ModelMobile, ModelPINPad}

// ModelHasPrinter reports whether devices of model m have a printer: every
// model but the PIN pad. A print on one without answers ERROR.
func ModelHasPrinter(m string) bool { return m != ModelPINPad }

// ValidModel reports whether m is a known device model.
func ValidModel(m string) bool { return slices.Contains(Models, m) }

// Device is a physical or virtual payment terminal, known by its serial
// number and authenticated on the gateway by a device secret (stored as a
// digest). While no terminal ID is linked to it, it shows LinkCode.
type Device struct {
	SerialNumber    string     `json:"serialNumber"`
	Model           string     `json:"model"`
	CustomerID      string     `json:"customerId,omitempty"`
	SecretHash      []byte     `json:"-"`
	SoftwareVersion string     `json:"softwareVersion"`
	LinkCode        string     `json:"linkCode,omitempty"`
	LastSeenAt      *time.Time `json:"lastSeenAt,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
}

// Terminal is a terminal ID: eight digits, allocated to a customer and a
// merchant, linked to at most one device (and a device to at most one
// terminal ID).
type Terminal struct {
	TerminalID   string     `json:"terminalId"`
	CustomerID   string     `json:"customerId"`
	MerchantID   string     `json:"merchantId,omitempty"`
	SerialNumber string     `json:"serialNumber,omitempty"`
	LinkedAt     *time.Time `json:"linkedAt,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
}

// Linked reports whether a device is linked to the terminal ID.
func (t *Terminal) Linked() bool { return t.SerialNumber != "" }

// DeviceSession is what a linked device's hello and the end of its
// session read of the store, in one statement (TerminalStore.
// DeviceSessions): its terminal ID and device rows, and what keeps the
// terminal ID busy or is owed to the device.
type DeviceSession struct {
	Terminal *Terminal
	Device   *Device
	// ActiveID is the id of the terminal ID's PENDING transaction ("":
	// none).
	ActiveID string
	// Update is its unfinished software update (nil: none).
	Update *Update
	// BatchID is its PENDING close ("": none), sent to the device
	// BatchSerial.
	BatchID, BatchSerial string
	// Owed reports whether the device is owed an open effect.
	Owed bool
}

// TerminalView is a terminal ID as the Online API shows it: the binding plus
// the live state of its device.
type TerminalView struct {
	TerminalID      string     `json:"terminalId"`
	Linked          bool       `json:"linked"`
	SerialNumber    *string    `json:"serialNumber"`
	Model           *string    `json:"model"`
	SoftwareVersion *string    `json:"softwareVersion"`
	Online          bool       `json:"online"`
	Busy            bool       `json:"busy"`
	Updating        bool       `json:"updating"`
	CurrentRefID    *string    `json:"currentOnlineAPIRefId"`
	LinkedAt        *time.Time `json:"linkedAt"`
	LastSeenAt      *time.Time `json:"lastSeenAt"`
}

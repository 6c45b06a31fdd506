package instore

import "time"

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
func ValidModel(m string) bool {
	for _, x := range Models {
		if x == m {
			return true
		}
	}
	return false
}

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

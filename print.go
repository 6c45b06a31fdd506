package instore

import (
	"strconv"
	"time"
)

// Print limits.
const (
	MaxPrintLines   = 200
	MaxPrintLineLen = 64
)

// Receipt copies a print job may print.
const (
	CopyCustomer = "CUSTOMER"
	CopyMerchant = "MERCHANT"
)

// PrintJob is text printed on a terminal's printer: free lines, or a
// transaction's customer or merchant receipt. StatusID is nil while the
// terminal prints, then an id of the printStatuses list.
type PrintJob struct {
	ID            string // printId
	MerchantID    string
	TerminalID    string
	TransactionID string
	Copy          string
	Lines         []string
	StatusID      *int
	CreatedAt     time.Time
	CompletedAt   *time.Time
}

// PrintRequest is the body of POST /print: lines, or a transaction and a
// receipt copy.
type PrintRequest struct {
	TerminalID     string   `json:"terminalId"`
	Lines          []string `json:"lines"`
	OnlineAPIRefID string   `json:"onlineAPIRefId"`
	Copy           string   `json:"copy"`
}

// Validate checks the fields' shapes.
func (r *PrintRequest) Validate() error {
	var f fields
	checkTerminalID(&f, r.TerminalID)
	switch {
	case r.Lines != nil && r.OnlineAPIRefID != "":
		f.add("", "give either lines or onlineAPIRefId and copy, not both")
	case r.Lines != nil:
		if len(r.Lines) < 1 || len(r.Lines) > MaxPrintLines {
			f.add("/lines", "must hold 1 to %d lines", MaxPrintLines)
		}
		for i, l := range r.Lines {
			if !ValidText(l, MaxPrintLineLen) {
				f.add("/lines/"+strconv.Itoa(i), "must be at most %d characters, without control characters", MaxPrintLineLen)
			}
		}
		if r.Copy != "" {
			f.add("/copy", "goes with onlineAPIRefId only")
		}
	case r.OnlineAPIRefID != "":
		if !ValidRef(r.OnlineAPIRefID) {
			f.add("/onlineAPIRefId", "is not an onlineAPIRefId")
		}
		if r.Copy != CopyCustomer && r.Copy != CopyMerchant {
			f.add("/copy", "must be CUSTOMER or MERCHANT")
		}
	default:
		f.add("", "give lines, or onlineAPIRefId and copy")
	}
	return f.err()
}

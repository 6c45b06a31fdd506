package instore

import (
	"strconv"
	"time"
)

// Print limits.
const (
	MaxPrintLines   = 200
	MaxPrintLineLen = 64
	// MaxJSONCharBytes is the most bytes one character of a JSON string
	// may take: JSON may write any character as a \u escape, and one
	// outside the Basic Multilingual Plane as an escaped surrogate pair
	// (\ud83d\ude00), 12 bytes; raw UTF-8 takes at most 4. The terminal
	// protocol's frame limit is derived from it too.
	MaxJSONCharBytes = 12
	// MaxPrintBodyBytes is the largest body of POST /print (other requests
	// have the Online API's 64 KiB): a print job of MaxPrintLines lines of
	// MaxPrintLineLen characters fits it however its JSON is written,
	// every character escaped at its longest, with up to 14 bytes of
	// quotes, comma and whitespace per line and 4 KiB for the rest, so
	// that the lines and characters are the only limits a print job
	// meets. (Go's encoding/json alone writes < > & and U+2028 as
	// 6-byte escapes: 200 lines of 64 of them are 77 KB.)
	MaxPrintBodyBytes = MaxPrintLines*(MaxPrintLineLen*MaxJSONCharBytes+14) + 4<<10
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
	StatusID      *PrintStatus
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
	var f FieldErrors
	checkTerminalID(&f, r.TerminalID)
	switch {
	case r.Lines != nil && r.OnlineAPIRefID != "":
		f.Add("", "give either lines or onlineAPIRefId and copy, not both")
	case r.Lines != nil:
		if len(r.Lines) < 1 || len(r.Lines) > MaxPrintLines {
			f.Add("/lines", "must hold 1 to %d lines", MaxPrintLines)
		}
		for i, l := range r.Lines {
			if !ValidText(l, MaxPrintLineLen) {
				f.Add("/lines/"+strconv.Itoa(i), "must be at most %d characters, without control characters", MaxPrintLineLen)
			}
		}
		if r.Copy != "" {
			f.Add("/copy", "goes with onlineAPIRefId only")
		}
	case r.OnlineAPIRefID != "":
		if !ValidRef(r.OnlineAPIRefID) {
			f.Add("/onlineAPIRefId", "is not an onlineAPIRefId")
		}
		if r.Copy != CopyCustomer && r.Copy != CopyMerchant {
			f.Add("/copy", "must be CUSTOMER or MERCHANT")
		}
	default:
		f.Add("", "give lines, or onlineAPIRefId and copy")
	}
	return f.Err()
}

// Package protocol defines the terminal protocol, version 1: the JSON
// messages a terminal and the gateway exchange over a WebSocket at
// /terminal/v1/connect. docs/terminal-protocol.md describes it for terminal
// vendors; this package is its single definition in code, used by the
// gateway and by the virtual terminal alike.
package protocol

import (
	"encoding/json"
	"time"

	"github.com/instore-dev/instore"
)

// Version is the protocol version this package speaks.
const Version = 1

// Path is where terminals connect on the gateway listener.
const Path = "/terminal/v1/connect"

// Limits of the protocol.
const (
	// MaxIDLen bounds message ids and references.
	MaxIDLen = 64

	// MaxCharBytes is the most bytes one character of a JSON string may
	// take on the wire. Raw UTF-8 takes at most 4, but JSON may write any
	// character as a \u escape, and one outside the Basic Multilingual
	// Plane as an escaped surrogate pair (\ud83d\ude00): 12 bytes
	// (instore.MaxJSONCharBytes). Control characters are not allowed in
	// the protocol's text (instore.ValidText) and would take 6 at most.
	MaxCharBytes = instore.MaxJSONCharBytes
	// maxLineOverhead is what a line of a receipt or print job takes
	// besides its characters: its quotes, the comma after it and up to 8
	// bytes of whitespace around it (a line break and indentation).
	maxLineOverhead = 2 + 1 + 8
	// MaxLinesBytes is the most bytes an array of lines (a receipt copy,
	// a print job) takes: MaxLines lines of MaxLineLen characters, each
	// character escaped at its longest.
	MaxLinesBytes = 2 + MaxLines*(MaxLineLen*MaxCharBytes+maxLineOverhead)
	// maxOtherBytes bounds everything of a message besides its arrays of
	// lines: the envelope with ids and refs of MaxIDLen characters, the
	// member names, every other field at its longest, all escaped, and
	// whitespace. TestLargestMessagesFit builds the largest message of
	// every type to hold each of these bounds to account.
	maxOtherBytes = 8 << 10
	// MaxFrameBytes is the largest message either side accepts, all its
	// fragments together; a larger one closes the session (close code
	// 1009). It is derived from the largest legal message, a result with
	// both receipts at their longest, so that no legal message is ever
	// refused for its size: a result in particular, which may stand for a
	// charged card. Every other message is smaller (a print job has one
	// array of lines; the Online API refuses what would not fit).
	MaxFrameBytes = 2*MaxLinesBytes + maxOtherBytes
)

// Message types, terminal to server.
const (
	TypeHello        = "hello"
	TypeAck          = "ack"
	TypeProgress     = "progress"
	TypeResult       = "result"
	TypePrintResult  = "print-result"
	TypeUpdateStatus = "update-status"
	// TypeForwarded reports the forwarding of an offline approval
	// (forwarded.go), resent until the server confirms it.
	TypeForwarded = "forwarded"
)

// Message types, server to terminal.
const (
	TypeLinkCode = "link-code"
	TypeLinked   = "linked"
	TypePurchase = "purchase"
	TypeRefund   = "refund"
	TypeReversal = "reversal"
	// TypePreAuth is a pre-authorisation, read from a card like a
	// purchase; TypeIncrement, TypeCapture and TypeVoid act on one
	// (Payment.OriginalRef) without a card: the terminal completes them
	// with the authorisation it holds.
	TypePreAuth   = "preauth"
	TypeIncrement = "increment"
	TypeCapture   = "capture"
	TypeVoid      = "void"
	TypeCancel    = "cancel"
	TypePrint     = "print"
	TypeUpdate    = "update"
	// TypeConfirm goes both ways: the server confirms a result or an
	// update-status once it is committed; a terminal confirms a cancel, a
	// reversal of a late approval and a print, which the server sends again
	// after every reconnect until confirmed.
	TypeConfirm = "confirm"
)

// WebSocket close codes the gateway uses besides the standard ones (1000
// normal, 1001 going away: reconnect, 1008 policy, 1009 too big).
const (
	CloseMalformed   = 4400 // a frame that is not a valid message
	CloseUnsupported = 4426 // protocol version not supported
	CloseReplaced    = 4409 // the same device connected again
	CloseTimeout     = 4408 // no pong within the liveness deadline
	CloseRevoked     = 4401 // the device was removed or its secret changed
)

// Envelope is every frame: a type, the sender's message id, the id of the
// message it answers (Re) where it answers one, the reference (Ref) of the
// transaction, print job or update it concerns, and a type-specific Data
// object.
type Envelope struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Re   string          `json:"re,omitempty"`
	Ref  string          `json:"ref,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Hello is the terminal's first message after connecting.
type Hello struct {
	Protocol        int    `json:"protocol"`
	Model           string `json:"model"`
	SoftwareVersion string `json:"softwareVersion"`
}

// LinkCode tells an unlinked terminal which code to show.
type LinkCode struct {
	Code string `json:"code"`
}

// Linked tells a terminal the terminal ID it is linked to and the lowest
// software version it may take payments with.
type Linked struct {
	TerminalID string `json:"terminalId"`
	// MinSoftwareVersion is set by the newest mandatory package of the
	// terminal's model; below it the terminal answers every purchase and
	// refund with TERMINAL_MUST_UPDATE (10) until it is updated. Absent:
	// no minimum.
	MinSoftwareVersion string `json:"minSoftwareVersion,omitempty"`
}

// Payment is the data of purchase, refund, preauth, increment, capture
// and void commands (Ref is the onlineAPIRefId). Increment (Amount: the
// increase), capture (Amount: the final total, tip included) and void
// (Amount: the authorised amount released) name their pre-auth in
// OriginalRef and need no card.
type Payment struct {
	Amount          int64  `json:"amount"`
	CashbackAmount  int64  `json:"cashbackAmount,omitempty"`
	VATAmount       *int64 `json:"vatAmount,omitempty"`
	Currency        string `json:"currency"`
	PaymentMethodID *int   `json:"paymentMethodId,omitempty"`
	ECRReference    string `json:"ecrReference,omitempty"`
	// Deadline is when the server stops waiting for the result.
	Deadline time.Time `json:"deadline"`
	// OriginalRef names the purchase a refund refers to, or the pre-auth
	// an increment, capture or void acts on.
	OriginalRef string `json:"originalRef,omitempty"`
	// TipAmount is, in a capture, the part of Amount (the final total)
	// that is tip (absent: 0).
	TipAmount int64 `json:"tipAmount,omitempty"`
	// PaymentMethodCode is the code of PaymentMethodID in the service's
	// paymentMethods list, for the receipt.
	PaymentMethodCode string `json:"paymentMethodCode,omitempty"`
	// Tip asks the cardholder for a tip (purchase only; absent: none).
	Tip *instore.Tip `json:"tip,omitempty"`
}

// Cancel reasons are instore.CancelByECR ("ECR": the cashier cancelled,
// abort and answer ABORTED_BY_CASHIER), instore.CancelDeadline ("DEADLINE":
// the server gave up at the deadline, abort) and instore.CancelAckTimeout
// ("ACK_TIMEOUT": the ack came too late, drop the command).

// Cancel asks the terminal to stop the transaction Ref.
type Cancel struct {
	Reason string `json:"reason"`
}

// Reversal asks the terminal to reverse an approved transaction at once,
// with no card interaction. With reason "ECR" (instore.ReversalByECR) Ref is
// a new REVERSAL transaction the terminal acknowledges and reports a result
// for, like a purchase, and OriginalRef the purchase it reverses. With
// reason "LATE_APPROVAL" (instore.ReversalLateApproval) Ref is the approved
// transaction itself, which the server had already failed and now records
// REVERSED: there is no OriginalRef, and no ack or result is expected; the
// terminal confirms the message. Reason "CONFIRM_TIMEOUT"
// (instore.ReversalConfirmTimeout) is the same form, for an approved sale
// the ECR did not confirm within its window.
type Reversal struct {
	Reason      string `json:"reason"`
	OriginalRef string `json:"originalRef,omitempty"`
}

// Print asks the terminal to print lines; Ref is the printId. The server
// sends it again, same message id, after every reconnect until the
// terminal confirms it or the job ends (print-result, or the print
// timeout); a terminal prints a printId once.
type Print struct {
	Lines []string `json:"lines"`
}

// PrintResult is the final print status (an id of the printStatuses list)
// of the print job Ref.
type PrintResult struct {
	StatusID instore.PrintStatus `json:"statusId"`
}

// Progress reports a stage of the transaction Ref.
type Progress struct {
	Stage instore.Progress `json:"stage"`
}

// Result is the final outcome of the transaction Ref. The terminal keeps it
// and resends it (same message id) after every reconnect until the server
// confirms it.
type Result struct {
	StatusID          instore.TransactionStatus `json:"statusId"`
	EntryMode         string                    `json:"entryMode,omitempty"`
	CardBrand         string                    `json:"cardBrand,omitempty"`
	MaskedPAN         string                    `json:"maskedPan,omitempty"`
	AuthorizationCode string                    `json:"authorizationCode,omitempty"`
	PaymentMethodID   *int                      `json:"paymentMethodId,omitempty"`
	// TipAmount is the tip charged on top of the amount (APPROVED purchase
	// with a tip only; absent: 0).
	TipAmount int64 `json:"tipAmount,omitempty"`
	// Offline: approved offline, kept in the terminal's offline queue
	// until it forwards it (APPROVED only; forwarded.go).
	Offline         bool     `json:"offline,omitempty"`
	CustomerReceipt []string `json:"customerReceipt,omitempty"`
	MerchantReceipt []string `json:"merchantReceipt,omitempty"`
}

// Update asks the terminal to install a software package; Ref is the
// updateId. The terminal fetches the package by PackageID from its
// vendor's distribution point, checks its size and SHA-256 digest, and
// reports with update-status.
type Update struct {
	PackageID string `json:"packageId"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	SizeBytes int64  `json:"sizeBytes"`
	SHA256    string `json:"sha256"`
	Mandatory bool   `json:"mandatory,omitempty"`
}

// Update statuses a terminal reports in update-status.
const (
	UpdateDownloading = "DOWNLOADING"
	UpdateInstalled   = "INSTALLED"
	UpdateFailed      = "FAILED"
)

// UpdateStatus is what the terminal reports about the update Ref:
// DOWNLOADING once it starts, then INSTALLED with the version it now runs,
// or FAILED with a reason.
type UpdateStatus struct {
	Status instore.UpdateStatus `json:"status"`
	// SoftwareVersion is required with INSTALLED.
	SoftwareVersion string `json:"softwareVersion,omitempty"`
	// Reason is required with FAILED: why, in words for an operator.
	Reason string `json:"reason,omitempty"`
}

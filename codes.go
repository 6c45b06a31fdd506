package instore

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// codesJSON is the one table of code lists, reproduced character for
// character from the specification. The metadata endpoint serves it and the
// code uses it; nothing else defines a code.
//
//go:embed codes.json
var codesJSON []byte

// Code is one entry of a code list: the element shape of every array the
// metadata endpoint returns.
type Code struct {
	ID          int    `json:"id"`
	Code        string `json:"code"`
	Description string `json:"description"`
}

// Metadata holds the four code lists in the order the specification gives.
// Its JSON encoding is the body of GET /metadata.
type Metadata struct {
	ErrorCodes          []Code `json:"errorCodes"`
	TransactionStatuses []Code `json:"transactionStatuses"`
	PaymentMethods      []Code `json:"paymentMethods"`
	PrintStatuses       []Code `json:"printStatuses"`
}

// TransactionStatus is the id of an entry of the transactionStatuses list.
type TransactionStatus int

// Transaction status ids of the transactionStatuses list.
const (
	StatusApproved            TransactionStatus = 0
	StatusAbortedByCardholder TransactionStatus = 1
	StatusAbortedByCashier    TransactionStatus = 2
	StatusTerminalIsBusy      TransactionStatus = 3
	StatusCardHasExpired      TransactionStatus = 4
	StatusInvalidCard         TransactionStatus = 5
	StatusCardIsBlocked       TransactionStatus = 6
	StatusOfflineQueueIsFull  TransactionStatus = 7
	StatusTechnicalError      TransactionStatus = 8
	StatusTerminalIsOffline   TransactionStatus = 9
	StatusTerminalMustUpdate  TransactionStatus = 10
	StatusTransactionDeclined TransactionStatus = 11
	StatusWrongPIN            TransactionStatus = 12
	StatusReversed            TransactionStatus = 13
	StatusPending             TransactionStatus = 14
)

// PrintStatus is the id of an entry of the printStatuses list.
type PrintStatus int

// Print status ids of the printStatuses list.
const (
	PrintSuccess    PrintStatus = 0
	PrintBusy       PrintStatus = 1
	PrintOutOfPaper PrintStatus = 2
	PrintLowBattery PrintStatus = 3
	PrintError      PrintStatus = 4
	PrintCancelled  PrintStatus = 5
	PrintTimeout    PrintStatus = 6
)

// DefaultMetadata returns a fresh copy of the embedded code lists. The
// payment methods are the project's documented defaults; an operator may
// replace them with WithPaymentMethods.
func DefaultMetadata() Metadata {
	var m Metadata
	if err := json.Unmarshal(codesJSON, &m); err != nil {
		panic("instore: embedded codes.json is invalid: " + err.Error())
	}
	return m
}

// Code looks up an entry of the list by id.
func lookup(list []Code, id int) (Code, bool) {
	for _, c := range list {
		if c.ID == id {
			return c, true
		}
	}
	return Code{}, false
}

// ErrorCode returns the errorCodes entry for a WP code such as "WP09".
func (m *Metadata) ErrorCode(code string) (Code, bool) {
	for _, c := range m.ErrorCodes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}

// TransactionStatus returns the transactionStatuses entry with that id.
func (m *Metadata) TransactionStatus(id TransactionStatus) (Code, bool) {
	return lookup(m.TransactionStatuses, int(id))
}

// PaymentMethod returns the paymentMethods entry with that id.
func (m *Metadata) PaymentMethod(id int) (Code, bool) { return lookup(m.PaymentMethods, id) }

// ErrorCodeByID looks an error code up by its id.
func (m *Metadata) ErrorCodeByID(id int) (Code, bool) { return lookup(m.ErrorCodes, id) }

// PrintStatus returns the printStatuses entry with that id.
func (m *Metadata) PrintStatus(id PrintStatus) (Code, bool) { return lookup(m.PrintStatuses, int(id)) }

// ReadPaymentMethods reads an operator's replacement for the paymentMethods
// list: a JSON array of exactly three {id, code, description} objects with
// ids 0, 1 and 2 in that order (the specification fixes the ids and their
// meaning: an instant mobile payment app, a buy-now-pay-later service, a
// mobile wallet; only the product codes and descriptions are the operator's).
func ReadPaymentMethods(r io.Reader) ([]Code, error) {
	dec := json.NewDecoder(io.LimitReader(r, 64<<10))
	dec.DisallowUnknownFields()
	var list []Code
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("payment methods: %w", err)
	}
	if len(list) != 3 {
		return nil, fmt.Errorf("payment methods: want exactly 3 entries (ids 0, 1, 2), got %d", len(list))
	}
	seen := map[string]bool{}
	for i, c := range list {
		if c.ID != i {
			return nil, fmt.Errorf("payment methods: entry %d has id %d, want %d", i, c.ID, i)
		}
		if c.Code == "" || len(c.Code) > 64 || strings.TrimSpace(c.Code) != c.Code {
			return nil, fmt.Errorf("payment methods: entry %d: code must be 1-64 characters without surrounding spaces", i)
		}
		if c.Description == "" || len(c.Description) > 200 {
			return nil, fmt.Errorf("payment methods: entry %d: description must be 1-200 characters", i)
		}
		if seen[c.Code] {
			return nil, fmt.Errorf("payment methods: code %q appears twice", c.Code)
		}
		seen[c.Code] = true
	}
	return list, nil
}

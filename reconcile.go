package instore

import (
	"slices"
	"strconv"
)

// ReconcileResult is the answer of POST /reconciliation. Matched is true
// when nothing differs: no line missing in the service, no transaction
// missing in the ECR's books, no field mismatched.
type ReconcileResult struct {
	Matched          bool               `json:"matched"`
	Counts           ReconcileCounts    `json:"counts"`
	MissingInService []ReconcileMissing `json:"missingInService"`
	MissingInECR     []BookEntry        `json:"missingInEcr"`
	Mismatched       []Mismatch         `json:"mismatched"`
}

// ReconcileCounts counts what a reconciliation found. Every ECR line is
// matched, mismatched or missing in the service.
type ReconcileCounts struct {
	// ECRLines is how many lines the ECR sent, ServiceTransactions how
	// many transactions the service holds in the window.
	ECRLines            int `json:"ecrLines"`
	ServiceTransactions int `json:"serviceTransactions"`
	// Matched counts the lines paired with a transaction whose type,
	// amount, currency and status all agree; Mismatched those paired with
	// one where at least one differs.
	Matched    int `json:"matched"`
	Mismatched int `json:"mismatched"`
	// MissingInService and MissingInECR are the lengths of the lists.
	MissingInService int `json:"missingInService"`
	MissingInECR     int `json:"missingInEcr"`
}

// ReconcileMissing is an ECR line the service has no transaction for in
// the window: the line as sent and its index in the request's list.
type ReconcileMissing struct {
	Index          int             `json:"index"`
	OnlineAPIRefID NullString      `json:"onlineAPIRefId"`
	ECRReference   NullString      `json:"ecrReference"`
	Type           TransactionType `json:"type"`
	Amount         int64           `json:"amount"`
	Currency       string          `json:"currency"`
	Status         string          `json:"status"`
}

// Mismatch is one field on which an ECR line and the service's
// transaction it was paired with differ. ECR and Service are the two
// values: strings, or integers for amount.
type Mismatch struct {
	OnlineAPIRefID string `json:"onlineAPIRefId"`
	Index          int    `json:"index"`
	Field          string `json:"field"`
	ECR            any    `json:"ecr"`
	Service        any    `json:"service"`
}

// MovedMoney reports whether a transaction of that status moved money on
// the card: APPROVED, or REVERSED (approved, then given back by its
// reversal). Only those are missing from an ECR's books when it does not
// list them; a declined, aborted or failed attempt, or one still
// PENDING, need not be booked.
func MovedMoney(s TransactionStatus) bool { return s == StatusApproved || s == StatusReversed }

// Reconcile compares an ECR's books (lines, valid as Validate checks them)
// with the service's transactions of the same window (service, Status
// set). It is pure: the same input gives the same answer.
//
// Pairing, line by line in the request's order:
//  1. a line with an onlineAPIRefId is paired with that transaction;
//  2. a line without one is paired, by its ecrReference, with a
//     transaction of that ecrReference not yet paired: first one whose
//     type, amount, currency and status all agree, else one of the same
//     type, else the oldest (so a declined attempt and its approved retry
//     under one ecrReference pair with the right lines).
//
// A paired line is matched when type, amount (totalAmount), currency and
// status agree, and otherwise mismatched, one Mismatch per field; a line
// with nothing to pair with is missing in the service; a transaction that
// moved money (MovedMoney) and was paired with no line is missing in the
// ECR. Lists are in the order of the lines, and of the transactions
// (oldest first) for MissingInECR.
func Reconcile(lines []ReconcileLine, service []BookEntry) ReconcileResult {
	res := ReconcileResult{MissingInService: []ReconcileMissing{}, MissingInECR: []BookEntry{}, Mismatched: []Mismatch{}}
	res.Counts.ECRLines, res.Counts.ServiceTransactions = len(lines), len(service)
	byID := make(map[string]int, len(service))
	byRef := map[string][]int{}
	for i, e := range service {
		byID[e.OnlineAPIRefID] = i
		if e.ECRReference != "" {
			byRef[string(e.ECRReference)] = append(byRef[string(e.ECRReference)], i)
		}
	}
	paired := make([]bool, len(service))
	pairs := make([]int, len(lines)) // the service index of each line, -1 if none
	for i, l := range lines {
		pairs[i] = -1
		if l.OnlineAPIRefID != "" {
			if j, ok := byID[l.OnlineAPIRefID]; ok && !paired[j] {
				pairs[i], paired[j] = j, true
			}
		}
	}
	for i, l := range lines {
		if l.OnlineAPIRefID != "" {
			continue
		}
		if j := pickByRef(l, byRef[l.ECRReference], service, paired); j >= 0 {
			pairs[i], paired[j] = j, true
		}
	}
	for i, l := range lines {
		j := pairs[i]
		if j < 0 {
			res.MissingInService = append(res.MissingInService, ReconcileMissing{Index: i, OnlineAPIRefID: NullString(l.OnlineAPIRefID),
				ECRReference: NullString(l.ECRReference), Type: l.Type, Amount: amountOf(l), Currency: l.Currency, Status: l.Status})
			continue
		}
		diffs := lineDiffs(i, l, service[j])
		if len(diffs) == 0 {
			res.Counts.Matched++
		} else {
			res.Counts.Mismatched++
			res.Mismatched = append(res.Mismatched, diffs...)
		}
	}
	for j, e := range service {
		if !paired[j] && MovedMoney(e.StatusID) {
			res.MissingInECR = append(res.MissingInECR, e)
		}
	}
	res.Counts.MissingInService, res.Counts.MissingInECR = len(res.MissingInService), len(res.MissingInECR)
	res.Matched = res.Counts.Mismatched == 0 && len(res.MissingInService) == 0 && len(res.MissingInECR) == 0
	return res
}

// pickByRef chooses, among the candidates (service indexes, oldest
// first) not yet paired, the transaction a line without onlineAPIRefId
// pairs with: one equal on every field, else one of the same type, else
// the oldest; -1 if none is left.
func pickByRef(l ReconcileLine, candidates []int, service []BookEntry, paired []bool) int {
	free := slices.DeleteFunc(slices.Clone(candidates), func(j int) bool { return paired[j] })
	if len(free) == 0 {
		return -1
	}
	if k := slices.IndexFunc(free, func(j int) bool { return len(lineDiffs(0, l, service[j])) == 0 }); k >= 0 {
		return free[k]
	}
	if k := slices.IndexFunc(free, func(j int) bool { return service[j].Type == l.Type }); k >= 0 {
		return free[k]
	}
	return free[0]
}

func amountOf(l ReconcileLine) int64 {
	if l.Amount == nil {
		return 0
	}
	return *l.Amount
}

// lineDiffs lists the fields on which line i and the transaction e
// differ, in the order type, amount, currency, status.
func lineDiffs(i int, l ReconcileLine, e BookEntry) []Mismatch {
	var out []Mismatch
	add := func(field string, ecr, svc any) {
		out = append(out, Mismatch{OnlineAPIRefID: e.OnlineAPIRefID, Index: i, Field: field, ECR: ecr, Service: svc})
	}
	if l.Type != e.Type {
		add("type", string(l.Type), string(e.Type))
	}
	if a := amountOf(l); a != e.Amount {
		add("amount", a, e.Amount)
	}
	if l.Currency != e.Currency {
		add("currency", l.Currency, e.Currency)
	}
	if l.Status != e.Status {
		add("status", l.Status, e.Status)
	}
	return out
}

// String is the mismatch as one line of text (the command line prints it).
func (m Mismatch) String() string {
	return m.OnlineAPIRefID + " (line " + strconv.Itoa(m.Index) + "): " + m.Field + " ECR " + valueString(m.ECR) + ", service " + valueString(m.Service)
}

func valueString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return "?"
}

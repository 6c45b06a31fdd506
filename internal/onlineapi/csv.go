package onlineapi

import (
	"bytes"
	"encoding/csv"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// csvColumns is the header row of GET /transactions as text/csv: the
// listing's fields, those of the result, the confirmation and the
// authorisation flattened. Amounts are integers in minor units, times
// RFC 3339 in UTC, an absent value an empty cell.
var csvColumns = []string{
	"onlineAPIRefId", "type", "terminalId", "amount", "cashbackAmount", "tipAmount", "totalAmount", "vatAmount",
	"currency", "paymentMethodId", "ecrReference", "printReceipt", "statusId", "status", "errorId", "errorCode",
	"progress", "version", "createdAt", "acknowledgedAt", "completedAt", "reverses", "reversedBy",
	"entryMode", "cardBrand", "maskedPan", "authorizationCode", "paymentMethod",
	"confirmationState", "authorizationState", "preAuthorization",
}

// wantsCSV reports whether the request asks for text/csv before
// application/json in its Accept header (in the order it lists them; any
// other header, or none, is JSON).
func wantsCSV(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] == "0" {
				continue
			}
			switch mt {
			case "text/csv":
				return true
			case "application/json", "application/*", "*/*":
				return false
			}
		}
	}
	return false
}

// transactionsCSV answers a page of the listing as RFC 4180 CSV (CRLF
// line ends, a header row), the next page's URL in a Link header with
// rel="next" (none on the last page).
func (h *handlers) transactionsCSV(w http.ResponseWriter, r *http.Request, ts []*instore.Transaction, next string) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	cw.UseCRLF = true
	cw.Write(csvColumns)
	for _, t := range ts {
		cw.Write(csvRow(h.meta.TransactionWire(t)))
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	hd := w.Header()
	if next != "" {
		q := r.URL.Query()
		q.Set("cursor", next)
		hd.Set("Link", "<"+r.URL.Path+"?"+q.Encode()+`>; rel="next"`)
	}
	hd.Set("Content-Type", "text/csv; charset=utf-8; header=present")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
	return nil
}

// csvRow is one transaction's cells, in the order of csvColumns. Text a
// client or a terminal wrote goes through csvText.
func csvRow(t *instore.TransactionWire) []string {
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	optNum := func(n *int64) string {
		if n == nil {
			return ""
		}
		return num(*n)
	}
	optTime := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	var pm *int64
	if t.PaymentMethodID != nil {
		v := int64(*t.PaymentMethodID)
		pm = &v
	}
	var errID *int64
	if t.ErrorID != 0 {
		v := int64(t.ErrorID)
		errID = &v
	}
	var entry, brand, pan, auth, method string
	if res := t.Result; res != nil {
		entry, brand, pan, auth = string(res.EntryMode), string(res.CardBrand), string(res.MaskedPAN), string(res.AuthorizationCode)
		if res.PaymentMethod != nil {
			method = res.PaymentMethod.Code
		}
	}
	var confirm, authState string
	if t.Confirmation != nil {
		confirm = string(t.Confirmation.State)
	}
	if t.Authorization != nil {
		authState = string(t.Authorization.State)
	}
	return []string{
		t.OnlineAPIRefID, string(t.Type), t.TerminalID, num(t.Amount), num(t.CashbackAmount), num(t.TipAmount), num(t.TotalAmount), optNum(t.VATAmount),
		t.Currency, optNum(pm), csvText(string(t.ECRReference)), strconv.FormatBool(t.PrintReceipt), num(int64(t.StatusID)), t.Status, optNum(errID), string(t.ErrorCode),
		string(t.Progress), num(t.Version), optTime(&t.CreatedAt), optTime(t.AcknowledgedAt), optTime(t.CompletedAt), string(t.Reverses), string(t.ReversedBy),
		csvText(entry), csvText(brand), csvText(pan), csvText(auth), csvText(method),
		confirm, authState, t.PreAuthorization,
	}
}

// csvText guards a text cell against formula injection (OWASP, "CSV
// Injection"): a cell a spreadsheet would read as a formula, one that
// starts with = + - @, a tab or a carriage return, gets a leading
// apostrophe, which spreadsheets show as text and do not evaluate.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

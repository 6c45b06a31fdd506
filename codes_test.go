package instore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// The specification's tables, copied character for character from the
// service specification (checked against it when copied; the repository
// stands alone, so the test reads only this copy).
var specRows = map[string][]string{
	"errorCodes": {
		"| 1 | WP01 | Terminal not linked to a terminal ID |",
		"| 2 | WP02 | Terminal not found in linked state |",
		"| 3 | WP03 | Merchant inactive |",
		"| 4 | WP04 | Transaction not found |",
		"| 9 | WP09 | Terminal is busy processing previous transaction |",
		"| 16 | WP16 | Specified terminal does not belong to the merchant |",
		"| 18 | WP18 | No transaction is processing currently in the specified terminal |",
		"| 22 | WP22 | PaymentMethod received from ECR is invalid |",
		"| 23 | WP23 | Terminal is offline |",
		"| 25 | WP25 | Acknowledgement timed-out from terminal |",
		"| 26 | WP26 | Only 30 days of data is allowed to retrieve |",
		"| 27 | WP27 | Only past 90 days data is available to retrieve |",
		"| 30 | WP30 | Terminal has acknowledged the previous transaction but has not sent a response |",
		"| 36 | WP36 | Transaction timed-out |",
		"| 37 | WP37 | Transaction cancelled by ECR |",
	},
	"transactionStatuses": {
		"| 0 | APPROVED | Transaction approved |",
		"| 1 | ABORTED_BY_CARDHOLDER | Aborted by cardholder |",
		"| 2 | ABORTED_BY_CASHIER | Aborted by cashier |",
		"| 3 | TERMINAL_IS_BUSY | Terminal is busy |",
		"| 4 | CARD_HAS_EXPIRED | Card has expired |",
		"| 5 | INVALID_CARD | Invalid card |",
		"| 6 | CARD_IS_BLOCKED | Card is blocked |",
		"| 7 | OFFLINE_QUEUE_IS_FULL | Offline queue is full |",
		"| 8 | TECHNICAL_ERROR | Technical error |",
		"| 9 | TERMINAL_IS_OFFLINE | Terminal is offline |",
		"| 10 | TERMINAL_MUST_UPDATE | Terminal must update |",
		"| 11 | TRANSACTION_DECLINED | Transaction declined |",
		"| 12 | WRONG_PIN | Wrong PIN entered |",
		"| 13 | REVERSED | Transaction reversed |",
		"| 14 | PENDING | Transaction is pending |",
	},
	"printStatuses": {
		"| 0 | SUCCESS | Printed successfully |",
		"| 1 | BUSY | Terminal busy with a transaction |",
		"| 2 | OUT_OF_PAPER | Printer has no paper |",
		"| 3 | LOW_BATTERY | Terminal battery too low to print |",
		"| 4 | ERROR | General print error |",
		"| 5 | CANCELLED | Print cancelled |",
		"| 6 | TIMEOUT | Print request timed out |",
	},
}

func rows(list []instore.Code) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = fmt.Sprintf("| %d | %s | %s |", c.ID, c.Code, c.Description)
	}
	return out
}

func TestCodeListsMatchSpecification(t *testing.T) {
	m := instore.DefaultMetadata()
	got := map[string][]string{
		"errorCodes":          rows(m.ErrorCodes),
		"transactionStatuses": rows(m.TransactionStatuses),
		"printStatuses":       rows(m.PrintStatuses),
	}
	for name, want := range specRows {
		if strings.Join(got[name], "\n") != strings.Join(want, "\n") {
			t.Errorf("%s =\n%s\nwant\n%s", name, strings.Join(got[name], "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestDefaultPaymentMethods(t *testing.T) {
	m := instore.DefaultMetadata()
	want := []string{"| 0 | SWISH | Payment through Swish |", "| 1 | KLARNA | Payment through Klarna |", "| 2 | MOBILEPAY | Payment through MobilePay |"}
	if got := rows(m.PaymentMethods); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("paymentMethods = %v, want %v", got, want)
	}
}

func TestReadPaymentMethods(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"ok", `[{"id":0,"code":"A","description":"a"},{"id":1,"code":"B","description":"b"},{"id":2,"code":"C","description":"c"}]`, ""},
		{"two", `[{"id":0,"code":"A","description":"a"},{"id":1,"code":"B","description":"b"}]`, "exactly 3"},
		{"order", `[{"id":1,"code":"A","description":"a"},{"id":0,"code":"B","description":"b"},{"id":2,"code":"C","description":"c"}]`, "has id 1, want 0"},
		{"duplicate", `[{"id":0,"code":"A","description":"a"},{"id":1,"code":"A","description":"b"},{"id":2,"code":"C","description":"c"}]`, "twice"},
		{"empty code", `[{"id":0,"code":"","description":"a"},{"id":1,"code":"B","description":"b"},{"id":2,"code":"C","description":"c"}]`, "code must be"},
		{"unknown field", `[{"id":0,"code":"A","description":"a","x":1}]`, "unknown field"},
		{"not json", `nope`, "payment methods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := instore.ReadPaymentMethods(strings.NewReader(tc.in))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("ReadPaymentMethods(%s) = %v, want error containing %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

// TestHTTPStatusTable is the API contract's table of errors (their HTTP
// statuses, also in api/online-api.yaml).
func TestHTTPStatusTable(t *testing.T) {
	want := map[string]int{
		"WP01": 409, "WP02": 409, "WP03": 403, "WP04": 404, "WP09": 409, "WP16": 403, "WP18": 409,
		"WP22": 400, "WP23": 409, "WP25": 504, "WP26": 400, "WP27": 400, "WP30": 409,
		"unauthorized": 401, "validation": 400, "not-found": 404, "payload-too-large": 413,
		"unsupported-media-type": 415, "rate-limited": 429, "idempotency-conflict": 422,
		"not-reversible": 409, "internal": 500, "no-such-code": 500,
	}
	for code, status := range want {
		if got := instore.HTTPStatus(code); got != status {
			t.Errorf("HTTPStatus(%q) = %d, want %d", code, got, status)
		}
	}
	// Every WP code a request can answer with is in the errorCodes list.
	m := instore.DefaultMetadata()
	for code := range want {
		if strings.HasPrefix(code, "WP") {
			if _, ok := m.ErrorCode(code); !ok {
				t.Errorf("%s has an HTTP status but is not in errorCodes", code)
			}
		}
	}
}

func TestErrorCode(t *testing.T) {
	err := fmt.Errorf("purchase: %w", instore.Errorf(instore.WP09, "busy"))
	if got := instore.ErrorCode(err); got != instore.WP09 {
		t.Errorf("ErrorCode(wrapped WP09) = %q", got)
	}
	if got := instore.ErrorCode(fmt.Errorf("disk full")); got != instore.EInternal {
		t.Errorf("ErrorCode(plain error) = %q, want internal", got)
	}
}

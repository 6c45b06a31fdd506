package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// The limits of the Online API, the terminal protocol and the gateway
// agree: what the API takes reaches the terminal, and what a terminal may
// legally report is taken, however large.

// maxLines returns n lines of l copies of s.
func maxLines(n, l int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(s, l)
	}
	return out
}

// An APPROVED result with both receipts at their longest (200 lines of 64
// characters of 4 bytes, each written as a 12-byte escaped surrogate pair:
// ~300 KB) is stored APPROVED with its receipts and confirmed. With the
// gateway's 16 KiB limit of before it was closed with 1009 at every
// resend, and the sale, charged on the terminal, ended TECHNICAL_ERROR.
func TestLargestResultStored(t *testing.T) {
	eachBackend(t, largestResultStored)
}

func largestResultStored(t *testing.T, store func(*server.Config)) {
	doc := readProtocolDoc(t)
	s := owedEnv(t, store, nil)
	term, secret := s.provision(t, "BIG-1")
	d := dialDocTerminal(t, doc, s.srv.URL("terminal"), "BIG-1", secret)
	d.expect("linked", "")

	done := make(chan reply, 1)
	go func() { done <- s.purchase(t, term, 1250) }()
	cmd := d.expect("purchase", "")
	d.ack(cmd)
	ref := cmd["ref"].(string)
	(<-done).tx(t, 201)

	const char = "\U0001F600"
	line := `"` + strings.Repeat(`\ud83d\ude00`, 64) + `"`
	receipt := "[" + strings.TrimSuffix(strings.Repeat(line+", ", 200), ", ") + "]"
	id := d.id()
	frame := fmt.Sprintf(`{"type": "result", "id": %q, "ref": %q, "data": {"statusId": 0, "entryMode": "CONTACTLESS", "cardBrand": "VISA", `+
		`"maskedPan": "411111******1111", "authorizationCode": "A1B2C3", "customerReceipt": %s, "merchantReceipt": %s}}`, id, ref, receipt, receipt)
	if len(frame) < 300_000 {
		t.Fatalf("the result is only %d bytes", len(frame))
	}
	d.send([]byte(frame))
	for c := d.expect("confirm", ref); c["re"] != id; c = d.expect("confirm", ref) {
	}
	got := s.transaction(t, ref)
	want := maxLines(200, 64, char)
	if got.StatusID != instore.StatusApproved || got.Result == nil || !cmp.Equal(got.Result.Receipt, instore.Receipt{Customer: want, Merchant: want}) {
		n := 0
		if got.Result != nil {
			n = len(got.Result.Receipt.Customer)
		}
		t.Fatalf("transaction = %d with a customer receipt of %d lines, want APPROVED with both receipts whole", got.StatusID, n)
	}
}

// A print job at the API's limits, of characters that take 3 and 4 bytes
// of UTF-8 (and 6 when Go's encoder escapes them: < and U+2028), is
// carried to the terminal and printed; it was once accepted and then
// ended ERROR at once, its frame over 16 KiB. What is over the limits is
// refused with 400 naming the limit, and creates no print job.
func TestLargestPrintPrinted(t *testing.T) {
	s := startSandbox(t)
	counter := s.terminals[0]
	for _, char := range []string{"€", "\U0001F600", "<\u2028"} {
		lines := maxLines(instore.MaxPrintLines, instore.MaxPrintLineLen/len([]rune(char)), char)
		j := s.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": counter, "lines": lines}, nil).job(t)
		if j.Status != "SUCCESS" {
			t.Errorf("print of 200 lines of 64 %q = %s, want SUCCESS", char, j.Status)
		}
	}

	type fieldErrors struct {
		Errors []instore.FieldError `json:"errors"`
	}
	for _, tc := range []struct {
		name  string
		lines []string
		field string
		limit string
	}{
		{"201 lines", maxLines(instore.MaxPrintLines+1, 1, "€"), "/lines", "200 lines"},
		{"a line of 65 characters", append(maxLines(1, 64, "€"), strings.Repeat("€", 65)), "/lines/1", "64 characters"},
	} {
		r := s.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": counter, "lines": tc.lines}, nil)
		r.problem(t, 400, "validation")
		var p fieldErrors
		must(t, json.Unmarshal(r.body, &p))
		if len(p.Errors) != 1 || p.Errors[0].Field != tc.field || !strings.Contains(p.Errors[0].Message, tc.limit) {
			t.Errorf("%s: errors = %+v, want %s naming %q", tc.name, p.Errors, tc.field, tc.limit)
		}
	}
	// A body over the print limit is refused before anything is read.
	huge := map[string]any{"terminalId": counter, "lines": []string{strings.Repeat("x", instore.MaxPrintBodyBytes)}}
	r := s.post(t, "/in-store/api/v1/print", huge, nil)
	if p := r.problem(t, 413, "payload-too-large"); !strings.Contains(string(r.body), fmt.Sprint(instore.MaxPrintBodyBytes)) {
		t.Errorf("413 %+v does not name the limit of %d bytes", p, instore.MaxPrintBodyBytes)
	}
	// Nothing was created: after one more job, which the terminal prints
	// after any queued before it, four print jobs ended in all.
	next := s.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": counter, "lines": []string{"after"}}, nil).job(t)
	if next.Status != "SUCCESS" {
		t.Errorf("print after the refused ones = %s, want SUCCESS", next.Status)
	}
	if ended := s.events(t, "&types="+string(instore.EventPrintFinal)); len(ended) != 4 {
		t.Errorf("%d print jobs ended, want the 4 accepted", len(ended))
	}
}

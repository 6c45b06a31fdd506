package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{1250, "SEK", "SEK 12.50"},
		{5, "SEK", "SEK 0.05"},
		{0, "EUR", "EUR 0.00"},
		{99999999, "EUR", "EUR 999999.99"},
		{1250, "JPY", "JPY 1250"},
		{7, "KRW", "KRW 7"},
		{1250, "KWD", "KWD 1.250"},
		{5, "BHD", "BHD 0.005"},
		{1250, "UGX", "UGX 1250"},
		{1250, "PYG", "PYG 1250"},
		{12345, "CLF", "CLF 1.2345"},
		{1250, "IQD", "IQD 1.250"},
		{1250, "sek", "SEK 12.50"},
		{-1250, "SEK", "SEK -12.50"},
	} {
		if got := formatAmount(tc.amount, tc.currency); got != tc.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
}

func TestMaskPAN(t *testing.T) {
	t.Parallel()
	for pan, want := range map[string]string{
		"4761739001010119":    "476173******0119",
		"5413330089010434":    "541333******0434",
		"6011000990139424123": "601100*********4123",
		"1234567890":          "**********",
	} {
		if got := MaskPAN(pan); got != want {
			t.Errorf("MaskPAN(%q) = %q, want %q", pan, got, want)
		}
	}
	if got := lastFour("476173******0119"); got != "************0119" {
		t.Errorf("lastFour = %q, want ************0119", got)
	}
}

// checkReceipts checks the shape of both copies of an approved card
// payment: line width, the PAN as each copy may show it, outcome, ref.
func checkReceipts(t *testing.T, res protocol.Result, ref string) {
	t.Helper()
	first6, last4 := res.MaskedPAN[:6], res.MaskedPAN[len(res.MaskedPAN)-4:]
	for name, lines := range map[string][]string{"merchant": res.MerchantReceipt, "customer": res.CustomerReceipt} {
		text := strings.Join(lines, "\n")
		for _, l := range lines {
			if n := len([]rune(l)); n > ReceiptWidth {
				t.Errorf("%s receipt line %q has %d characters, want <= %d", name, l, n, ReceiptWidth)
			}
		}
		if !strings.Contains(lines[0], "instore virtual terminal") {
			t.Errorf("%s receipt starts %q, want the header", name, lines[0])
		}
		for _, want := range []string{"APPROVED", ref, res.CardBrand, res.EntryMode, res.AuthorizationCode, " UTC"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s receipt lacks %q:\n%s", name, want, text)
			}
		}
	}
	merchant, customer := strings.Join(res.MerchantReceipt, "\n"), strings.Join(res.CustomerReceipt, "\n")
	if !strings.Contains(merchant, res.MaskedPAN) {
		t.Errorf("merchant receipt lacks the 6+4 masked PAN %q:\n%s", res.MaskedPAN, merchant)
	}
	if !strings.Contains(customer, "************"+last4) || strings.Contains(customer, first6) {
		t.Errorf("customer receipt must show the last 4 digits only (%q):\n%s", last4, customer)
	}
}

func TestReceipts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	vat := int64(250)
	tx := &txn{ref: "01JQ7ZK3T8YV5N2M4P6R8S0T2W", kind: protocol.TypePurchase,
		pay: protocol.Payment{Amount: 1250, CashbackAmount: 200, VATAmount: &vat, Currency: "SEK", ECRReference: "ORDER-4711"}}

	res := buildResult(tx, instore.StatusApproved, "10000001", now)
	checkReceipts(t, res, tx.ref)
	for _, want := range []string{
		"Amount                         SEK 12.50",
		"Cashback                        SEK 2.00",
		"VAT                             SEK 2.50",
		"Terminal                        10000001",
		"2026-03-01 12:30:00 UTC",
		"ECR reference                 ORDER-4711",
	} {
		if !slices.Contains(res.MerchantReceipt, want) {
			t.Errorf("merchant receipt lacks line %q:\n%s", want, strings.Join(res.MerchantReceipt, "\n"))
		}
	}

	declined := buildResult(tx, instore.StatusTransactionDeclined, "10000001", now)
	if declined.AuthorizationCode != "" || !slices.Contains(declined.MerchantReceipt, centered("DECLINED")) {
		t.Errorf("declined: auth code %q, receipt:\n%s", declined.AuthorizationCode, strings.Join(declined.MerchantReceipt, "\n"))
	}
	if !slices.Contains(buildResult(tx, instore.StatusWrongPIN, "", now).CustomerReceipt, centered("WRONG PIN")) {
		t.Errorf("wrong PIN receipt lacks WRONG PIN")
	}

	// Other outcomes: the outcome lines only.
	tech := buildResult(tx, instore.StatusTechnicalError, "10000001", now)
	want := []string{centered("instore virtual terminal"), centered("MERCHANT COPY"), centered("TECHNICAL ERROR"), "Reference     01JQ7ZK3T8YV5N2M4P6R8S0T2W"}
	if !slices.Equal(tech.MerchantReceipt, want) {
		t.Errorf("technical error receipt:\n%q\nwant\n%q", tech.MerchantReceipt, want)
	}
	if tech.MaskedPAN != "" || tech.EntryMode != "" {
		t.Errorf("technical error carries card data: %+v", tech)
	}

	// A long reference wraps; amounts in other currencies.
	long := &txn{ref: strings.Repeat("r", protocol.MaxIDLen), kind: protocol.TypeRefund,
		pay: protocol.Payment{Amount: 1250, Currency: "JPY"}}
	res = buildResult(long, instore.StatusApproved, "10000001", now)
	checkReceipts(t, protocol.Result{MaskedPAN: res.MaskedPAN, CardBrand: res.CardBrand, EntryMode: res.EntryMode,
		AuthorizationCode: res.AuthorizationCode, MerchantReceipt: res.MerchantReceipt, CustomerReceipt: res.CustomerReceipt}, "")
	if !slices.Contains(res.MerchantReceipt, "REFUND") || !slices.ContainsFunc(res.MerchantReceipt, func(l string) bool { return strings.HasSuffix(l, " JPY 1250") }) {
		t.Errorf("JPY refund receipt:\n%s", strings.Join(res.MerchantReceipt, "\n"))
	}
	kwd := &txn{ref: "r1", kind: protocol.TypePurchase, pay: protocol.Payment{Amount: 1250, Currency: "KWD"}}
	if r := buildResult(kwd, 0, "", now); !slices.ContainsFunc(r.CustomerReceipt, func(l string) bool { return strings.HasSuffix(l, " KWD 1.250") }) {
		t.Errorf("KWD receipt:\n%s", strings.Join(r.CustomerReceipt, "\n"))
	}
}

func centered(s string) string {
	return strings.Repeat(" ", (ReceiptWidth-len(s))/2) + s
}

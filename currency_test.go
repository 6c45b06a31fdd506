package instore_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

func TestCurrencyExponent(t *testing.T) {
	for code, want := range map[string]int{
		"SEK": 2, "EUR": 2, "USD": 2, "JPY": 0, "KRW": 0, "ISK": 0, "VND": 0, "XOF": 0, "CLP": 0,
		"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3, "CLF": 4, "UYW": 4,
		"XCG": 2, "ZWG": 2,
	} {
		if got, ok := instore.CurrencyExponent(code); !ok || got != want {
			t.Errorf("CurrencyExponent(%s) = %d, %v; want %d", code, got, ok, want)
		}
	}
	for _, code := range []string{"XYZ", "XTS", "XXX", "XAU", "XDR", "BGN", "ANG", "sek", "", "SEKK"} {
		if _, ok := instore.CurrencyExponent(code); ok {
			t.Errorf("CurrencyExponent(%q) is known", code)
		}
	}
	if n := len(instore.Currencies()); n < 150 || n > 200 {
		t.Errorf("%d currencies; the ISO 4217 list has about 160 active codes", n)
	}
}

func TestPurchaseCurrencyValidation(t *testing.T) {
	amount := int64(100)
	for code, valid := range map[string]bool{"SEK": true, "JPY": true, "XYZ": false, "XTS": false, "sek": false} {
		err := (&instore.PurchaseRequest{TerminalID: "10000001", Amount: &amount, Currency: code}).Validate()
		if (err == nil) != valid {
			t.Errorf("purchase in %q: %v, want valid %v", code, err, valid)
		}
	}
}

// TestFormatMinor: every currency's amounts are written with its decimals
// (a leading zero before the point, none for a currency without
// decimals); a code it does not know gets 2; a negative amount a sign,
// the smallest int64 too.
func TestFormatMinor(t *testing.T) {
	for c, exp := range instore.Currencies() {
		for _, minor := range []int64{0, 5, 1250, instore.MaxAmount} {
			got := instore.FormatMinor(minor, c)
			whole, frac, dot := strings.Cut(got, ".")
			n, err := strconv.ParseInt(whole+frac, 10, 64)
			if err != nil || n != minor || len(frac) != exp || dot != (exp > 0) || whole == "" {
				t.Errorf("FormatMinor(%d, %s) = %q, want %d decimals", minor, c, got, exp)
			}
		}
	}
	if got := instore.FormatMinor(-1250, "XYZ"); got != "-12.50" {
		t.Errorf("FormatMinor(-1250, XYZ) = %q, want -12.50", got)
	}
	if got := instore.FormatMinor(math.MinInt64, "JPY"); got != "-9223372036854775808" {
		t.Errorf("FormatMinor(MinInt64, JPY) = %q", got)
	}
}

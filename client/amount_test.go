package client_test

import (
	"strings"
	"testing"

	"github.com/instore-dev/instore/client"
)

func TestParseAmount(t *testing.T) {
	cases := []struct {
		in, currency string
		want         int64
		wantErr      string
	}{
		{"12.50", "SEK", 1250, ""},
		{"12,50", "SEK", 1250, ""},
		{"12.5", "EUR", 1250, ""},
		{"12", "SEK", 1200, ""},
		{"0.01", "SEK", 1, ""},
		{"1200", "JPY", 1200, ""},
		{"1.250", "KWD", 1250, ""},
		{"12.505", "SEK", 0, "SEK has 2 decimals"},
		{"1200.5", "JPY", 0, "JPY has no decimals"},
		{"-12.50", "SEK", 0, "not an amount"},
		{"1,250.00", "SEK", 0, `"1,250.00" is not an amount: use one decimal separator and no thousands separators, e.g. 1250 or 12.50`},
		// The decimal comma: one rule whatever the currency. A comma is a
		// decimal separator unless exactly three digits follow it.
		{"12,5", "SEK", 1250, ""},
		{"0,01", "EUR", 1, ""},
		{"12,50", "KWD", 12500, ""},
		{"1,250", "SEK", 0, `"1,250" is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. 1250 or 12.50`},
		{"1,250", "KWD", 0, `"1,250" is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. 1250 or 1.250`},
		{"1,250", "JPY", 0, `"1,250" is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. 1250`},
		{"12,50", "JPY", 0, `JPY has no decimals, got "12,50"`},
		{"1,234,567", "SEK", 0, "use one decimal separator and no thousands separators"},
		{"1.250,50", "SEK", 0, "use one decimal separator and no thousands separators"},
		{"12,", "SEK", 0, "not an amount"},
		{"12.", "SEK", 0, "not an amount"},
		{".50", "SEK", 0, "not an amount"},
		{"", "SEK", 0, "not an amount"},
		{"12.50", "sek", 0, "ISO 4217"},
		{"12.50", "XYZ", 0, "ISO 4217"},
		{"99999999999999", "SEK", 0, "too large"},
	}
	for _, tc := range cases {
		got, err := client.ParseAmount(tc.in, tc.currency)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseAmount(%q, %s) = %d, %v; want error %q", tc.in, tc.currency, got, err, tc.wantErr)
			}
			if err != nil && strings.HasPrefix(tc.wantErr, `"`) && err.Error() != tc.wantErr {
				t.Errorf("ParseAmount(%q, %s) error = %q, want exactly %q", tc.in, tc.currency, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseAmount(%q, %s) = %d, %v; want %d", tc.in, tc.currency, got, err, tc.want)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	cases := []struct {
		minor    int64
		currency string
		want     string
	}{
		{1250, "SEK", "12.50"},
		{1, "SEK", "0.01"},
		{0, "EUR", "0.00"},
		{1200, "JPY", "1200"},
		{1250, "KWD", "1.250"},
		{5, "CLF", "0.0005"},
		{-1250, "SEK", "-12.50"},
	}
	for _, tc := range cases {
		if got := client.FormatAmount(tc.minor, tc.currency); got != tc.want {
			t.Errorf("FormatAmount(%d, %s) = %q, want %q", tc.minor, tc.currency, got, tc.want)
		}
	}
}

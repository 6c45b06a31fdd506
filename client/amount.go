package client

import (
	"fmt"
	"github.com/instore-dev/instore"
	"strconv"
	"strings"
)

// CurrencyExponent returns the number of decimals of an ISO 4217
// currency (2 for SEK, 0 for JPY, 3 for KWD) and whether the code is an
// active currency the service accepts (instore.CurrencyExponent).
func CurrencyExponent(currency string) (int, bool) {
	return instore.CurrencyExponent(currency)
}

// ParseAmount converts an amount typed as a person does ("12.50",
// "12,50", "12") into minor units of currency (1250 for SEK).
//
// The rule for the separator: a dot or a comma is the decimal separator,
// at most one of them, followed by 1 up to the currency's decimals
// ("12,50" and "12.5" are 1250 in SEK). Thousands separators are never
// accepted, so a comma followed by exactly three digits ("1,250") is
// refused as ambiguous, whatever the currency: it may mean 1250 or 1.250;
// write 1250, or the decimals with a dot (1.250 KWD). Signs, more
// decimals than the currency has and unknown currencies are refused; the
// service checks the range (1 to 99999999). Its errors say what is wrong
// with s and how to write it, not which field s is: prefix them with the
// field's name (`--cashback: SEK has 2 decimals, got "1.005"`).
func ParseAmount(s, currency string) (int64, error) {
	exp, ok := CurrencyExponent(currency)
	if !ok {
		return 0, fmt.Errorf("%q is not an ISO 4217 currency code such as SEK", currency)
	}
	// How to write it, in this currency: 1250, and 12.50 where it has
	// decimals.
	example := "1250"
	if exp > 0 {
		example += " or " + FormatAmount(1250, currency)
	}
	sep := "."
	if strings.Count(s, ".")+strings.Count(s, ",") > 1 {
		return 0, fmt.Errorf("%q is not an amount: use one decimal separator and no thousands separators, e.g. %s", s, example)
	}
	if strings.Contains(s, ",") {
		sep = ","
	}
	whole, frac, hasSep := strings.Cut(s, sep)
	digits := func(p string) bool {
		for _, r := range p {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	switch {
	case whole == "" || !digits(whole) || !digits(frac) || hasSep && frac == "":
		return 0, fmt.Errorf("%q is not an amount such as %s", s, FormatAmount(1250, currency))
	case sep == "," && len(frac) == 3:
		return 0, fmt.Errorf("%q is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. %s", s, example)
	case len(frac) > exp && exp == 0:
		return 0, fmt.Errorf("%s has no decimals, got %q", currency, s)
	case len(frac) > exp:
		return 0, fmt.Errorf("%s has %d decimals, got %q", currency, exp, s)
	case len(whole) > 12:
		return 0, fmt.Errorf("%q is too large", s)
	}
	frac += strings.Repeat("0", exp-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return n, nil
}

// FormatAmount writes an amount in minor units with its currency's
// decimals: FormatAmount(1250, "SEK") is "12.50". An unknown currency is
// taken to have 2 decimals.
func FormatAmount(minor int64, currency string) string {
	return instore.FormatMinor(minor, currency)
}

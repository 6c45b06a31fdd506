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
// "12,50", "12") into minor units of currency (1250 for SEK). It refuses
// more decimals than the currency has, signs, thousands separators and
// unknown currencies; the service checks the range (1 to 99999999). Its
// errors say what is wrong with s, not which field s is: prefix them with
// the field's name (`--cashback: SEK has 2 decimals, got "1.005"`).
func ParseAmount(s, currency string) (int64, error) {
	exp, ok := CurrencyExponent(currency)
	if !ok {
		return 0, fmt.Errorf("%q is not an ISO 4217 currency code such as SEK", currency)
	}
	whole, frac, hasSep := strings.Cut(s, ".")
	if !hasSep {
		whole, frac, hasSep = strings.Cut(s, ",")
	}
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
		return 0, fmt.Errorf("%q is not an amount such as 12.50", s)
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
	exp, ok := CurrencyExponent(currency)
	if !ok {
		exp = 2
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	s := strconv.FormatInt(minor, 10)
	if exp == 0 {
		return sign + s
	}
	if len(s) <= exp {
		s = strings.Repeat("0", exp-len(s)+1) + s
	}
	return sign + s[:len(s)-exp] + "." + s[len(s)-exp:]
}

package client

import (
	"fmt"
	"strconv"
	"strings"
)

// iso4217 lists the active ISO 4217 currencies with their exponent (minor
// unit digits): 1250 SEK is 12.50, 1250 JPY is 1250, 1250 KWD is 1.250.
const iso4217 = `AED2 AFN2 ALL2 AMD2 ANG2 AOA2 ARS2 AUD2 AWG2 AZN2 BAM2 BBD2 BDT2 BGN2 BHD3 BIF0
BMD2 BND2 BOB2 BOV2 BRL2 BSD2 BTN2 BWP2 BYN2 BZD2 CAD2 CDF2 CHE2 CHF2 CHW2 CLF4 CLP0 CNY2
COP2 COU2 CRC2 CUP2 CVE2 CZK2 DJF0 DKK2 DOP2 DZD2 EGP2 ERN2 ETB2 EUR2 FJD2 FKP2 GBP2 GEL2
GHS2 GIP2 GMD2 GNF0 GTQ2 GYD2 HKD2 HNL2 HTG2 HUF2 IDR2 ILS2 INR2 IQD3 IRR2 ISK0 JMD2 JOD3
JPY0 KES2 KGS2 KHR2 KMF0 KPW2 KRW0 KWD3 KYD2 KZT2 LAK2 LBP2 LKR2 LRD2 LSL2 LYD3 MAD2 MDL2
MGA2 MKD2 MMK2 MNT2 MOP2 MRU2 MUR2 MVR2 MWK2 MXN2 MXV2 MYR2 MZN2 NAD2 NGN2 NIO2 NOK2 NPR2
NZD2 OMR3 PAB2 PEN2 PGK2 PHP2 PKR2 PLN2 PYG0 QAR2 RON2 RSD2 RUB2 RWF0 SAR2 SBD2 SCR2 SDG2
SEK2 SGD2 SHP2 SLE2 SOS2 SRD2 SSP2 STN2 SVC2 SYP2 SZL2 THB2 TJS2 TMT2 TND3 TOP2 TRY2 TTD2
TWD2 TZS2 UAH2 UGX0 USD2 USN2 UYI0 UYU2 UYW4 UZS2 VED2 VES2 VND0 VUV0 WST2 XAF0 XCD2 XCG2
XOF0 XPF0 YER2 ZAR2 ZMW2 ZWG2`

var exponents = func() map[string]int {
	m := map[string]int{}
	for _, f := range strings.Fields(iso4217) {
		m[f[:3]] = int(f[3] - '0')
	}
	return m
}()

// CurrencyExponent returns the number of decimals of an ISO 4217
// currency (2 for SEK, 0 for JPY, 3 for KWD) and whether the code is known.
func CurrencyExponent(currency string) (int, bool) {
	e, ok := exponents[currency]
	return e, ok
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

package instore

import (
	"fmt"
	"strconv"
	"strings"
)

// iso4217 lists the active ISO 4217 currencies (list one of the ISO 4217
// maintenance agency as published on 2024-06-25, with the changes since:
// XCG in, ANG, BGN and CUC out; currency_iso_test.go checks it against
// testdata) with their minor unit digits: 1250 SEK is 12.50, 1250 JPY is 1250, 1250 KWD is 1.250. Funds
// codes (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW) are included, as a
// card scheme may settle in them; the codes for testing (XTS), no currency
// (XXX), precious metals (XAU, XAG, XPD, XPT) and bond units (XBA-XBD,
// XDR, XSU, XUA) are not, since no card payment is made in them.
const iso4217 = `AED2 AFN2 ALL2 AMD2 AOA2 ARS2 AUD2 AWG2 AZN2 BAM2 BBD2 BDT2 BHD3 BIF0
BMD2 BND2 BOB2 BOV2 BRL2 BSD2 BTN2 BWP2 BYN2 BZD2 CAD2 CDF2 CHE2 CHF2 CHW2 CLF4 CLP0 CNY2
COP2 COU2 CRC2 CUP2 CVE2 CZK2 DJF0 DKK2 DOP2 DZD2 EGP2 ERN2 ETB2 EUR2 FJD2 FKP2 GBP2 GEL2
GHS2 GIP2 GMD2 GNF0 GTQ2 GYD2 HKD2 HNL2 HTG2 HUF2 IDR2 ILS2 INR2 IQD3 IRR2 ISK0 JMD2 JOD3
JPY0 KES2 KGS2 KHR2 KMF0 KPW2 KRW0 KWD3 KYD2 KZT2 LAK2 LBP2 LKR2 LRD2 LSL2 LYD3 MAD2 MDL2
MGA2 MKD2 MMK2 MNT2 MOP2 MRU2 MUR2 MVR2 MWK2 MXN2 MXV2 MYR2 MZN2 NAD2 NGN2 NIO2 NOK2 NPR2
NZD2 OMR3 PAB2 PEN2 PGK2 PHP2 PKR2 PLN2 PYG0 QAR2 RON2 RSD2 RUB2 RWF0 SAR2 SBD2 SCR2 SDG2
SEK2 SGD2 SHP2 SLE2 SOS2 SRD2 SSP2 STN2 SVC2 SYP2 SZL2 THB2 TJS2 TMT2 TND3 TOP2 TRY2 TTD2
TWD2 TZS2 UAH2 UGX0 USD2 USN2 UYI0 UYU2 UYW4 UZS2 VED2 VES2 VND0 VUV0 WST2 XAF0 XCD2 XCG2
XOF0 XPF0 YER2 ZAR2 ZMW2 ZWG2`

var currencyExponents = func() map[string]int {
	m := map[string]int{}
	for _, f := range strings.Fields(iso4217) {
		m[f[:3]] = int(f[3] - '0')
	}
	return m
}()

// CurrencyExponent returns the number of decimals (ISO 4217 minor unit
// digits) of an active ISO 4217 currency: 2 for SEK, 0 for JPY, 3 for KWD,
// 4 for CLF; ok is false for any other code.
func CurrencyExponent(currency string) (digits int, ok bool) {
	digits, ok = currencyExponents[currency]
	return digits, ok
}

// Currencies returns every currency CurrencyExponent knows, with its
// digits.
func Currencies() map[string]int {
	m := make(map[string]int, len(currencyExponents))
	for c, d := range currencyExponents {
		m[c] = d
	}
	return m
}

// checkCurrency adds a field error unless code is an active ISO 4217
// currency.
func checkCurrency(f *FieldErrors, code string) {
	switch {
	case code == "":
		f.Add("/currency", "is required")
	case !currencyPattern.MatchString(code):
		f.Add("/currency", "must be an ISO 4217 alphabetic code such as SEK")
	default:
		if _, ok := currencyExponents[code]; !ok {
			f.Add("/currency", "is not an active ISO 4217 currency")
		}
	}
}

// AmountHint says how an amount is written, with an example in currency's
// decimals: "an integer in minor units, e.g. 1250 for 12.50 SEK" (for JPY
// "e.g. 1250 for 1250 JPY", for KWD "e.g. 1250 for 1.250 KWD"). A code
// that is not an active ISO 4217 currency (or none) gets the example in
// SEK.
func AmountHint(currency string) string {
	exp, ok := currencyExponents[currency]
	if !ok {
		currency, exp = "SEK", currencyExponents["SEK"]
	}
	const example = 1250
	return fmt.Sprintf("an integer in minor units, e.g. %d for %s %s", example, formatDecimals(example, exp), currency)
}

// FormatMinor writes an amount in minor units with its currency's
// decimals: FormatMinor(1250, "SEK") is "12.50", FormatMinor(1250, "JPY")
// "1250", FormatMinor(-5, "KWD") "-0.005". A code CurrencyExponent does
// not know is taken to have 2 decimals.
func FormatMinor(minor int64, currency string) string {
	exp, ok := currencyExponents[currency]
	if !ok {
		exp = 2
	}
	return formatDecimals(minor, exp)
}

// formatDecimals writes minor with exp decimals.
func formatDecimals(minor int64, exp int) string {
	sign, u := "", uint64(minor)
	if minor < 0 {
		sign, u = "-", -u
	}
	s := strconv.FormatUint(u, 10)
	if exp == 0 {
		return sign + s
	}
	if len(s) <= exp {
		s = strings.Repeat("0", exp-len(s)+1) + s
	}
	return sign + s[:len(s)-exp] + "." + s[len(s)-exp:]
}

// amountRangeMessage is the field error of an amount outside MinAmount to
// MaxAmount, or not an integer at all: the range and how an amount is
// written.
func amountRangeMessage(currency string) string {
	hint := AmountHint(currency)
	// "an integer in minor units from 1 to 99999999, e.g. ..."
	kind, example, _ := strings.Cut(hint, ", ")
	return fmt.Sprintf("must be %s from %d to %d, %s", kind, MinAmount, MaxAmount, example)
}

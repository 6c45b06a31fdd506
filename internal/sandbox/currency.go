package sandbox

import "github.com/instore-dev/instore"

// currencyDigits maps every ISO 4217 currency code to its minor-unit
// digits (SEK 2, JPY 0, KWD 3, CLF 4), for the amounts the page shows. It
// holds no table of its own: it is package instore's (instore.Currencies),
// the one the service validates with and the virtual terminals' screens
// and receipts use.
func currencyDigits() map[string]int { return instore.Currencies() }

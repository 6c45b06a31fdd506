package console

import (
	"sync"

	"github.com/instore-dev/instore/client"
)

// currencyDigits maps every ISO 4217 currency code to its minor-unit
// digits (SEK 2, JPY 0, KWD 3, CLF 4), for the amounts the page shows. It
// holds no table of its own: it reads the SDK's (client.CurrencyExponent),
// the one the virtual terminals' screens and receipts use too.
var currencyDigits = sync.OnceValue(func() map[string]int {
	m := map[string]int{}
	code := []byte("AAA")
	for a := byte('A'); a <= 'Z'; a++ {
		for b := byte('A'); b <= 'Z'; b++ {
			for c := byte('A'); c <= 'Z'; c++ {
				code[0], code[1], code[2] = a, b, c
				if e, ok := client.CurrencyExponent(string(code)); ok {
					m[string(code)] = e
				}
			}
		}
	}
	return m
})

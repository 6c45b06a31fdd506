package instore_test

import (
	"encoding/xml"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/instore-dev/instore"
)

// TestCurrencyDigitsAreISO4217 checks the currencies the service accepts,
// and their decimals (which the SDK, the console and the virtual terminals
// use too), against
// ISO 4217 list one as published by its maintenance agency (SIX) on
// 2024-06-25 (testdata), with the changes since named one by one.
func TestCurrencyDigitsAreISO4217(t *testing.T) {
	b, err := os.ReadFile("testdata/iso4217-list-one-2024-06-25.xml")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Published string `xml:"Pblshd,attr"`
		Entries   []struct {
			Code       string `xml:"Ccy"`
			MinorUnits string `xml:"CcyMnrUnts"`
		} `xml:"CcyTbl>CcyNtry"`
	}
	if err := xml.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, e := range list.Entries {
		// Entries without a currency (Antarctica) and with "N.A." minor
		// units (gold, SDR, test codes) are no currency an amount is in.
		n, err := strconv.Atoi(e.MinorUnits)
		if e.Code == "" || err != nil {
			continue
		}
		if prev, ok := want[e.Code]; ok && prev != n {
			t.Fatalf("the list gives %s both %d and %d decimals", e.Code, prev, n)
		}
		want[e.Code] = n
	}
	if list.Published != "2024-06-25" || len(want) < 150 {
		t.Fatalf("read %d currencies from the list of %q", len(want), list.Published)
	}
	// Since that edition: the Caribbean guilder (XCG, 2 decimals) came in
	// for Curaçao and Sint Maarten (in use from 31 March 2025). The SDK's
	// table leaves out the Cuban convertible peso (CUC), out of circulation
	// since 2021 (its decimals would be 2 either way).
	want["XCG"] = 2
	delete(want, "CUC")
	// Withdrawn since: the Netherlands Antillean guilder (ANG, replaced by
	// XCG) and the Bulgarian lev (BGN, Bulgaria adopted the euro on
	// 1 January 2026).
	delete(want, "ANG")
	delete(want, "BGN")

	got := instore.Currencies()
	for _, code := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[code]; !ok || g != want[code] {
			t.Errorf("%s: %d decimals (known %v), ISO 4217 says %d", code, g, ok, want[code])
		}
	}
	for _, code := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[code]; !ok {
			t.Errorf("%s is no current ISO 4217 currency", code)
		}
	}
	// The ones the console got wrong before, for the record.
	for code, n := range map[string]int{"JPY": 0, "KRW": 0, "ISK": 0, "VND": 0, "XOF": 0, "UGX": 0, "PYG": 0,
		"BHD": 3, "KWD": 3, "JOD": 3, "OMR": 3, "TND": 3, "LYD": 3, "IQD": 3, "CLF": 4, "UYW": 4, "SEK": 2} {
		if got[code] != n {
			t.Errorf("%s: %d decimals, want %d", code, got[code], n)
		}
	}
}

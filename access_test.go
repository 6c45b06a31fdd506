package instore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0", "1.0.0", 0},
		{"1.10.0", "1.9.2", 1},
		{"1.9.2", "1.10.0", -1},
		{"2", "1.99.99", 1},
		{"", "0.0.1", -1},
		{"0.0.1", "", 1},
		{"1.0.0-beta", "1.0.0", 1}, // text parts compare as text
		{"9.9.9", "10.0.0", -1},
		{"1.2.3.4", "1.2.3", 1},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestParseCatalogue(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	valid := `{"packages":[{"packageId":"ct-1.2.0","model":"countertop","name":"Countertop app","version":"1.2.0","mandatory":true,` +
		`"sizeBytes":10,"sha256":"` + sha + `","releasedAt":"2026-02-02T09:00:00.1234567+01:00"}]}`
	ps, err := ParseCatalogue(strings.NewReader(valid))
	if err != nil {
		t.Fatalf("ParseCatalogue(valid) = %v", err)
	}
	want := []*Package{{ID: "ct-1.2.0", Model: ModelCountertop, Name: "Countertop app", Version: "1.2.0", Mandatory: true,
		SizeBytes: 10, SHA256: sha, ReleasedAt: time.Date(2026, 2, 2, 8, 0, 0, 123456000, time.UTC)}}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Errorf("ParseCatalogue(valid) (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, text string
		fields     []string // the fields the error must name
	}{
		{"not JSON", `{`, nil},
		{"unknown member", `{"packages":[],"x":1}`, nil},
		{"no packages", `{}`, []string{"/packages"}},
		{"null package", `{"packages":[null]}`, []string{"/packages/0"}},
		{"every field wrong", `{"packages":[{"packageId":"a b","customerId":"c d","model":"toaster","name":" ","version":"1.x",` +
			`"sizeBytes":0,"sha256":"ABC"}]}`,
			[]string{"/packages/0/packageId", "/packages/0/customerId", "/packages/0/model", "/packages/0/name", "/packages/0/version",
				"/packages/0/sizeBytes", "/packages/0/sha256", "/packages/0/releasedAt"}},
		{"duplicate id", `{"packages":[` + valid[13:len(valid)-2] + `,` + valid[13:len(valid)-2] + `]}`, []string{"/packages/1/packageId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCatalogue(strings.NewReader(tc.text))
			if err == nil {
				t.Fatal("ParseCatalogue() = nil, want an error")
			}
			if tc.fields == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != EValidation {
				t.Fatalf("ParseCatalogue() = %v, want a validation error", err)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Field)
			}
			if diff := cmp.Diff(tc.fields, got); diff != "" {
				t.Errorf("fields named (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMinVersion(t *testing.T) {
	newest := []*Package{{Version: "1.3.0"}, {Version: "1.2.0", Mandatory: true}, {Version: "1.0.0", Mandatory: true}}
	if got := MinVersion(newest); got != "1.2.0" {
		t.Errorf("MinVersion() = %q, want the newest mandatory 1.2.0", got)
	}
	if got := MinVersion(newest[:1]); got != "" {
		t.Errorf("MinVersion(none mandatory) = %q, want none", got)
	}
}

func TestAccessRequestValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    TerminalIDRequest
		fields []string
	}{
		{"minimal", TerminalIDRequest{CustomerID: "cus_1"}, nil},
		{"everything", TerminalIDRequest{CustomerID: "cus_1", MerchantID: "mer_1", SerialNumber: "SN-1.a", Model: ModelPINPad}, nil},
		{"nothing", TerminalIDRequest{}, []string{"/customerId"}},
		{"bad shapes", TerminalIDRequest{CustomerID: "cus 1", MerchantID: "m/1", SerialNumber: "S N", Model: "toaster"},
			[]string{"/customerId", "/merchantId", "/serialNumber", "/model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var e *Error
			if err := tc.req.Validate(); errors.As(err, &e) {
				for _, f := range e.Fields {
					got = append(got, f.Field)
				}
			}
			if diff := cmp.Diff(tc.fields, got); diff != "" {
				t.Errorf("Validate() fields (-want +got):\n%s", diff)
			}
		})
	}
	nb, err := (&UpdateRequest{TerminalID: "10000001", PackageID: "p", NotBefore: "2026-03-02T23:00:00+01:00"}).Validate()
	if err != nil || nb == nil || !nb.Equal(time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC)) || nb.Location() != time.UTC {
		t.Errorf("UpdateRequest.Validate() = %v, %v; want 22:00 UTC", nb, err)
	}
	if _, err := (&UpdateRequest{TerminalID: "1", PackageID: "a b", NotBefore: "soon"}).Validate(); err == nil {
		t.Error("UpdateRequest.Validate(bad) = nil, want an error")
	}
}

// TestAccessWire checks the Access API's wire forms member by member: an
// empty optional member is null, a set one its value; a package shows no
// customer; a terminal's updates take the update's own form.
func TestAccessWire(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	term := &Terminal{TerminalID: "10000001", CustomerID: "cus_1", CreatedAt: at}
	linked := &Terminal{TerminalID: "10000002", CustomerID: "cus_1", MerchantID: "mer_1", SerialNumber: "SN-1", LinkedAt: &at, CreatedAt: at}
	upd := &Update{ID: "upd_1", TerminalID: "10000002", PackageID: "ct-1.1.0", Status: UpdateFailed, Reason: "checksum mismatch", CreatedAt: at, UpdatedAt: at}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"allocated, bare", (&AllocatedTerminal{Terminal: term}).Wire(),
			`{"terminalId":"10000001","customerId":"cus_1","merchantId":null,"serialNumber":null,"model":null,"createdAt":"2026-03-02T10:00:00Z"}`},
		{"allocated, bound", (&AllocatedTerminal{Terminal: linked, Model: "mobile"}).Wire(),
			`{"terminalId":"10000002","customerId":"cus_1","merchantId":"mer_1","serialNumber":"SN-1","model":"mobile","createdAt":"2026-03-02T10:00:00Z"}`},
		{"info, unbound", (&TerminalInfo{Terminal: term, Model: "pinpad"}).Wire(),
			`{"terminalId":"10000001","customerId":"cus_1","merchantId":null,"serialNumber":null,"model":"pinpad","softwareVersion":null,` +
				`"minSoftwareVersion":null,"linked":false,"online":false,"lastSeenAt":null,"pendingUpdate":null,"lastUpdate":null}`},
		{"info, linked", (&TerminalInfo{Terminal: linked, Device: &Device{SerialNumber: "SN-1", SoftwareVersion: "1.0.0", LastSeenAt: &at},
			Model: "countertop", Online: true, MinSoftwareVersion: "1.0.0", LastUpdate: upd}).Wire(),
			`{"terminalId":"10000002","customerId":"cus_1","merchantId":"mer_1","serialNumber":"SN-1","model":"countertop","softwareVersion":"1.0.0",` +
				`"minSoftwareVersion":"1.0.0","linked":true,"online":true,"lastSeenAt":"2026-03-02T10:00:00Z","pendingUpdate":null,` +
				`"lastUpdate":{"updateId":"upd_1","terminalId":"10000002","packageId":"ct-1.1.0","status":"FAILED","reason":"checksum mismatch",` +
				`"softwareVersion":null,"notBefore":null,"createdAt":"2026-03-02T10:00:00Z","updatedAt":"2026-03-02T10:00:00Z"}}`},
		{"package of a customer", (&Package{ID: "ct-own", CustomerID: "cus_1", Model: "countertop", Name: "Own", Version: "1.1.0",
			SizeBytes: 10, SHA256: strings.Repeat("a", 64), ReleasedAt: at}).Wire(),
			`{"packageId":"ct-own","model":"countertop","name":"Own","version":"1.1.0","mandatory":false,"sizeBytes":10,` +
				`"sha256":"` + strings.Repeat("a", 64) + `","releasedAt":"2026-03-02T10:00:00Z"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("wire form\n got %s\nwant %s", b, tc.want)
			}
		})
	}
	// Package.Wire leaves the catalogue's package as it is.
	p := &Package{ID: "ct-own", CustomerID: "cus_1"}
	if p.Wire(); p.CustomerID != "cus_1" {
		t.Errorf("Wire changed the package: %+v", p)
	}
}

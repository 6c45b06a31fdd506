package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newDevice returns a countertop device of a customer ("" for none) that
// has never said hello and shows no link code.
func newDevice(serial, customerID string, created time.Time) *instore.Device {
	return &instore.Device{
		SerialNumber: serial, Model: instore.ModelCountertop, CustomerID: customerID,
		SecretHash: hash("device secret " + serial), SoftwareVersion: "1.0.0", CreatedAt: created,
	}
}

// devices are the devices, by serial number.
var devices = kind[instore.Device]{"Device", instore.Store.CreateDevice, instore.Store.Device,
	func(d *instore.Device) string { return d.SerialNumber }}

var deviceTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		seen := at(3)
		for _, d := range []*instore.Device{
			{SerialNumber: "SN-FULL", Model: instore.ModelMobile, CustomerID: "cus_1", SecretHash: hash("secret full"),
				SoftwareVersion: "2.4.1", LinkCode: "K7Q2-M9XA", LastSeenAt: &seen, CreatedAt: base},
			{SerialNumber: "SN-BARE", Model: instore.ModelPINPad, SecretHash: hash("secret bare"), CreatedAt: at(1)},
		} {
			checkRoundTrip(t, "Device", s.CreateDevice, s.Device, d, d.SerialNumber)
		}
		got, err := s.DeviceByLinkCode(t.Context(), "K7Q2-M9XA")
		if err != nil {
			t.Fatalf("DeviceByLinkCode() = %v", err)
		}
		if got.SerialNumber != "SN-FULL" {
			t.Errorf("DeviceByLinkCode() = %q, want SN-FULL", got.SerialNumber)
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		devices.mustCreate(t, s, newDevice("SN-1", "", at(0))) // shows no code
		checkMissing(t, "Device(missing)", s.Device, "SN-MISSING-3f1c", "SN-MISSING-3f1c")
		checkMissing(t, "DeviceByLinkCode(missing)", s.DeviceByLinkCode, "CODE-MISSING-8e2d", "CODE-MISSING-8e2d")
		checkMissing(t, `DeviceByLinkCode("")`, s.DeviceByLinkCode, "", "")
		err := s.DevicesSeen(t.Context(), seenOne("SN-MISSING-3f1c", "1.0.1", at(1)))
		checkNotFound(t, "DevicesSeen(missing)", err, "SN-MISSING-3f1c")
		err = s.SetLinkCode(t.Context(), "SN-MISSING-3f1c", "CODE-1")
		checkNotFound(t, "SetLinkCode(missing)", err, "SN-MISSING-3f1c")
	}},
	{"Conflict", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		d := newDevice("SN-1", "cus_1", at(0))
		d.LinkCode = "CODE-1"
		devices.mustCreate(t, s, d)
		for _, tc := range []struct {
			name string
			d    *instore.Device
		}{
			{"duplicate serial", newDevice("SN-1", "", at(1))},
			{"duplicate link code", &instore.Device{SerialNumber: "SN-2", Model: instore.ModelCountertop,
				SecretHash: hash("x"), LinkCode: "CODE-1", CreatedAt: at(1)}},
			{"missing customer", newDevice("SN-3", "cus_missing", at(1))},
		} {
			checkConflict(t, "CreateDevice("+tc.name+")", s.CreateDevice(t.Context(), tc.d))
		}
		if d := diff(asStored(d), devices.mustGet(t, s, "SN-1")); d != "" {
			t.Errorf("Device() after refused creates mismatch (-want +got):\n%s", d)
		}
		for _, serial := range []string{"SN-2", "SN-3"} {
			checkMissing(t, "Device(refused)", s.Device, serial, "")
		}
	}},
	{"List", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_a", at(0))
		mustCreateCustomer(t, s, "cus_b", at(0))
		// Created out of order: the list is ordered by serial number.
		a2 := devices.mustCreate(t, s, newDevice("SN-A2", "cus_a", at(0)))
		none := devices.mustCreate(t, s, newDevice("SN-0", "", at(1)))
		b1 := devices.mustCreate(t, s, newDevice("SN-B1", "cus_b", at(2)))
		a1 := devices.mustCreate(t, s, newDevice("SN-A1", "cus_a", at(3)))
		checkLists(t, "Devices", s.Devices, asStored[instore.Device], []listCase[*instore.Device]{
			{"cus_a", []*instore.Device{a1, a2}},
			{"cus_b", []*instore.Device{b1}},
			{"", []*instore.Device{none, a1, a2, b1}},
			{"cus_none", nil},
		})
	}},
	{"Seen", func(t *testing.T, s instore.Store) {
		d := devices.mustCreate(t, s, newDevice("SN-1", "", at(0)))
		other := devices.mustCreate(t, s, newDevice("SN-2", "", at(0)))
		for i, version := range []string{"1.0.1", "1.1.0"} {
			when := at(10 + i)
			if err := s.DevicesSeen(t.Context(), seenOne(d.SerialNumber, version, when)); err != nil {
				t.Fatalf("DevicesSeen(%q) = %v", version, err)
			}
			checkSeen(t, s, d, version, when)
		}
		if d := diff(asStored(other), devices.mustGet(t, s, other.SerialNumber)); d != "" {
			t.Errorf("DevicesSeen changed another device (-want +got):\n%s", d)
		}
		if err := s.DevicesSeen(t.Context(), nil); err != nil {
			t.Errorf("DevicesSeen(none) = %v", err)
		}
	}},
	{"SeenTogether", func(t *testing.T, s instore.Store) {
		// The hellos of many devices in one call: each device gets its
		// last record's version and time, every event is stored in the
		// order given; with a serial number of no device, nothing is.
		ctx := t.Context()
		var ds []*instore.Device
		for _, serial := range []string{"SN-1", "SN-2", "SN-3", "SN-4"} {
			ds = append(ds, devices.mustCreate(t, s, newDevice(serial, "", at(0))))
		}
		ev := func(terminal string, i int) []instore.OutboxEvent {
			return []instore.OutboxEvent{{MerchantID: "mer_1", Type: instore.EventTerminalOnline, TerminalID: terminal,
				At: at(i), Data: []byte(`{}`)}}
		}
		must(t, s.DevicesSeen(ctx, []instore.DeviceSeen{
			{SerialNumber: "SN-2", SoftwareVersion: "2.0.0", At: at(10), Events: ev("10000002", 10)},
			{SerialNumber: "SN-1", SoftwareVersion: "1.1.0", At: at(11), Events: ev("10000001", 11)},
			{SerialNumber: "SN-2", SoftwareVersion: "2.0.1", At: at(12), Events: ev("10000002", 12)},
			{SerialNumber: "SN-3", SoftwareVersion: "3.0.0", At: at(13)},
		}))
		checkSeen(t, s, ds[0], "1.1.0", at(11))
		checkSeen(t, s, ds[1], "2.0.1", at(12))
		checkSeen(t, s, ds[2], "3.0.0", at(13))
		if d := diff(asStored(ds[3]), devices.mustGet(t, s, "SN-4")); d != "" {
			t.Errorf("DevicesSeen changed a device not in it (-want +got):\n%s", d)
		}
		err := s.DevicesSeen(ctx, []instore.DeviceSeen{
			{SerialNumber: "SN-4", SoftwareVersion: "4.0.0", At: at(20), Events: ev("10000004", 20)},
			{SerialNumber: "SN-MISSING-3f1c", SoftwareVersion: "1.0.0", At: at(21)},
		})
		checkNotFound(t, "DevicesSeen(one missing)", err, "SN-MISSING-3f1c")
		if d := diff(asStored(ds[3]), devices.mustGet(t, s, "SN-4")); d != "" {
			t.Errorf("a refused DevicesSeen changed a device (-want +got):\n%s", d)
		}
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		l, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range l {
			got = append(got, fmt.Sprintf("%s@%d", e.TerminalID, e.At.Sub(stored(base))/time.Minute))
		}
		if want := []string{"10000002@10", "10000001@11", "10000002@12"}; !slices.Equal(got, want) {
			t.Errorf("events after DevicesSeen = %v, want %v (in the order given, none of the refused call)", got, want)
		}
	}},
	{"LinkCode", func(t *testing.T, s instore.Store) {
		d1 := devices.mustCreate(t, s, newDevice("SN-1", "", at(0)))
		d2 := devices.mustCreate(t, s, newDevice("SN-2", "", at(0)))
		byCode := func(code, want string) {
			t.Helper()
			got, err := s.DeviceByLinkCode(t.Context(), code)
			if err != nil {
				t.Fatalf("DeviceByLinkCode(%q) = %v", code, err)
			}
			if got.SerialNumber != want {
				t.Errorf("DeviceByLinkCode(%q) = %q, want %q", code, got.SerialNumber, want)
			}
		}
		if err := s.SetLinkCode(t.Context(), d1.SerialNumber, "CODE-A"); err != nil {
			t.Fatalf("SetLinkCode(CODE-A) = %v", err)
		}
		byCode("CODE-A", "SN-1")
		checkConflict(t, "SetLinkCode(code shown by another device)", s.SetLinkCode(t.Context(), d2.SerialNumber, "CODE-A"))
		byCode("CODE-A", "SN-1")
		if got := devices.mustGet(t, s, d2.SerialNumber).LinkCode; got != "" {
			t.Errorf("Device(SN-2).LinkCode = %q after a refused SetLinkCode, want empty", got)
		}
		// Setting the code a device shows already is not a conflict.
		if err := s.SetLinkCode(t.Context(), d1.SerialNumber, "CODE-A"); err != nil {
			t.Errorf("SetLinkCode(same code again) = %v", err)
		}
		// A new code replaces the old one.
		if err := s.SetLinkCode(t.Context(), d1.SerialNumber, "CODE-B"); err != nil {
			t.Fatalf("SetLinkCode(CODE-B) = %v", err)
		}
		byCode("CODE-B", "SN-1")
		checkMissing(t, "DeviceByLinkCode(replaced code)", s.DeviceByLinkCode, "CODE-A", "")
		// Clearing: several devices may show no code.
		for _, serial := range []string{d1.SerialNumber, d2.SerialNumber} {
			if err := s.SetLinkCode(t.Context(), serial, ""); err != nil {
				t.Fatalf("SetLinkCode(%q, \"\") = %v", serial, err)
			}
			if got := devices.mustGet(t, s, serial).LinkCode; got != "" {
				t.Errorf("Device(%q).LinkCode = %q after clearing, want empty", serial, got)
			}
		}
		checkMissing(t, "DeviceByLinkCode(cleared code)", s.DeviceByLinkCode, "CODE-B", "")
		// A cleared code is free for another device.
		if err := s.SetLinkCode(t.Context(), d2.SerialNumber, "CODE-B"); err != nil {
			t.Fatalf("SetLinkCode(freed code) = %v", err)
		}
		byCode("CODE-B", "SN-2")
	}},
}

// seenOne is the hello of one device, with its events, for DevicesSeen.
func seenOne(serial, version string, when time.Time, evs ...instore.OutboxEvent) []instore.DeviceSeen {
	return []instore.DeviceSeen{{SerialNumber: serial, SoftwareVersion: version, At: when, Events: evs}}
}

// checkSeen checks that d is stored as it was created but for the
// software version and time of a hello.
func checkSeen(t *testing.T, s instore.Store, d *instore.Device, version string, when time.Time) {
	t.Helper()
	want := asStored(d)
	want.SoftwareVersion = version
	want.LastSeenAt = storedPtr(&when)
	if diff := diff(want, devices.mustGet(t, s, d.SerialNumber)); diff != "" {
		t.Errorf("Device(%s) after DevicesSeen(%q) mismatch (-want +got):\n%s", d.SerialNumber, version, diff)
	}
}

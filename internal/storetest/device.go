package storetest

import (
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
		err := s.DeviceSeen(t.Context(), "SN-MISSING-3f1c", "1.0.1", at(1))
		checkNotFound(t, "DeviceSeen(missing)", err, "SN-MISSING-3f1c")
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
			if err := s.DeviceSeen(t.Context(), d.SerialNumber, version, when); err != nil {
				t.Fatalf("DeviceSeen(%q) = %v", version, err)
			}
			want := asStored(d)
			want.SoftwareVersion = version
			want.LastSeenAt = storedPtr(&when)
			if d := diff(want, devices.mustGet(t, s, d.SerialNumber)); d != "" {
				t.Errorf("Device() after DeviceSeen(%q) mismatch (-want +got):\n%s", version, d)
			}
		}
		if d := diff(asStored(other), devices.mustGet(t, s, other.SerialNumber)); d != "" {
			t.Errorf("DeviceSeen changed another device (-want +got):\n%s", d)
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

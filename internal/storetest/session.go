package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// checkSessions fails unless DeviceSessions(serials) returns want, in any
// order.
func checkSessions(t *testing.T, s instore.Store, name string, serials []string, want ...*instore.DeviceSession) {
	t.Helper()
	got, err := s.DeviceSessions(t.Context(), serials)
	if err != nil {
		t.Fatalf("DeviceSessions(%s) = %v", name, err)
	}
	bySerial := func(a, b *instore.DeviceSession) int {
		return strings.Compare(a.Device.SerialNumber, b.Device.SerialNumber)
	}
	slices.SortFunc(got, bySerial)
	slices.SortFunc(want, bySerial)
	if d := diff(want, got); d != "" {
		t.Errorf("DeviceSessions(%s) mismatch (-want +got):\n%s", name, d)
	}
}

// bareSession is the session of a linked device with nothing busy or owed:
// its terminal ID and device rows as the store returns them.
func bareSession(t *testing.T, s instore.Store, terminalID, serial string) *instore.DeviceSession {
	t.Helper()
	return &instore.DeviceSession{Terminal: mustTerminal(t, s, terminalID), Device: devices.mustGet(t, s, serial)}
}

var sessionTests = []test{
	// DevicesBySerial reads the devices of many serial numbers at once:
	// those that exist, each once whatever its repeats, across the
	// statements of more than 512.
	{"BySerial", func(t *testing.T, s instore.Store) {
		want := map[string]*instore.Device{}
		var ask []string
		for i := range 600 {
			d := newDevice(fmt.Sprintf("SN-%04d", i), "", at(0))
			devices.mustCreate(t, s, d)
			want[d.SerialNumber] = asStored(d)
			ask = append(ask, fmt.Sprintf("SN-MISSING-%d", i), d.SerialNumber)
		}
		ask = append(ask, ask[1])
		got, err := s.DevicesBySerial(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		bySerial := map[string]*instore.Device{}
		for _, d := range got {
			bySerial[d.SerialNumber] = d
		}
		if d := diff(want, bySerial); d != "" || len(got) != len(want) {
			t.Fatalf("DevicesBySerial: %d devices (-want +got):\n%s", len(got), d)
		}
		if got, err := s.DevicesBySerial(t.Context(), []string{"SN-MISSING"}); err != nil || len(got) != 0 {
			t.Fatalf("DevicesBySerial(missing) = %v, %v", got, err)
		}
	}},
	{"DeviceSessions", func(t *testing.T, s instore.Store) {
		// SN-1 and SN-2 linked to a and b, SN-3 a device not linked, SN-X
		// no device at all.
		a := updateFixture(t, s)
		b := seedTerminal(t, s, "SN-2")
		devices.mustCreate(t, s, newDevice("SN-3", "cus_1", at(0)))
		all := []string{"SN-1", "SN-2", "SN-3", "SN-X"}
		checkSessions(t, s, "nothing busy", all, bareSession(t, s, a, "SN-1"), bareSession(t, s, b, "SN-2"))
		checkSessions(t, s, "none", nil)
		checkSessions(t, s, "not linked and unknown", []string{"SN-3", "SN-X"})

		// a gets a PENDING transaction owing SN-1 an open effect and an
		// unfinished update; b a PENDING close (a close and a transaction
		// do not run together), sent to SN-2.
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", a, "SN-1", instore.StatusPending, at(1)))
		cancel := newEffect("eff_1", instore.EffectCancel, "SN-1", tx.ID, instore.CancelDeadline, at(2))
		mustOwe(t, s, tx, cancel)
		tx = mustGet(t, "Transaction", s.Transaction, tx.ID)
		updates.mustCreate(t, s, newUpdate("upd_1", a, "pkg-1", at(2)))
		nb := newBatch("bat_1", b, at(0), at(3))
		nb.SerialNumber = "SN-2"
		batch := mustCreateBatch(t, s, nb)
		busy := bareSession(t, s, a, "SN-1")
		busy.ActiveID, busy.Update, busy.Owed = "txn_1", updates.mustGet(t, s, "upd_1"), true
		closing := bareSession(t, s, b, "SN-2")
		closing.BatchID, closing.BatchSerial = "bat_1", "SN-2"
		checkSessions(t, s, "busy", all, busy, closing)
		checkSessions(t, s, "busy alone", []string{"SN-1"}, busy)

		// Each part read in more than one statement: 600 serial numbers,
		// SN-2 in the second 512 and SN-1 in the first.
		many := make([]string, 600)
		for i := range many {
			many[i] = fmt.Sprintf("SN-NONE-%d", i)
		}
		many[7], many[550] = "SN-1", "SN-2"
		checkSessions(t, s, "600 serial numbers", many, busy, closing)
		checkSessions(t, s, "17 serial numbers", many[:17], busy)

		// The same rows ended: the transaction final (its effect still
		// owed), then the effect done, the update installed, the close
		// reported.
		final := expired(tx)
		mustCommit(t, s, &instore.Change{T: final, From: tx.Version})
		busy.ActiveID = ""
		checkSessions(t, s, "final transaction", []string{"SN-1"}, busy)
		mustEndEffect(t, s, "eff_1", "SN-1", instore.EffectConfirmed, at(4))
		busy.Owed = false
		checkSessions(t, s, "effect done", []string{"SN-1"}, busy)
		u := updates.mustGet(t, s, "upd_1")
		installed := *u
		installed.Status, installed.SoftwareVersion, installed.UpdatedAt = instore.UpdateInstalled, "2.0.0", stored(at(5))
		if err := s.SetUpdateStatus(t.Context(), &installed, nil, u.Status); err != nil {
			t.Fatalf("SetUpdateStatus(INSTALLED) = %v", err)
		}
		busy.Update, busy.Device = nil, devices.mustGet(t, s, "SN-1")
		checkSessions(t, s, "update installed", []string{"SN-1"}, busy)
		checkSessions(t, s, "close pending", []string{"SN-2"}, closing)
		if err := s.UpdateBatch(t.Context(), closedBatch(batch, at(6)), instore.BatchPending); err != nil {
			t.Fatalf("UpdateBatch(CLOSED) = %v", err)
		}
		checkSessions(t, s, "all ended", all, bareSession(t, s, a, "SN-1"), bareSession(t, s, b, "SN-2"))
	}},
}

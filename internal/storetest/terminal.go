package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// firstTerminalID is the first terminal ID a fresh store hands out.
const firstTerminalID = 10000001

func mustAllocateTerminal(t *testing.T, s instore.Store, customerID, merchantID string, created time.Time) *instore.Terminal {
	t.Helper()
	term := &instore.Terminal{CustomerID: customerID, MerchantID: merchantID, CreatedAt: created}
	if err := s.AllocateTerminalID(t.Context(), term); err != nil {
		t.Fatalf("AllocateTerminalID() = %v", err)
	}
	return term
}

// mustTerminal reads a terminal that must exist.
func mustTerminal(t *testing.T, s instore.Store, terminalID string) *instore.Terminal {
	t.Helper()
	return mustGet(t, "Terminal", s.Terminal, terminalID)
}

// mustLink links and checks what LinkTerminal returns.
func mustLink(t *testing.T, s instore.Store, terminalID, serial string, when time.Time, wantPrevSerial, wantPrevTerminalID string) {
	t.Helper()
	prevSerial, prevTerminalID, err := s.LinkTerminal(t.Context(), terminalID, serial, when)
	if err != nil {
		t.Fatalf("LinkTerminal(%q, %q) = %v", terminalID, serial, err)
	}
	if prevSerial != wantPrevSerial || prevTerminalID != wantPrevTerminalID {
		t.Errorf("LinkTerminal(%q, %q) = (%q, %q), want (%q, %q)",
			terminalID, serial, prevSerial, prevTerminalID, wantPrevSerial, wantPrevTerminalID)
	}
}

// checkLinked fails unless terminalID is linked to serial (at when) or,
// with serial "", unlinked.
func checkLinked(t *testing.T, s instore.Store, terminalID, serial string, when time.Time) {
	t.Helper()
	got := mustTerminal(t, s, terminalID)
	var wantAt *time.Time
	if serial != "" {
		wantAt = storedPtr(&when)
	}
	if got.SerialNumber != serial || diff(wantAt, got.LinkedAt) != "" {
		t.Errorf("Terminal(%q) linked to %q at %v, want %q at %v", terminalID, got.SerialNumber, got.LinkedAt, serial, wantAt)
	}
	if got.Linked() != (serial != "") {
		t.Errorf("Terminal(%q).Linked() = %v, want %v", terminalID, got.Linked(), serial != "")
	}
}

// checkBound fails unless TerminalBySerial(serial) is terminalID or, with
// terminalID "", not found.
func checkBound(t *testing.T, s instore.Store, serial, terminalID string) {
	t.Helper()
	got, err := s.TerminalBySerial(t.Context(), serial)
	if terminalID == "" {
		checkNotFound(t, "TerminalBySerial(unlinked device)", err, "")
		return
	}
	if err != nil {
		t.Fatalf("TerminalBySerial(%q) = %v", serial, err)
	}
	if got.TerminalID != terminalID {
		t.Errorf("TerminalBySerial(%q) = %q, want %q", serial, got.TerminalID, terminalID)
	}
}

// linkFixture creates cus_1 with mer_1, terminal IDs a and b of mer_1 and
// unlinked devices SN-1 and SN-2 without a customer, showing link codes
// CODE-1 and CODE-2.
func linkFixture(t *testing.T, s instore.Store) (a, b string) {
	t.Helper()
	mustCreateCustomer(t, s, "cus_1", at(0))
	mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
	for _, serial := range []string{"SN-1", "SN-2"} {
		d := newDevice(serial, "", at(0))
		d.LinkCode = "CODE-" + serial[len(serial)-1:]
		devices.mustCreate(t, s, d)
	}
	a = mustAllocateTerminal(t, s, "cus_1", "mer_1", at(1)).TerminalID
	b = mustAllocateTerminal(t, s, "cus_1", "mer_1", at(2)).TerminalID
	return a, b
}

var terminalTests = []test{
	{"Allocate", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		devices.mustCreate(t, s, newDevice("SN-1", "cus_1", at(0)))
		linked := at(4)
		for i, term := range []*instore.Terminal{
			{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: base},
			{CustomerID: "cus_1", CreatedAt: at(1)}, // no merchant yet
			{CustomerID: "cus_1", MerchantID: "mer_1", SerialNumber: "SN-1", LinkedAt: &linked, CreatedAt: at(2)},
		} {
			if err := s.AllocateTerminalID(t.Context(), term); err != nil {
				t.Fatalf("AllocateTerminalID(#%d) = %v", i, err)
			}
			if want := strconv.Itoa(firstTerminalID + i); term.TerminalID != want {
				t.Errorf("AllocateTerminalID(#%d) on a fresh store assigned %q, want %q", i, term.TerminalID, want)
			}
			if d := diff(asStored(term), mustTerminal(t, s, term.TerminalID)); d != "" {
				t.Errorf("Terminal(#%d) mismatch (-want +got):\n%s", i, d)
			}
		}
		checkBound(t, s, "SN-1", strconv.Itoa(firstTerminalID+2))
	}},
	{"AllocateConflict", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		devices.mustCreate(t, s, newDevice("SN-1", "cus_1", at(0)))
		linked := mustAllocateTerminal(t, s, "cus_1", "", at(0))
		mustLink(t, s, linked.TerminalID, "SN-1", at(1), "", "")
		for _, tc := range []struct {
			name string
			term *instore.Terminal
		}{
			{"missing customer", &instore.Terminal{CustomerID: "cus_missing", CreatedAt: at(1)}},
			{"missing merchant", &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_missing", CreatedAt: at(1)}},
			{"missing device", &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-MISSING", CreatedAt: at(1)}},
			{"device linked elsewhere", &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-1", CreatedAt: at(1)}},
		} {
			checkConflict(t, "AllocateTerminalID("+tc.name+")", s.AllocateTerminalID(t.Context(), tc.term))
			if tc.term.TerminalID != "" {
				t.Errorf("AllocateTerminalID(%s) refused but set TerminalID %q", tc.name, tc.term.TerminalID)
			}
		}
		checkBound(t, s, "SN-1", linked.TerminalID)
		// The next allocation still works and hands out an unused ID.
		next := mustAllocateTerminal(t, s, "cus_1", "", at(2))
		if n, _ := strconv.Atoi(next.TerminalID); n <= firstTerminalID {
			t.Errorf("AllocateTerminalID() after refusals = %q, want an ID above %d", next.TerminalID, firstTerminalID)
		}
	}},
	{"AllocateConcurrent", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		const workers, each = 32, 8
		var ids [workers][each]string
		errs := atOnce(workers, func(w int) error {
			for i := range each {
				term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: at(w)}
				if err := s.AllocateTerminalID(t.Context(), term); err != nil {
					return fmt.Errorf("worker %d, allocation %d: %w", w, i, err)
				}
				ids[w][i] = term.TerminalID
			}
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent AllocateTerminalID: %v", err)
		}
		seen := map[string]bool{}
		highest := 0
		for w := range workers {
			for _, id := range ids[w] {
				n := checkTerminalID(t, id)
				if seen[id] {
					t.Errorf("terminal ID %s handed out twice", id)
				}
				seen[id] = true
				highest = max(highest, n)
			}
		}
		if len(seen) != workers*each {
			t.Errorf("concurrent AllocateTerminalID handed out %d distinct IDs, want %d", len(seen), workers*each)
		}
		// Later allocations never hand out an ID again.
		for range each {
			term := mustAllocateTerminal(t, s, "cus_1", "mer_1", at(100))
			n := checkTerminalID(t, term.TerminalID)
			if seen[term.TerminalID] || n <= highest {
				t.Errorf("AllocateTerminalID() after %d allocations = %s, want a new ID above %d", len(seen), term.TerminalID, highest)
			}
			seen[term.TerminalID] = true
			highest = n
		}
		list, err := s.Terminals(t.Context(), "mer_1")
		if err != nil {
			t.Fatalf("Terminals() = %v", err)
		}
		var got []string
		for _, term := range list {
			got = append(got, term.TerminalID)
		}
		want := make([]string, 0, len(seen))
		for id := range seen {
			want = append(want, id)
		}
		slices.Sort(want)
		if d := diff(want, got); d != "" {
			t.Errorf("Terminals() after concurrent allocations mismatch (-want +got):\n%s", d)
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		devices.mustCreate(t, s, newDevice("SN-UNLINKED", "", at(0)))
		checkMissing(t, "Terminal(missing)", s.Terminal, "99999998", "99999998")
		checkMissing(t, "TerminalBySerial(missing device)", s.TerminalBySerial, "SN-MISSING-2b7d", "SN-MISSING-2b7d")
		checkMissing(t, "TerminalBySerial(unlinked device)", s.TerminalBySerial, "SN-UNLINKED", "SN-UNLINKED")
		checkMissing(t, `TerminalBySerial("")`, s.TerminalBySerial, "", "")
	}},
	{"List", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_a", "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_b", "cus_1", at(0))
		a1 := mustAllocateTerminal(t, s, "cus_1", "mer_a", at(5))
		b1 := mustAllocateTerminal(t, s, "cus_1", "mer_b", at(4))
		mustAllocateTerminal(t, s, "cus_1", "", at(3))
		a2 := mustAllocateTerminal(t, s, "cus_1", "mer_a", at(2)) // later ID, earlier time
		checkLists(t, "Terminals", s.Terminals, asStored[instore.Terminal], []listCase[*instore.Terminal]{
			{"mer_a", []*instore.Terminal{a1, a2}},
			{"mer_b", []*instore.Terminal{b1}},
			{"mer_none", nil},
		})
	}},
	{"Link", func(t *testing.T, s instore.Store) {
		a, b := linkFixture(t, s)
		mustCreateCustomer(t, s, "cus_2", at(0))
		other := mustAllocateTerminal(t, s, "cus_2", "", at(3)).TerminalID

		// A first link: the device takes the terminal's customer and stops
		// showing its code.
		mustLink(t, s, a, "SN-1", at(10), "", "")
		checkLinked(t, s, a, "SN-1", at(10))
		checkBound(t, s, "SN-1", a)
		d := devices.mustGet(t, s, "SN-1")
		if d.LinkCode != "" || d.CustomerID != "cus_1" {
			t.Errorf("Device(SN-1) after linking: link code %q, customer %q; want none and cus_1", d.LinkCode, d.CustomerID)
		}
		checkMissing(t, "DeviceByLinkCode(code of a linked device)", s.DeviceByLinkCode, "CODE-1", "")

		// Linking the same pair again changes nothing.
		mustLink(t, s, a, "SN-1", at(11), "SN-1", a)
		checkLinked(t, s, a, "SN-1", at(10))

		// Relinking the device moves it: the old terminal ID is unlinked.
		mustLink(t, s, b, "SN-1", at(12), "", a)
		checkLinked(t, s, a, "", time.Time{})
		checkLinked(t, s, b, "SN-1", at(12))
		checkBound(t, s, "SN-1", b)

		// Linking another device to a linked terminal ID replaces its device.
		mustLink(t, s, b, "SN-2", at(13), "SN-1", "")
		checkLinked(t, s, b, "SN-2", at(13))
		checkBound(t, s, "SN-2", b)
		checkBound(t, s, "SN-1", "")
		if got := devices.mustGet(t, s, "SN-2").LinkCode; got != "" {
			t.Errorf("Device(SN-2).LinkCode = %q after linking, want empty", got)
		}

		// Both at once: the device leaves b, a loses nothing (it is free).
		mustLink(t, s, a, "SN-1", at(14), "", "")
		mustLink(t, s, a, "SN-2", at(15), "SN-1", b)
		checkLinked(t, s, a, "SN-2", at(15))
		checkLinked(t, s, b, "", time.Time{})
		checkBound(t, s, "SN-1", "")

		// A device moves to another customer's terminal ID.
		mustLink(t, s, other, "SN-2", at(16), "", a)
		if got := devices.mustGet(t, s, "SN-2").CustomerID; got != "cus_2" {
			t.Errorf("Device(SN-2).CustomerID = %q after linking to a terminal ID of cus_2, want cus_2", got)
		}
	}},
	{"LinkNotFound", func(t *testing.T, s instore.Store) {
		a, _ := linkFixture(t, s)
		mustLink(t, s, a, "SN-1", at(10), "", "")
		_, _, err := s.LinkTerminal(t.Context(), "99999998", "SN-2", at(11))
		checkNotFound(t, "LinkTerminal(missing terminal ID)", err, "99999998")
		_, _, err = s.LinkTerminal(t.Context(), a, "SN-MISSING-77a1", at(11))
		checkNotFound(t, "LinkTerminal(missing device)", err, "SN-MISSING-77a1")
		checkLinked(t, s, a, "SN-1", at(10))
		if got := devices.mustGet(t, s, "SN-2").LinkCode; got != "CODE-2" {
			t.Errorf("Device(SN-2).LinkCode = %q after a refused link, want CODE-2", got)
		}
	}},
	{"Unlink", func(t *testing.T, s instore.Store) {
		a, b := linkFixture(t, s)
		mustLink(t, s, a, "SN-1", at(10), "", "")
		mustLink(t, s, b, "SN-2", at(10), "", "")
		serial, err := s.UnlinkTerminal(t.Context(), a)
		if err != nil {
			t.Fatalf("UnlinkTerminal() = %v", err)
		}
		if serial != "SN-1" {
			t.Errorf("UnlinkTerminal() = %q, want SN-1", serial)
		}
		checkLinked(t, s, a, "", time.Time{})
		checkBound(t, s, "SN-1", "")
		checkLinked(t, s, b, "SN-2", at(10))

		_, err = s.UnlinkTerminal(t.Context(), a)
		checkNotFound(t, "UnlinkTerminal(unlinked)", err, a)
		_, err = s.UnlinkTerminal(t.Context(), "99999998")
		checkNotFound(t, "UnlinkTerminal(missing)", err, "99999998")

		// An unlinked terminal ID and device link again.
		mustLink(t, s, a, "SN-1", at(11), "", "")
		checkLinked(t, s, a, "SN-1", at(11))
	}},
	{"LinkConcurrent", func(t *testing.T, s instore.Store) {
		// Links of 4 devices to 4 terminal IDs race. Each either succeeds or
		// is refused with instore.ErrConflict (never a deadlock or another
		// error), and the bindings stay one to one.
		mustCreateCustomer(t, s, "cus_1", at(0))
		var terms, serials [4]string
		for i := range 4 {
			terms[i] = mustAllocateTerminal(t, s, "cus_1", "", at(0)).TerminalID
			serials[i] = fmt.Sprintf("SN-%d", i)
			devices.mustCreate(t, s, newDevice(serials[i], "", at(0)))
		}
		const n = 32
		errs := atOnce(n, func(i int) error {
			_, _, err := s.LinkTerminal(t.Context(), terms[i%4], serials[(i/4+i)%4], at(10+i))
			return err
		})
		for i, err := range errs {
			if err != nil && !errors.Is(err, instore.ErrConflict) {
				t.Errorf("concurrent LinkTerminal #%d = %v, want nil or instore.ErrConflict", i, err)
			}
		}
		bound := map[string]string{}
		for _, id := range terms {
			term := mustTerminal(t, s, id)
			if !term.Linked() {
				continue
			}
			if other, dup := bound[term.SerialNumber]; dup {
				t.Errorf("device %s linked to both %s and %s", term.SerialNumber, other, id)
			}
			bound[term.SerialNumber] = id
			checkBound(t, s, term.SerialNumber, id)
		}
		if len(bound) == 0 {
			t.Errorf("no terminal ID linked after %d concurrent links", n)
		}
	}},
	{"PendingGuard", func(t *testing.T, s instore.Store) {
		a, b := linkFixture(t, s)
		mustLink(t, s, a, "SN-1", at(10), "", "")
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", a, "SN-1", instore.StatusPending, at(11)))

		_, _, err := s.LinkTerminal(t.Context(), a, "SN-2", at(12))
		checkConflict(t, "LinkTerminal(terminal ID with a PENDING transaction, other device)", err)
		_, _, err = s.LinkTerminal(t.Context(), b, "SN-1", at(12))
		checkConflict(t, "LinkTerminal(device whose terminal ID has a PENDING transaction)", err)
		_, err = s.UnlinkTerminal(t.Context(), a)
		checkConflict(t, "UnlinkTerminal(PENDING transaction)", err)
		checkLinked(t, s, a, "SN-1", at(10))
		checkLinked(t, s, b, "", time.Time{})
		if got := devices.mustGet(t, s, "SN-2").LinkCode; got != "CODE-2" {
			t.Errorf("Device(SN-2).LinkCode = %q after a refused link, want CODE-2", got)
		}

		// Another terminal ID is not blocked.
		mustLink(t, s, b, "SN-2", at(13), "", "")

		// Once the transaction is final, the terminal ID moves again.
		tx.StatusID, tx.Progress, tx.CompletedAt = instore.StatusApproved, instore.ProgressFinal, ptr(at(14))
		mustUpdateTransaction(t, s, tx, tx.Version)
		mustLink(t, s, a, "SN-2", at(15), "SN-1", b)
		if serial, err := s.UnlinkTerminal(t.Context(), a); err != nil || serial != "SN-2" {
			t.Errorf("UnlinkTerminal() after the transaction ended = (%q, %v), want (SN-2, nil)", serial, err)
		}
	}},
}

// checkTerminalID fails unless id is an 8-digit terminal ID a store may hand
// out, and returns it as a number.
func checkTerminalID(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(id)
	if err != nil || len(id) != 8 || n < firstTerminalID {
		t.Errorf("terminal ID %q, want 8 digits from %d up", id, firstTerminalID)
	}
	return n
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newPackage returns a valid package of a model, released at i minutes.
func newPackage(id, customerID, model, version string, mandatory bool, i int) *instore.Package {
	return &instore.Package{
		ID: id, CustomerID: customerID, Model: model, Name: "App " + version, Version: version, Mandatory: mandatory,
		SizeBytes: 1000 + int64(i), SHA256: strings.Repeat(fmt.Sprintf("%02x", i%256), 32), ReleasedAt: at(i),
	}
}

func mustImport(t *testing.T, s instore.Store, want int, ps ...*instore.Package) {
	t.Helper()
	n, err := s.ImportPackages(t.Context(), ps)
	if err != nil {
		t.Fatalf("ImportPackages() = %v", err)
	}
	if n != want {
		t.Errorf("ImportPackages() added %d, want %d", n, want)
	}
}

func newUpdate(id, terminalID, packageID string, created time.Time) *instore.Update {
	return &instore.Update{ID: id, TerminalID: terminalID, PackageID: packageID, Status: instore.UpdateScheduled,
		CreatedAt: created, UpdatedAt: created}
}

// updates are the updates of terminals' software, by id.
var updates = kind[instore.Update]{"Update",
	func(s instore.Store, ctx context.Context, u *instore.Update) error { return s.CreateUpdate(ctx, u) },
	instore.Store.Update, func(u *instore.Update) string { return u.ID }}

// updateFixture is seed plus package pkg-1 of the countertop model.
func updateFixture(t *testing.T, s instore.Store) string {
	t.Helper()
	id := seed(t, s)
	mustImport(t, s, 1, newPackage("pkg-1", "", instore.ModelCountertop, "2.0.0", false, 1))
	return id
}

var accessTests = []test{
	{"AllocateWithModel", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		for _, tc := range []struct{ name, model string }{{"declared", instore.ModelPINPad}, {"none", ""}} {
			term := &instore.Terminal{CustomerID: "cus_1", CreatedAt: at(1)}
			if err := s.AllocateTerminal(t.Context(), term, tc.model); err != nil {
				t.Fatalf("AllocateTerminal(%s) = %v", tc.name, err)
			}
			checkTerminalID(t, term.TerminalID)
			if d := diff(asStored(term), mustTerminal(t, s, term.TerminalID)); d != "" {
				t.Errorf("Terminal(%s) mismatch (-want +got):\n%s", tc.name, d)
			}
			if got, err := s.TerminalModel(t.Context(), term.TerminalID); err != nil || got != tc.model {
				t.Errorf("TerminalModel(%s) = %q, %v, want %q", tc.name, got, err, tc.model)
			}
		}
		checkMissing(t, "TerminalModel(unknown)", s.TerminalModel, "99999999", "99999999")
	}},
	{"AllocateBindsDevice", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		d := newDevice("SN-1", "", at(0))
		d.LinkCode = "123456"
		devices.mustCreate(t, s, d)
		linked := at(2)
		term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", SerialNumber: "SN-1", LinkedAt: &linked, CreatedAt: at(2)}
		if err := s.AllocateTerminal(t.Context(), term, instore.ModelCountertop); err != nil {
			t.Fatalf("AllocateTerminal() = %v", err)
		}
		if d := diff(asStored(term), mustTerminal(t, s, term.TerminalID)); d != "" {
			t.Errorf("Terminal() mismatch (-want +got):\n%s", d)
		}
		checkBound(t, s, "SN-1", term.TerminalID)
		got := devices.mustGet(t, s, "SN-1")
		if got.LinkCode != "" || got.CustomerID != "cus_1" {
			t.Errorf("bound device: link code %q, customer %q; want none and cus_1", got.LinkCode, got.CustomerID)
		}
	}},
	{"AllocateConflict", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateCustomer(t, s, "cus_2", at(0))
		devices.mustCreate(t, s, newDevice("SN-1", "cus_1", at(0)))
		devices.mustCreate(t, s, newDevice("SN-2", "cus_2", at(0)))
		mustLink(t, s, mustAllocateTerminal(t, s, "cus_1", "", at(0)).TerminalID, "SN-1", at(1), "", "")
		for _, tc := range []struct {
			name string
			term *instore.Terminal
		}{
			{"device linked elsewhere", &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-1", CreatedAt: at(1)}},
			{"device of another customer", &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-2", CreatedAt: at(1)}},
			{"missing device", &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-MISSING", CreatedAt: at(1)}},
			{"missing customer", &instore.Terminal{CustomerID: "cus_missing", CreatedAt: at(1)}},
			{"missing merchant", &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_missing", CreatedAt: at(1)}},
		} {
			checkConflict(t, "AllocateTerminal("+tc.name+")", s.AllocateTerminal(t.Context(), tc.term, ""))
			if tc.term.TerminalID != "" {
				t.Errorf("AllocateTerminal(%s) refused but set TerminalID %q", tc.name, tc.term.TerminalID)
			}
		}
		checkBound(t, s, "SN-2", "")
		if got := devices.mustGet(t, s, "SN-2"); got.CustomerID != "cus_2" {
			t.Errorf("refused binding changed the device's customer to %q", got.CustomerID)
		}
	}},
	{"AllocateConcurrent", func(t *testing.T, s instore.Store) {
		// Many goroutines allocate, through both methods, while others race
		// to bind one device: no ID twice, exactly one binding.
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		devices.mustCreate(t, s, newDevice("SN-RACE", "", at(0)))
		const workers, each, binders = 24, 6, 8
		var (
			start       = make(chan struct{})
			wg          sync.WaitGroup
			mu          sync.Mutex
			seen        = map[string]int{}
			errs        []error
			bound, lost int
		)
		record := func(id string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			seen[id]++
		}
		for w := range workers {
			wg.Go(func() {
				<-start
				for i := range each {
					term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: at(w)}
					var err error
					if (w+i)%2 == 0 {
						err = s.AllocateTerminal(t.Context(), term, instore.ModelMobile)
					} else {
						err = s.AllocateTerminalID(t.Context(), term)
					}
					record(term.TerminalID, err)
				}
			})
		}
		for range binders {
			wg.Go(func() {
				<-start
				linked := at(5)
				term := &instore.Terminal{CustomerID: "cus_1", SerialNumber: "SN-RACE", LinkedAt: &linked, CreatedAt: at(5)}
				err := s.AllocateTerminal(t.Context(), term, "")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					bound++
					seen[term.TerminalID]++
				case errors.Is(err, instore.ErrConflict):
					lost++
				default:
					errs = append(errs, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent allocation: %v", err)
		}
		for id, n := range seen {
			checkTerminalID(t, id)
			if n != 1 {
				t.Errorf("terminal ID %s handed out %d times", id, n)
			}
		}
		if want := workers*each + 1; len(seen) != want {
			t.Errorf("%d distinct terminal IDs, want %d", len(seen), want)
		}
		if bound != 1 || lost != binders-1 {
			t.Errorf("racing bindings of one device: %d bound, %d refused; want 1 and %d", bound, lost, binders-1)
		}
	}},
	{"Packages", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateCustomer(t, s, "cus_2", at(0))
		ps := []*instore.Package{
			newPackage("ct-1.0.0", "", instore.ModelCountertop, "1.0.0", true, 1),
			newPackage("ct-1.1.0", "", instore.ModelCountertop, "1.1.0", false, 3),
			newPackage("ct-1.0.1-cus1", "cus_1", instore.ModelCountertop, "1.0.1", false, 2),
			newPackage("ct-9-cus2", "cus_2", instore.ModelCountertop, "9.0.0", true, 4),
			newPackage("pp-1.0.0", "", instore.ModelPINPad, "1.0.0", false, 1),
		}
		ps[1].ReleasedAt = base.Add(3*time.Minute + 500*time.Nanosecond) // kept to the microsecond
		if _, err := s.Setting(t.Context(), instore.CatalogueSetting); !errors.Is(err, instore.ErrNotFound) {
			t.Errorf("Setting(catalogue) before any import = %v, want ErrNotFound", err)
		}
		mustImport(t, s, len(ps), ps...)
		stamp, err := s.Setting(t.Context(), instore.CatalogueSetting)
		if err != nil {
			t.Fatalf("Setting(catalogue) after an import = %v", err)
		}
		for _, tc := range []struct {
			name, customer, model string
			want                  []*instore.Package
		}{
			{"own and shared, newest first", "cus_1", instore.ModelCountertop, []*instore.Package{ps[1], ps[2], ps[0]}},
			{"other customer", "cus_2", instore.ModelCountertop, []*instore.Package{ps[3], ps[1], ps[0]}},
			{"shared only", "", instore.ModelCountertop, []*instore.Package{ps[1], ps[0]}},
			{"other model", "cus_1", instore.ModelPINPad, []*instore.Package{ps[4]}},
			{"no packages", "cus_1", instore.ModelMobile, nil},
		} {
			got, err := s.Packages(t.Context(), tc.customer, tc.model)
			if err != nil {
				t.Fatalf("Packages(%s) = %v", tc.name, err)
			}
			var want []*instore.Package
			for _, p := range tc.want {
				want = append(want, asStored(p))
			}
			if d := diff(want, got); d != "" {
				t.Errorf("Packages(%s) mismatch (-want +got):\n%s", tc.name, d)
			}
		}
		got, err := s.Package(t.Context(), "ct-1.0.1-cus1")
		if err != nil || diff(asStored(ps[2]), got) != "" {
			t.Errorf("Package() = %+v, %v, want %+v", got, err, ps[2])
		}
		checkMissing(t, "Package(unknown)", s.Package, "nope", "")

		// Importing the same catalogue again adds nothing and leaves the
		// catalogue setting alone.
		again := make([]*instore.Package, len(ps))
		for i, p := range ps {
			again[i] = asStored(p)
		}
		mustImport(t, s, 0, again...)
		if now, _ := s.Setting(t.Context(), instore.CatalogueSetting); now != stamp {
			t.Errorf("a no-op import changed the catalogue setting from %q to %q", stamp, now)
		}
		// A changed release is refused, and so is the whole batch.
		changed := asStored(ps[0])
		changed.SHA256 = strings.Repeat("ff", 32)
		fresh := newPackage("ct-2.0.0", "", instore.ModelCountertop, "2.0.0", false, 9)
		_, err = s.ImportPackages(t.Context(), []*instore.Package{fresh, changed})
		checkConflict(t, "ImportPackages(changed release)", err)
		checkMissing(t, "Package(of a refused batch)", s.Package, fresh.ID, "")
		_, err = s.ImportPackages(t.Context(), []*instore.Package{newPackage("x", "cus_missing", instore.ModelMobile, "1.0", false, 1)})
		checkConflict(t, "ImportPackages(missing customer)", err)
		mustImport(t, s, 1, fresh)
		if now, _ := s.Setting(t.Context(), instore.CatalogueSetting); now == stamp {
			t.Errorf("an import that added a package left the catalogue setting at %q", now)
		}
	}},
	{"Updates", func(t *testing.T, s instore.Store) {
		term := updateFixture(t, s)
		checkWithOpenUpdate(t, s, term, nil)
		_, _, err := s.TerminalWithOpenUpdate(t.Context(), "99999999")
		checkNotFound(t, "TerminalWithOpenUpdate(unknown terminal ID)", err, "")
		notBefore := at(30)
		u := newUpdate("upd_1", term, "pkg-1", at(2))
		u.NotBefore = &notBefore
		updates.mustCreate(t, s, u)
		if d := diff(asStored(u), updates.mustGet(t, s, "upd_1")); d != "" {
			t.Errorf("Update() mismatch (-want +got):\n%s", d)
		}
		open, err := s.OpenUpdate(t.Context(), term)
		if err != nil || open.ID != "upd_1" {
			t.Errorf("OpenUpdate() = %v, %v, want upd_1", open, err)
		}
		checkWithOpenUpdate(t, s, term, asStored(u))
		checkConflict(t, "CreateUpdate(second unfinished)", s.CreateUpdate(t.Context(), newUpdate("upd_2", term, "pkg-1", at(3))))
		checkConflict(t, "CreateUpdate(missing package)", s.CreateUpdate(t.Context(), newUpdate("upd_x", term, "nope", at(3))))
		checkConflict(t, "CreateUpdate(missing terminal)", s.CreateUpdate(t.Context(), newUpdate("upd_y", "99999999", "pkg-1", at(3))))

		// The compare-and-set of SetUpdateStatus.
		down := asStored(u)
		down.Status, down.UpdatedAt = instore.UpdateDownloading, stored(at(4))
		checkConflict(t, "SetUpdateStatus(from a status it is not in)", s.SetUpdateStatus(t.Context(), down, nil, instore.UpdateDownloading))
		if err := s.SetUpdateStatus(t.Context(), down, nil, instore.UpdateScheduled); err != nil {
			t.Fatalf("SetUpdateStatus(DOWNLOADING) = %v", err)
		}
		checkWithOpenUpdate(t, s, term, down)
		done := *down
		done.Status, done.SoftwareVersion, done.UpdatedAt = instore.UpdateInstalled, "2.0.0", stored(at(5))
		if err := s.SetUpdateStatus(t.Context(), &done, nil, instore.UpdateScheduled, instore.UpdateDownloading); err != nil {
			t.Fatalf("SetUpdateStatus(INSTALLED) = %v", err)
		}
		if d := diff(&done, updates.mustGet(t, s, "upd_1")); d != "" {
			t.Errorf("installed update mismatch (-want +got):\n%s", d)
		}
		if v := devices.mustGet(t, s, "SN-1").SoftwareVersion; v != "2.0.0" {
			t.Errorf("device version after INSTALLED = %q, want 2.0.0", v)
		}
		checkConflict(t, "SetUpdateStatus(after the end)", s.SetUpdateStatus(t.Context(), &done, nil, instore.UpdateScheduled, instore.UpdateDownloading))
		checkMissing(t, "OpenUpdate(after INSTALLED)", s.OpenUpdate, term, "")
		checkWithOpenUpdate(t, s, term, nil)

		// A new update may follow; it is the latest, and it fails.
		updates.mustCreate(t, s, newUpdate("upd_2", term, "pkg-1", at(6)))
		failed := asStored(newUpdate("upd_2", term, "pkg-1", at(6)))
		failed.Status, failed.Reason, failed.UpdatedAt = instore.UpdateFailed, "disk full", stored(at(7))
		if err := s.SetUpdateStatus(t.Context(), failed, nil, instore.UpdateScheduled, instore.UpdateDownloading); err != nil {
			t.Fatalf("SetUpdateStatus(FAILED) = %v", err)
		}
		latest, err := s.LatestUpdate(t.Context(), term)
		if err != nil || diff(failed, latest) != "" {
			t.Errorf("LatestUpdate() = %+v, %v, want %+v", latest, err, failed)
		}
		if v := devices.mustGet(t, s, "SN-1").SoftwareVersion; v != "2.0.0" {
			t.Errorf("device version after FAILED = %q, want it unchanged (2.0.0)", v)
		}
		checkMissing(t, "LatestUpdate(no updates)", s.LatestUpdate, "99999999", "")
		checkMissing(t, "Update(unknown)", s.Update, "upd_none", "")
	}},
	{"OpenUpdates", func(t *testing.T, s instore.Store) {
		a := updateFixture(t, s)
		b := seedTerminal(t, s, "SN-2")
		c := seedTerminal(t, s, "SN-3")
		updates.mustCreate(t, s, newUpdate("upd_b", b, "pkg-1", at(2)))
		updates.mustCreate(t, s, newUpdate("upd_a", a, "pkg-1", at(1)))
		ended := newUpdate("upd_c", c, "pkg-1", at(0))
		updates.mustCreate(t, s, ended)
		ended.Status = instore.UpdateFailed
		ended.Reason = "x"
		if err := s.SetUpdateStatus(t.Context(), ended, nil, instore.UpdateScheduled); err != nil {
			t.Fatal(err)
		}
		got, err := s.OpenUpdates(t.Context())
		if err != nil {
			t.Fatalf("OpenUpdates() = %v", err)
		}
		var ids []string
		for _, u := range got {
			ids = append(ids, u.ID)
		}
		if d := diff([]string{"upd_a", "upd_b"}, ids); d != "" {
			t.Errorf("OpenUpdates() ids (-want +got):\n%s", d)
		}
	}},
	{"Delivery", func(t *testing.T, s instore.Store) {
		term := updateFixture(t, s)
		updates.mustCreate(t, s, newUpdate("upd_1", term, "pkg-1", at(1)))
		ctx := t.Context()

		// A PENDING transaction keeps the update back.
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", term, "SN-1", instore.StatusPending, at(2)))
		checkConflict(t, "MarkUpdateDelivered(transaction running)", s.MarkUpdateDelivered(ctx, "upd_1", at(3), at(2)))
		tx.StatusID, tx.Progress = instore.StatusApproved, instore.ProgressFinal
		mustUpdateTransaction(t, s, tx, tx.Version)

		if err := s.MarkUpdateDelivered(ctx, "upd_1", at(4), at(3)); err != nil {
			t.Fatalf("MarkUpdateDelivered() = %v", err)
		}
		if got := updates.mustGet(t, s, "upd_1").DeliveredAt; diff(storedPtr(ptr(at(4))), got) != "" {
			t.Errorf("DeliveredAt = %v, want %v", got, at(4))
		}
		// Delivered recently: not again; delivered before staleBefore: again.
		checkConflict(t, "MarkUpdateDelivered(just delivered)", s.MarkUpdateDelivered(ctx, "upd_1", at(5), at(3)))
		if err := s.MarkUpdateDelivered(ctx, "upd_1", at(6), at(5)); err != nil {
			t.Errorf("MarkUpdateDelivered(stale delivery) = %v", err)
		}
		if err := s.ClearUpdateDelivered(ctx, "upd_1"); err != nil {
			t.Fatalf("ClearUpdateDelivered() = %v", err)
		}
		if got := updates.mustGet(t, s, "upd_1").DeliveredAt; got != nil {
			t.Errorf("DeliveredAt after clearing = %v, want nil", got)
		}
		checkNotFound(t, "ClearUpdateDelivered(unknown)", s.ClearUpdateDelivered(ctx, "upd_none"), "")

		// Once DOWNLOADING it is not delivered again, and SetUpdateStatus
		// clears delivered_at.
		if err := s.MarkUpdateDelivered(ctx, "upd_1", at(7), at(6)); err != nil {
			t.Fatal(err)
		}
		u := updates.mustGet(t, s, "upd_1")
		u.Status = instore.UpdateDownloading
		if err := s.SetUpdateStatus(ctx, u, nil, instore.UpdateScheduled); err != nil {
			t.Fatal(err)
		}
		if got := updates.mustGet(t, s, "upd_1").DeliveredAt; got != nil {
			t.Errorf("DeliveredAt after DOWNLOADING = %v, want nil", got)
		}
		checkConflict(t, "MarkUpdateDelivered(DOWNLOADING)", s.MarkUpdateDelivered(ctx, "upd_1", at(8), at(8)))
		checkConflict(t, "MarkUpdateDelivered(unknown)", s.MarkUpdateDelivered(ctx, "upd_none", at(8), at(8)))
	}},
}

// checkWithOpenUpdate checks TerminalWithOpenUpdate against Terminal and
// the unfinished update want (nil: none).
func checkWithOpenUpdate(t *testing.T, s instore.Store, term string, want *instore.Update) {
	t.Helper()
	gotT, gotU, err := s.TerminalWithOpenUpdate(t.Context(), term)
	if err != nil {
		t.Fatalf("TerminalWithOpenUpdate(%s) = %v", term, err)
	}
	wantT, err := s.Terminal(t.Context(), term)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(wantT, gotT); d != "" {
		t.Errorf("TerminalWithOpenUpdate() terminal mismatch (-want +got):\n%s", d)
	}
	if d := diff(want, gotU); d != "" {
		t.Errorf("TerminalWithOpenUpdate() update mismatch (-want +got):\n%s", d)
	}
}

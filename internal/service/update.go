package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// The life of a software update over the terminal session. An update is
// delivered (handed to the device's session) only while the device is
// online, runs no transaction and notBefore has passed; delivery is
// tried when the update is created, when its notBefore comes, when the
// device says hello, when a transaction of its terminal ends, and by the
// sweep (RunUpdates), which also covers several nodes and restarts. From
// delivery until the device reports INSTALLED or FAILED the terminal is
// busy: a purchase, refund or reversal answers WP09. Every decision of
// the update's life is lifecycle.NextUpdate's (lifecycle/update.go); the
// functions here read the update, call it and carry out its step.

// DefaultInstallTimeout is how long an update may stay DOWNLOADING without
// a report before the sweep ends it FAILED.
const DefaultInstallTimeout = 15 * time.Minute

// DefaultUpdateSweep is how often RunUpdates looks for work.
const DefaultUpdateSweep = 30 * time.Second

// newUpdateID returns an updateId created at now: "upd_" and 32 hex
// digits (newID).
func (s *Service) newUpdateID(now time.Time) string { return s.newID("upd_", now) }

// installing answers WP09 while the terminal installs a software update:
// the update is DOWNLOADING, or was just handed to the device (within the
// ack timeout) which has not reported yet. The readiness checks of every
// transaction (ready) call it.
func (s *Service) installing(ctx context.Context, terminalID string) error {
	u, err := s.Store.OpenUpdate(ctx, terminalID)
	if ok, err := found(err, "open update"); !ok {
		return err
	}
	return s.installingWith(terminalID, u)
}

// installs reports whether the unfinished update u (nil: none) keeps its
// terminal busy: DOWNLOADING, or handed to the device within the ack
// timeout and not reported on yet.
func (s *Service) installs(u *instore.Update) bool {
	return lifecycle.UpdateBusy(u, s.now(), s.ackTimeout())
}

// installingWith is installing with the terminal ID's unfinished update u
// (nil if none) already read.
func (s *Service) installingWith(terminalID string, u *instore.Update) error {
	if u == nil {
		return nil
	}
	if s.installs(u) {
		e := instore.Errorf(instore.WP09, "The terminal is installing a software update; retry once it is done.")
		e.Reason = instore.ReasonUpdate
		return e
	}
	if u.Status == instore.UpdateScheduled {
		// The transaction about to start may keep it waiting.
		s.updateWaits.Store(terminalID, struct{}{})
	}
	return nil
}

// deliverUpdate hands the unfinished update of a terminal ID to its device
// if it is due: SCHEDULED, past notBefore (else a timer is set for then),
// the device online, no transaction PENDING. The store marks it delivered
// in one step with the check for a PENDING transaction, so two callers
// never both send it and a transaction created since is seen.
func (s *Service) deliverUpdate(ctx context.Context, terminalID string) {
	u, err := s.Store.OpenUpdate(ctx, terminalID)
	if errors.Is(err, instore.ErrNotFound) {
		return
	} else if err != nil {
		if !s.isClosed() { // at shutdown the store may be gone already
			s.log().Error("deliver update: open update", "terminalId", terminalID, "error", err)
		}
		return
	}
	now := s.now()
	next, st := lifecycle.NextUpdate(lifecycle.UpdateStateOf(u), *u, lifecycle.UpdateEvent{Kind: lifecycle.UpdateDeliver, At: now})
	if !st.Arm.IsZero() {
		s.arm(u.ID, st.Arm, func(string) { s.deliverUpdate(context.Background(), terminalID) })
		return
	}
	if !st.Send {
		return
	}
	t, err := s.Store.Terminal(ctx, terminalID)
	if err != nil {
		s.log().Error("deliver update: terminal", "terminalId", terminalID, "error", err)
		return
	}
	if !t.Linked() || !s.Gateway.Online(t.SerialNumber) {
		return // delivered after the next hello
	}
	pkg, err := s.Store.Package(ctx, u.PackageID)
	if err != nil {
		s.log().Error("deliver update: package", "updateId", u.ID, "error", err)
		return
	}
	// Noted before the store's check for a PENDING transaction, so that a
	// transaction that ends between the two finds it (terminalIdle); once
	// sent, the note goes.
	s.updateWaits.Store(terminalID, struct{}{})
	err = s.Store.MarkUpdateDelivered(ctx, u.ID, *next.DeliveredAt, now.Add(-s.ackTimeout()))
	if errors.Is(err, instore.ErrConflict) {
		return // a transaction runs (delivered when it ends), or it was just sent
	}
	s.updateWaits.Delete(terminalID)
	if err != nil {
		s.log().Error("deliver update: mark delivered", "updateId", u.ID, "error", err)
		return
	}
	if err := s.Gateway.SendUpdate(ctx, t.SerialNumber, u, pkg); err != nil {
		_, failed := lifecycle.NextUpdate(lifecycle.UpdateDelivered, next, lifecycle.UpdateEvent{Kind: lifecycle.UpdateSendFailed, At: now})
		if failed.ClearDelivered {
			if err := s.Store.ClearUpdateDelivered(context.WithoutCancel(ctx), u.ID); err != nil {
				s.log().Error("deliver update: clear delivered", "updateId", u.ID, "error", err)
			}
		}
		if !errors.Is(err, instore.ErrOffline) {
			s.log().Warn("send update", "updateId", u.ID, "serialNumber", t.SerialNumber, "error", err)
		}
		return
	}
	s.log().Info("update delivered", "updateId", u.ID, "packageId", pkg.ID, "terminalId", terminalID)
}

// updateOnHello runs after a linked device's hello: an update the device
// was installing ends INSTALLED when the device now runs the package's
// version (it restarted into it) and is sent again otherwise; a SCHEDULED
// one is delivered if due.
func (s *Service) updateOnHello(ctx context.Context, t *instore.Terminal, h hello) {
	var u *instore.Update
	var err error
	if h.rows != nil { // the hello read it
		if u = h.rows.update; u == nil {
			return
		}
	} else {
		u, err = s.Store.OpenUpdate(ctx, t.TerminalID)
	}
	if errors.Is(err, instore.ErrNotFound) {
		return
	} else if err != nil {
		s.log().Error("update on hello", "terminalId", t.TerminalID, "error", err)
		return
	}
	pkg, err := s.Store.Package(ctx, u.PackageID)
	if err != nil {
		s.log().Error("update on hello: package", "updateId", u.ID, "error", err)
		return
	}
	next, st := lifecycle.NextUpdate(lifecycle.UpdateStateOf(u), *u, lifecycle.UpdateEvent{Kind: lifecycle.UpdateHello, At: s.now(),
		SoftwareVersion: h.SoftwareVersion, PackageVersion: pkg.Version, HelloAt: h.at})
	if st.Changed {
		if err := s.Store.SetUpdateStatus(ctx, &next, s.updateEvent(ctx, &next, t.MerchantID), st.From...); err == nil {
			s.eventsWritten()
		} else if !errors.Is(err, instore.ErrConflict) {
			s.log().Error("update on hello: installed", "updateId", u.ID, "error", err)
		}
	}
	if st.Ended {
		s.disarm(u.ID)
	}
	if st.Resend {
		if err := s.Gateway.SendUpdate(ctx, t.SerialNumber, u, pkg); err != nil && !errors.Is(err, instore.ErrOffline) {
			s.log().Warn("resend update", "updateId", u.ID, "error", err)
		}
	}
	if st.ClearDelivered {
		if err := s.Store.ClearUpdateDelivered(ctx, u.ID); err != nil {
			s.log().Error("update on hello: clear delivered", "updateId", u.ID, "error", err)
			return
		}
	}
	if st.TryDeliver {
		s.deliverUpdate(ctx, t.TerminalID)
	}
}

// terminalIdle runs when a transaction of the terminal ID ended: an update
// that waited for it goes now. Only one this node saw waiting (or about to
// wait: installing, deliverUpdate) is looked for, which spares every other
// transaction's end a read of the store; an update created on another node
// while the transaction ran goes with the next sweep (RunUpdates).
func (s *Service) terminalIdle(terminalID string) {
	if s.isClosed() {
		return
	}
	s.expiryMu.Lock()
	refs := s.expiryWaits[terminalID]
	delete(s.expiryWaits, terminalID)
	s.expiryMu.Unlock()
	for ref := range refs {
		s.preAuthExpired(ref)
	}
	if _, waiting := s.updateWaits.LoadAndDelete(terminalID); !waiting {
		return
	}
	s.spawn(func() { s.deliverUpdate(context.Background(), terminalID) })
}

// isClosed reports whether Close ran.
func (s *Service) isClosed() bool {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	return s.closed
}

// TerminalUpdateStatus records what a device reported about an update sent
// to it: DOWNLOADING, then INSTALLED (the device's software version is then
// the one it reports) or FAILED. A report that no longer applies (the
// update already ended) changes nothing and is not an error.
func (s *Service) TerminalUpdateStatus(ctx context.Context, serial, updateID string, r instore.UpdateReport) error {
	u, err := s.Store.Update(ctx, updateID)
	if errors.Is(err, instore.ErrNotFound) {
		s.log().Warn("update status for an unknown update", "updateId", updateID, "serialNumber", serial)
		return nil
	} else if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	t, err := s.terminalOf(ctx, serial, u.TerminalID, "update")
	if err != nil {
		return err
	}
	next, st := lifecycle.NextUpdate(lifecycle.UpdateStateOf(u), *u, lifecycle.UpdateEvent{Kind: lifecycle.UpdateReported, At: s.now(),
		Status: r.Status, SoftwareVersion: r.SoftwareVersion, Reason: r.Reason})
	if st.Refused != nil {
		return st.Refused
	}
	if st.DeviceVersion != "" {
		// The device runs the new version from now on: record it before the
		// update reads INSTALLED, so terminal info never shows the one
		// without the other.
		if err := s.Store.DevicesSeen(ctx, []instore.DeviceSeen{{SerialNumber: serial, SoftwareVersion: st.DeviceVersion, At: s.now()}}); err != nil {
			return fmt.Errorf("device seen: %w", err)
		}
	}
	if !st.Changed {
		return nil // it moved on already: a repeated or late report
	}
	err = s.Store.SetUpdateStatus(ctx, &next, s.updateEvent(ctx, &next, t.MerchantID), st.From...)
	if errors.Is(err, instore.ErrConflict) {
		return nil // it moved on already: a repeated or late report
	} else if err != nil {
		return fmt.Errorf("set update status: %w", err)
	}
	s.eventsWritten()
	if st.Ended {
		s.disarm(u.ID)
	}
	s.log().Info("update status", "updateId", u.ID, "status", next.Status, "terminalId", t.TerminalID)
	return nil
}

// RunUpdates runs the update sweep every interval until ctx ends: it
// delivers due updates (a node restarted, a notBefore passed on another
// node, a transaction ended elsewhere), ends FAILED an update that stayed
// DOWNLOADING past installTimeout without a report, and when the package
// catalogue changed (an operator imported packages), tells every online
// linked device its terminal ID again, and so its minimum version (the
// cache of minimum versions is emptied first: minversion.go).
func (s *Service) RunUpdates(ctx context.Context, interval, installTimeout time.Duration) {
	if interval <= 0 {
		interval = DefaultUpdateSweep
	}
	if installTimeout <= 0 {
		installTimeout = DefaultInstallTimeout
	}
	catalogue, _ := s.Store.Setting(ctx, instore.CatalogueSetting)
	Every(ctx, s.clock(), interval, func() {
		s.sweepUpdates(ctx, installTimeout)
		if c, err := s.Store.Setting(ctx, instore.CatalogueSetting); err == nil && c != catalogue {
			catalogue = c
			s.minVersions.forget() // before the announcement: it reads the new ones
			s.announceMinVersions(ctx)
		}
	})
}

// sweepUpdates is one pass of RunUpdates over the unfinished updates.
func (s *Service) sweepUpdates(ctx context.Context, installTimeout time.Duration) {
	us, err := s.Store.OpenUpdates(ctx)
	if s.sweepFailed(ctx, "update sweep", err) {
		return
	}
	now := s.now()
	for _, u := range us {
		if ctx.Err() != nil {
			return
		}
		next, st := lifecycle.NextUpdate(lifecycle.UpdateStateOf(u), *u, lifecycle.UpdateEvent{Kind: lifecycle.UpdateSwept, At: now, InstallTimeout: installTimeout})
		switch {
		case st.Changed:
			if err := s.Store.SetUpdateStatus(ctx, &next, s.updateEvent(ctx, &next, ""), st.From...); err == nil {
				s.eventsWritten()
			} else if !errors.Is(err, instore.ErrConflict) {
				s.log().Error("update sweep: fail", "updateId", u.ID, "error", err)
			}
		case st.TryDeliver:
			s.deliverUpdate(ctx, u.TerminalID)
		}
	}
}

// announceMinVersions sends `linked` again to every online linked device,
// so that it learns its model's minimum version after a catalogue change.
func (s *Service) announceMinVersions(ctx context.Context) {
	ds, err := s.Store.Devices(ctx, "")
	if err != nil {
		s.log().Error("announce minimum versions", "error", err)
		return
	}
	for _, d := range ds {
		if !s.Gateway.Online(d.SerialNumber) {
			continue
		}
		t, err := s.Store.TerminalBySerial(ctx, d.SerialNumber)
		if err != nil {
			continue // unlinked: its minimum comes with `linked`
		}
		if err := s.Gateway.SendLinked(ctx, d.SerialNumber, t.TerminalID); err != nil && !errors.Is(err, instore.ErrOffline) {
			s.log().Warn("send linked", "serialNumber", d.SerialNumber, "error", err)
		}
	}
}

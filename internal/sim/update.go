package sim

import (
	"context"
	"encoding/json"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// DefaultInstallDelay is how long a virtual terminal takes to download and
// install a software update.
const DefaultInstallDelay = 2 * time.Second

// DefaultInstallFailure is the reason a failing installation reports.
const DefaultInstallFailure = "installation failed: the package did not verify (sandbox)"

// install is a software update in progress.
type install struct {
	ref     string // the updateId
	version string
}

// SoftwareVersion returns the version the terminal runs: the configured
// one, or the one it installed since.
func (t *Terminal) SoftwareVersion() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// MustUpdate reports whether the terminal runs a version below the
// minimum its model needs (the gateway says which in `linked`): it then
// answers every purchase and refund with TERMINAL_MUST_UPDATE (10).
func (t *Terminal) MustUpdate() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mustUpdateLocked()
}

func (t *Terminal) mustUpdateLocked() bool {
	return t.minVersion != "" && instore.CompareVersions(t.version, t.minVersion) < 0
}

// SetNextInstallFail makes the next software installation fail with
// reason (DefaultInstallFailure when empty); it applies once. With fail
// false it clears a pending failure.
func (t *Terminal) SetNextInstallFail(fail bool, reason string) {
	if reason == "" {
		reason = DefaultInstallFailure
	}
	t.update(func() {
		if fail {
			t.installFail = &reason
		} else {
			t.installFail = nil
		}
	})
}

// NextInstallFails reports whether the next installation is set to fail.
func (t *Terminal) NextInstallFails() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.installFail != nil
}

// install handles an update command: it reports DOWNLOADING, "downloads
// and installs" for the install delay, then runs the package's version and
// reports INSTALLED with it, or reports FAILED with a reason (when the
// sandbox asked for a failure). A terminal in a transaction refuses the
// update (FAILED); the server never sends one then, but a purchase and an
// update may cross. The same update sent again (after a reconnect) is
// answered with where it is.
func (t *Terminal) install(ctx context.Context, s *session, env protocol.Envelope) {
	var u protocol.Update
	if err := json.Unmarshal(env.Data, &u); err != nil || env.Ref == "" || u.Version == "" {
		t.log.Warn("sim: ignoring a malformed update message")
		return
	}
	report := func(st protocol.UpdateStatus) protocol.Envelope {
		return t.envelope(protocol.TypeUpdateStatus, "", env.Ref, st)
	}
	t.mu.Lock()
	switch {
	case t.installing != nil && t.installing.ref == env.Ref:
		t.mu.Unlock()
		t.sendOn(s, report(protocol.UpdateStatus{Status: protocol.UpdateDownloading}))
		return
	case t.installing != nil || t.tx != nil:
		t.mu.Unlock()
		t.log.Info("sim: busy; refusing an update", "updateId", env.Ref)
		t.sendOn(s, report(protocol.UpdateStatus{Status: protocol.UpdateFailed, Reason: "the terminal was busy; schedule the update again"}))
		return
	}
	in := &install{ref: env.Ref, version: u.Version}
	fail := t.installFail
	t.installFail = nil
	t.installing, t.updScreen = in, "Updating to "+u.Version
	ls := t.changedLocked()
	t.mu.Unlock()
	for _, l := range ls {
		l()
	}
	t.log.Info("sim: installing an update", "updateId", env.Ref, "version", u.Version)
	t.sendOn(s, report(protocol.UpdateStatus{Status: protocol.UpdateDownloading}))

	t.txWG.Add(1)
	go func() {
		defer t.txWG.Done()
		timer := time.NewTimer(t.cfg.InstallDelay)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			t.update(func() {
				if t.installing == in {
					t.installing, t.updScreen = nil, ""
				}
			})
			return
		case <-timer.C:
		}
		st := protocol.UpdateStatus{Status: protocol.UpdateInstalled, SoftwareVersion: in.version}
		if fail != nil {
			st = protocol.UpdateStatus{Status: protocol.UpdateFailed, Reason: *fail}
		}
		t.update(func() {
			t.installing, t.updScreen = nil, ""
			if fail == nil {
				t.version = in.version
				t.showLocked("Updated to " + in.version)
			} else {
				t.showLocked("Update failed")
			}
		})
		t.log.Info("sim: update ended", "updateId", in.ref, "status", st.Status)
		t.send(report(st))
	}()
}

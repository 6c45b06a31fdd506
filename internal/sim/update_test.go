package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

func updateCommand(version string) protocol.Update {
	return protocol.Update{PackageID: "countertop-" + version, Name: "Countertop app", Version: version,
		SizeBytes: 1024, SHA256: strings.Repeat("ab", 32)}
}

// expectUpdateStatus reads the next message, an update-status for ref, and
// decodes it strictly as the gateway does.
func (c *gwConn) expectUpdateStatus(ref string) protocol.UpdateStatus {
	c.t.Helper()
	env := c.expect(protocol.TypeUpdateStatus)
	var st protocol.UpdateStatus
	if err := protocol.DecodeData(&env, &st); err != nil {
		c.t.Fatalf("update-status %s: %v", env.Data, err)
	}
	if env.Ref != ref {
		c.t.Fatalf("update-status for %q, want %q", env.Ref, ref)
	}
	return st
}

func TestInstallUpdate(t *testing.T) {
	g, r, c := linked(t, func(c *Config) { c.InstallDelay = 200 * time.Millisecond })
	c.send(protocol.TypeUpdate, "", "upd_1", updateCommand("1.5.0"))
	if st := c.expectUpdateStatus("upd_1"); st.Status != protocol.UpdateDownloading {
		t.Fatalf("first report = %+v, want DOWNLOADING", st)
	}
	waitState(t, r.Terminal, "installing", func(s State) bool { return s.Screen == "Updating to 1.5.0" })

	// A purchase while installing is answered TERMINAL_IS_BUSY at once; the
	// same update again is answered with where it is.
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	if _, res, _ := c.result("ref-1"); res.StatusID != instore.StatusTerminalIsBusy {
		t.Errorf("purchase while installing: statusId %d, want %d", res.StatusID, instore.StatusTerminalIsBusy)
	}
	c.send(protocol.TypeUpdate, "", "upd_1", updateCommand("1.5.0"))
	if st := c.expectUpdateStatus("upd_1"); st.Status != protocol.UpdateDownloading {
		t.Errorf("repeated update: report %+v, want DOWNLOADING", st)
	}

	st := c.expectUpdateStatus("upd_1")
	if st != (protocol.UpdateStatus{Status: protocol.UpdateInstalled, SoftwareVersion: "1.5.0"}) {
		t.Errorf("final report = %+v, want INSTALLED 1.5.0", st)
	}
	if v := r.SoftwareVersion(); v != "1.5.0" {
		t.Errorf("SoftwareVersion() = %q, want 1.5.0", v)
	}
	// The next session's hello reports the new version.
	c.ws.Close()
	c2 := g.accept(t)
	if c2.hello.SoftwareVersion != "1.5.0" {
		t.Errorf("hello after the update reports %q, want 1.5.0", c2.hello.SoftwareVersion)
	}
}

func TestInstallFails(t *testing.T) {
	_, r, c := linked(t, func(c *Config) { c.InstallDelay = time.Millisecond })
	r.SetNextInstallFail(true, "")
	if !r.NextInstallFails() {
		t.Fatal("NextInstallFails() = false after SetNextInstallFail(true)")
	}
	c.send(protocol.TypeUpdate, "", "upd_1", updateCommand("2.0.0"))
	c.expectUpdateStatus("upd_1")
	if st := c.expectUpdateStatus("upd_1"); st.Status != protocol.UpdateFailed || st.Reason != DefaultInstallFailure {
		t.Errorf("final report = %+v, want FAILED with the sandbox reason", st)
	}
	if v := r.SoftwareVersion(); v != DefaultSoftwareVersion {
		t.Errorf("SoftwareVersion() after a failed install = %q, want %q", v, DefaultSoftwareVersion)
	}
	// The failure applied once: the next installation succeeds.
	c.send(protocol.TypeUpdate, "", "upd_2", updateCommand("2.0.0"))
	c.expectUpdateStatus("upd_2")
	if st := c.expectUpdateStatus("upd_2"); st.Status != protocol.UpdateInstalled {
		t.Errorf("second install = %+v, want INSTALLED", st)
	}
	r.SetNextInstallFail(true, "disk full")
	r.SetNextInstallFail(false, "")
	if r.NextInstallFails() {
		t.Error("NextInstallFails() = true after SetNextInstallFail(false)")
	}
}

func TestUpdateRefusedDuringTransaction(t *testing.T) {
	_, _, c := linked(t, cardWaits)
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	c.expect(protocol.TypeProgress)
	c.send(protocol.TypeUpdate, "", "upd_1", updateCommand("2.0.0"))
	if st := c.expectUpdateStatus("upd_1"); st.Status != protocol.UpdateFailed || st.Reason == "" {
		t.Errorf("update during a transaction: %+v, want FAILED with a reason", st)
	}
}

func TestMustUpdate(t *testing.T) {
	_, r, c := linked(t, func(c *Config) { c.SoftwareVersion = "1.9.9"; c.InstallDelay = time.Millisecond })
	c.send(protocol.TypeLinked, "", "", protocol.Linked{TerminalID: "10000001", MinSoftwareVersion: "1.10.0"})
	waitState(t, r.Terminal, "must update", func(s State) bool { return s.Screen == "Update required" })
	if !r.MustUpdate() {
		t.Fatal("MustUpdate() = false below the minimum")
	}
	for _, kind := range []string{protocol.TypePurchase, protocol.TypeRefund} {
		ref := "ref-" + kind
		id := c.send(kind, "", ref, payment(1000))
		c.expectAck(id, ref)
		if _, res, stages := c.result(ref); res.StatusID != instore.StatusTerminalMustUpdate || len(stages) != 0 {
			t.Errorf("%s below the minimum: statusId %d, stages %v; want %d at once", kind, res.StatusID, stages, instore.StatusTerminalMustUpdate)
		}
	}
	// Installing the minimum version ends it.
	c.send(protocol.TypeUpdate, "", "upd_1", updateCommand("1.10.0"))
	c.expectUpdateStatus("upd_1")
	c.expectUpdateStatus("upd_1")
	if r.MustUpdate() {
		t.Error("MustUpdate() = true after installing the minimum version")
	}
	c.expectAck(c.purchase("ref-ok", payment(1000)), "ref-ok")
	if _, res, _ := c.result("ref-ok"); res.StatusID != instore.StatusApproved {
		t.Errorf("purchase after the update: statusId %d, want 0", res.StatusID)
	}
	// A higher minimum applies at once; a linked message without one
	// lifts it.
	c.send(protocol.TypeLinked, "", "", protocol.Linked{TerminalID: "10000001", MinSoftwareVersion: "9.0"})
	testwait.For(t, "a new minimum", r.MustUpdate)
	c.link("10000001")
	testwait.For(t, "no minimum", func() bool { return !r.MustUpdate() })
}

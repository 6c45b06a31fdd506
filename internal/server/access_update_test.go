package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// Software updates over the Access API, end to end: their lifecycle on
// virtual and raw terminals, and what waits for what.

// TestUpdateLifecycle installs updates on virtual terminals: SCHEDULED,
// DOWNLOADING, INSTALLED with the new version; FAILED with a reason from
// the sandbox; the terminal stays usable.
func TestUpdateLifecycle(t *testing.T) {
	ck, clock := newClock()
	s := startSandbox(t, clock)
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	term := s.terminals[0]

	u := s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	if u.Status != instore.UpdateScheduled || u.TerminalID != term || u.PackageID != "countertop-1.2.0" || u.NotBefore != nil {
		t.Errorf("created update = %+v, want SCHEDULED", u)
	}
	in := s.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled))
	if in.PendingUpdate != nil || in.SoftwareVersion == nil || *in.SoftwareVersion != "1.2.0" ||
		in.LastUpdate.UpdateID != u.UpdateID || in.LastUpdate.SoftwareVersion == nil || *in.LastUpdate.SoftwareVersion != "1.2.0" {
		t.Errorf("after the install: %+v, last update %+v", in, in.LastUpdate)
	}
	// The terminal stays usable.
	if tx := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("purchase after the update ended %d", tx.StatusID)
	}

	// A failing install, set from the sandbox.
	r := s.post(t, "/sandbox/v1/terminals/"+term+"/next-install", map[string]any{"fail": true, "reason": "checksum mismatch"}, nil)
	if r.resp.StatusCode != 200 {
		t.Fatalf("next-install = %d %s", r.resp.StatusCode, r.body)
	}
	s.post(t, "/sandbox/v1/terminals/"+term+"/next-install", map[string]any{}, nil).problem(t, 400, "validation")
	s.post(t, "/sandbox/v1/terminals/99999999/next-install", map[string]any{"fail": true}, nil).problem(t, 403, "WP16")
	// Update ids sort by their creation's millisecond: on a clock that
	// stands still the second would tie with the first.
	ck.Advance(time.Millisecond)
	u = s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.1.0-own"})
	in = s.waitInfo(t, term, "FAILED", lastStatus(instore.UpdateFailed))
	if in.LastUpdate.Reason == nil || *in.LastUpdate.Reason != "checksum mismatch" || *in.SoftwareVersion != "1.2.0" {
		t.Errorf("failed update: %+v, version %v; want the sandbox reason and 1.2.0 kept", in.LastUpdate, *in.SoftwareVersion)
	}
	if tx := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("purchase after a failed update ended %d", tx.StatusID)
	}

	// Every status of both updates is an update.status event of the
	// merchant, with the update as the Access API shows it.
	statuses := func(evs []instore.EventWire) map[string][]instore.UpdateStatus {
		out := map[string][]instore.UpdateStatus{}
		for _, e := range evs {
			var v instore.UpdateWire
			must(t, json.Unmarshal(e.Data, &v))
			if v.TerminalID != term {
				t.Errorf("update.status of terminal %s in a listing filtered on %s", v.TerminalID, term)
			}
			if v.Status == instore.UpdateFailed && (v.Reason == nil || *v.Reason != "checksum mismatch") {
				t.Errorf("FAILED event without its reason: %s", e.Data)
			}
			out[v.UpdateID] = append(out[v.UpdateID], v.Status)
		}
		return out
	}
	firstID := ""
	evs := s.waitEvents(t, "&types=update.status&terminalId="+term, func(evs []instore.EventWire) bool {
		st := statuses(evs)
		return len(st) == 2 && slices.Contains(st[u.UpdateID], instore.UpdateFailed)
	})
	for id, st := range statuses(evs) {
		last := instore.UpdateInstalled
		if id == u.UpdateID {
			last = instore.UpdateFailed
		} else {
			firstID = id
		}
		if st[0] != instore.UpdateScheduled || st[len(st)-1] != last || len(st) > 3 {
			t.Errorf("update.status events of %s: %v, want SCHEDULED, (DOWNLOADING,) %s", id, st, last)
		}
	}
	if firstID == "" {
		t.Errorf("no update.status events of the first update")
	}

	// The rules of createUpdate.
	unbound := s.allocate(t, map[string]any{"merchantId": s.merchantRec.ID})
	otherCustomer, otherTerminal, _, _ := s.secondCustomer(t)
	s.importCatalogue(t, `{"packages":[{"packageId":"other-only","customerId":"`+otherCustomer+`","model":"countertop","name":"x","version":"3.0","sizeBytes":1,"sha256":"`+strings.Repeat("0", 64)+`","releasedAt":"2026-01-01T00:00:00Z"}]}`)
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"package of another model", map[string]any{"terminalId": term, "packageId": "mobile-1.2.0"}, 400, "validation"},
		{"malformed notBefore", map[string]any{"terminalId": term, "packageId": "countertop-1.2.0", "notBefore": "tonight"}, 400, "validation"},
		{"no packageId", map[string]any{"terminalId": term}, 400, "validation"},
		{"unknown package", map[string]any{"terminalId": term, "packageId": "nope"}, 403, "forbidden"},
		{"another customer's package", map[string]any{"terminalId": term, "packageId": "other-only"}, 403, "forbidden"},
		{"another customer's terminal", map[string]any{"terminalId": otherTerminal, "packageId": "countertop-1.2.0"}, 403, "forbidden"},
		{"unknown terminal", map[string]any{"terminalId": "99999999", "packageId": "countertop-1.2.0"}, 403, "forbidden"},
		{"no device linked", map[string]any{"terminalId": unbound.TerminalID, "packageId": "countertop-1.2.0"}, 409, "WP01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.accessPost(t, "/terminal/createUpdate", tc.body, nil).problem(t, tc.status, tc.code)
		})
	}

	// notBefore: it waits; a second update meanwhile is refused.
	later := ck.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	key := map[string]string{"Idempotency-Key": "upd-later"}
	body := map[string]any{"terminalId": s.terminals[1], "packageId": "mobile-1.2.0", "notBefore": later.Format(time.RFC3339Nano)}
	first := s.accessPost(t, "/terminal/createUpdate", body, key)
	var u2 instore.UpdateWire
	first.decode(t, 201, &u2)
	if u2.NotBefore == nil || !u2.NotBefore.Equal(later) || u2.Status != instore.UpdateScheduled {
		t.Errorf("update with notBefore = %+v, want SCHEDULED until %v", u2, later)
	}
	if again := s.accessPost(t, "/terminal/createUpdate", body, key); !bytes.Equal(again.body, first.body) || again.resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retried createUpdate = %d %s, want the first replayed", again.resp.StatusCode, again.body)
	}
	s.accessPost(t, "/terminal/createUpdate", map[string]any{"terminalId": s.terminals[1], "packageId": "mobile-1.0.0"}, nil).problem(t, 409, "conflict")
	if in := s.info(t, s.terminals[1]); in.PendingUpdate == nil || in.PendingUpdate.Status != instore.UpdateScheduled {
		t.Errorf("update before its notBefore = %+v, want SCHEDULED", in.PendingUpdate)
	}
	// Its delivery is armed for notBefore (within the millisecond the
	// truncation took off): pass it.
	if !ck.BlockUntil(10*time.Second, func(due []time.Duration) bool {
		for _, d := range due {
			if d > 1498*time.Millisecond && d <= 1500*time.Millisecond {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no delivery armed for notBefore")
	}
	ck.Set(later)
	in = s.waitInfo(t, s.terminals[1], "INSTALLED after notBefore", lastStatus(instore.UpdateInstalled))
	if in.LastUpdate.UpdateID != u2.UpdateID {
		t.Errorf("installed update %s, want %s", in.LastUpdate.UpdateID, u2.UpdateID)
	}
}

// TestUpdateWaitsForTransactionAndOfflineTerminal: an update is never
// delivered while a transaction runs, nor while the terminal is offline;
// it goes once the terminal is idle and online.
func TestUpdateWaitsForTransactionAndOfflineTerminal(t *testing.T) {
	s := startSandbox(t)
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	term := s.terminals[0]

	tx := s.purchase(t, term, 1092).tx(t, 201) // acknowledged, no answer until cancelled
	u := s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	in := s.info(t, term)
	if in.PendingUpdate == nil || in.PendingUpdate.Status != instore.UpdateScheduled {
		t.Errorf("update while a transaction runs = %+v, want SCHEDULED", in.PendingUpdate)
	}
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
	if st := s.final(t, tx.OnlineAPIRefID).StatusID; st != instore.StatusAbortedByCashier {
		t.Errorf("cancelled purchase ended %d", st)
	}
	if in := s.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled)); in.LastUpdate.UpdateID != u.UpdateID {
		t.Errorf("installed %s, want %s", in.LastUpdate.UpdateID, u.UpdateID)
	}

	// Offline: it waits for the terminal to return.
	mobile := s.terminals[1]
	s.post(t, "/sandbox/v1/terminals/"+mobile+"/offline", nil, nil)
	s.waitInfo(t, mobile, "offline", func(in instore.TerminalInfoWire) bool { return !in.Online })
	u = s.createUpdate(t, map[string]any{"terminalId": mobile, "packageId": "mobile-1.2.0"})
	if in := s.info(t, mobile); in.PendingUpdate == nil || in.PendingUpdate.Status != instore.UpdateScheduled {
		t.Errorf("update of an offline terminal = %+v, want SCHEDULED", in.PendingUpdate)
	}
	s.post(t, "/sandbox/v1/terminals/"+mobile+"/online", nil, nil)
	in = s.waitInfo(t, mobile, "INSTALLED after returning", lastStatus(instore.UpdateInstalled))
	if in.LastUpdate.UpdateID != u.UpdateID || *in.SoftwareVersion != "1.2.0" {
		t.Errorf("after returning: %+v, last %+v", in, in.LastUpdate)
	}
}

// TestUpdateGoesWhenReversalEnds: an update scheduled while a reversal
// runs is delivered as soon as the reversal's approval (which turns its
// original REVERSED in the same commit) makes the terminal idle, not at
// the next update sweep: the clock is fake and never moves, so no sweep
// or timer runs.
func TestUpdateGoesWhenReversalEnds(t *testing.T) {
	_, clock := newClock()
	e := rawEnv(t, clock)
	e.importCatalogue(t, testCatalogue(e.customer.ID))
	term, d := e.rawTerminal(t, "SN-RAW-REV")

	cmd := e.ackedPurchase(t, d, term, 5000)
	d.result(cmd.Ref, instore.StatusApproved, protocol.TypeConfirm)

	rev, rc := e.startReversal(t, d, cmd.Ref)
	d.send(protocol.TypeAck, "", rev.ID, rev.Ref, nil)
	(<-rc).tx(t, 201)

	// The reversal runs: the update waits for it.
	u := e.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	if in := e.info(t, term); in.PendingUpdate == nil || in.PendingUpdate.Status != instore.UpdateScheduled {
		t.Fatalf("update while a reversal runs = %+v, want SCHEDULED", in.PendingUpdate)
	}
	d.send(protocol.TypeResult, "", "", rev.Ref, protocol.Result{StatusID: instore.StatusApproved})
	// The result's confirm and the update go in either order: the update
	// is sent as the reversal's end is committed, the confirm after.
	var got *protocol.Envelope
	for confirmed := false; !confirmed || got == nil; {
		switch env := d.next(); env.Type {
		case protocol.TypeConfirm:
			confirmed = true
		case protocol.TypeUpdate:
			got = &env
		}
	}
	if got.Ref != u.UpdateID {
		t.Errorf("update command for %q, want %s", got.Ref, u.UpdateID)
	}
	if st := e.get(t, "/in-store/api/v1/transaction/"+cmd.Ref).tx(t, 200).StatusID; st != instore.StatusReversed {
		t.Errorf("original after the reversal = %d, want REVERSED", st)
	}
}

// TestPurchaseDuringInstallWP09 drives a raw device through an update, so
// that the test decides when it reports: from delivery to the end of the
// install, purchases answer WP09; INSTALLED after a reconnect comes from
// the version in hello.
func TestPurchaseDuringInstallWP09(t *testing.T) {
	// A delivered update counts as installing for the ack timeout: long
	// enough here that a loaded machine cannot run past it between the
	// delivery and the purchases below.
	e := rawEnv(t, func(c *server.Config) { c.AckTimeout = 10 * time.Second })
	e.importCatalogue(t, testCatalogue(e.customer.ID))
	term, d := e.rawTerminal(t, "SN-RAW-UPD")

	u := e.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	cmd := d.expect(protocol.TypeUpdate)
	var data protocol.Update
	if err := protocol.DecodeData(&cmd, &data); err != nil || cmd.Ref != u.UpdateID || data.Version != "1.2.0" || data.PackageID != "countertop-1.2.0" {
		t.Fatalf("update command = %+v %+v (%v), want update %s of countertop-1.2.0", cmd, data, err, u.UpdateID)
	}
	s := e
	// Delivered, not reported yet: busy, and the terminal shows why.
	if p := s.purchase(t, term, 1000).problem(t, 409, "WP09"); p.Reason != instore.ReasonUpdate {
		t.Errorf("WP09 of an install has reason %q, want %s", p.Reason, instore.ReasonUpdate)
	}
	view := s.get(t, "/in-store/api/v1/terminal/"+term)
	if !strings.Contains(string(view.body), `"busy":true,"updating":true,"currentOnlineAPIRefId":null`) {
		t.Errorf("terminal while installing = %s, want busy and updating", view.body)
	}
	d.send(protocol.TypeUpdateStatus, "", "", u.UpdateID, protocol.UpdateStatus{Status: protocol.UpdateDownloading})
	d.expect(protocol.TypeConfirm)
	e.waitInfo(t, term, "DOWNLOADING", func(in instore.TerminalInfoWire) bool {
		return in.PendingUpdate != nil && in.PendingUpdate.Status == instore.UpdateDownloading
	})
	p := s.purchase(t, term, 1000).problem(t, 409, "WP09")
	if p.OnlineAPIRefID != "" || p.Reason != instore.ReasonUpdate {
		t.Errorf("WP09 of an install names a transaction %q, reason %q", p.OnlineAPIRefID, p.Reason)
	}
	// The device restarts into the new version: its hello ends the update.
	d.conn.Close()
	d2 := dialDeviceVersion(t, e.srv.URL("terminal"), d.serial, d.secret, "1.2.0")
	in := e.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled))
	if view := s.get(t, "/in-store/api/v1/terminal/"+term); !strings.Contains(string(view.body), `"busy":false,"updating":false`) {
		t.Errorf("terminal after the install = %s, want neither busy nor updating", view.body)
	}
	if *in.SoftwareVersion != "1.2.0" || *in.LastUpdate.SoftwareVersion != "1.2.0" {
		t.Errorf("after the restart: %+v, last %+v", in, in.LastUpdate)
	}
	// Usable again: the purchase reaches the device.
	cmdP, done := s.startPurchase(t, d2, term, 1000)
	d2.send(protocol.TypeAck, "", cmdP.ID, cmdP.Ref, nil)
	if r := <-done; r.resp.StatusCode != 201 {
		t.Errorf("purchase after the update = %d %s", r.resp.StatusCode, r.body)
	}

	// A report for an update it was not sent changes nothing.
	u2 := e.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.0.0"})
	cmd = d2.expect(protocol.TypeUpdate)
	d2.send(protocol.TypeUpdateStatus, "", "", "upd_00000000000000000000000000000000", protocol.UpdateStatus{Status: protocol.UpdateFailed, Reason: "x"})
	d2.send(protocol.TypeUpdateStatus, "", "", cmd.Ref, protocol.UpdateStatus{Status: protocol.UpdateFailed, Reason: "no space left"})
	in = e.waitInfo(t, term, "FAILED", lastStatus(instore.UpdateFailed))
	if in.LastUpdate.UpdateID != u2.UpdateID || *in.LastUpdate.Reason != "no space left" || *in.SoftwareVersion != "1.2.0" {
		t.Errorf("failed update: %+v", in.LastUpdate)
	}
}

// TestMandatoryVersion: a mandatory package imported while terminals run
// raises the minimum; the terminal answers purchases TERMINAL_MUST_UPDATE
// (10) until it installs an update.
func TestMandatoryVersion(t *testing.T) {
	// An update sweep interval no other timer has, to pass it by name.
	const sweep = 7 * time.Minute
	ck, clock := newClock()
	s := startSandbox(t, clock, func(c *server.Config) { c.UpdateSweep = sweep })
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	term := s.terminals[0]
	s.importCatalogue(t, `{"packages":[{"packageId":"countertop-2.0.0","model":"countertop","name":"countertop app","version":"2.0.0","mandatory":true,"sizeBytes":5,"sha256":"`+strings.Repeat("a", 64)+`","releasedAt":"2026-06-01T00:00:00Z"}]}`)
	in := s.waitInfo(t, term, "the new minimum", func(in instore.TerminalInfoWire) bool {
		return in.MinSoftwareVersion != nil && *in.MinSoftwareVersion == "2.0.0"
	})
	if *in.SoftwareVersion != "1.0.0" {
		t.Fatalf("software version = %s, want 1.0.0", *in.SoftwareVersion)
	}
	// The sweep tells the terminal; from then on it refuses to sell (once
	// the message has reached it: the polling waits for that only).
	advance(t, ck, sweep)
	testwait.ForNil(t, "purchases below the minimum to end TERMINAL_MUST_UPDATE", func() error {
		tx := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID)
		if tx.StatusID != instore.StatusTerminalMustUpdate {
			return fmt.Errorf("a purchase ended %d", tx.StatusID)
		}
		if tx.Status != "TERMINAL_MUST_UPDATE" {
			t.Errorf("status = %s, want TERMINAL_MUST_UPDATE", tx.Status)
		}
		return nil
	})
	// Other models are not affected.
	if tx := s.final(t, s.purchase(t, s.terminals[1], 1000).tx(t, 201).OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("purchase on the mobile terminal ended %d, want APPROVED", tx.StatusID)
	}
	s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-2.0.0"})
	s.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled))
	if tx := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("purchase after installing the minimum ended %d, want APPROVED", tx.StatusID)
	}
	// The device's version is the installed one.
	in = s.info(t, term)
	if *in.SoftwareVersion != "2.0.0" {
		t.Errorf("software version = %s, want 2.0.0", *in.SoftwareVersion)
	}
}

// TestAccessLogsHoldNoIdentifiers runs the Access API's operations and
// checks the log for identifiers in clear.
func TestAccessLogsHoldNoIdentifiers(t *testing.T) {
	s := startSandbox(t)
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	s.secrets = append(s.secrets, s.terminals...)
	a := s.allocate(t, map[string]any{"merchantId": s.merchantRec.ID})
	s.info(t, a.TerminalID)
	s.accessGet(t, "/terminal/getPackages/"+s.customer.ID+"/countertop")
	s.accessGet(t, "/terminal/getPackages/cus_unknown/countertop")
	s.accessPost(t, "/getTerminalInfo", map[string]any{"terminalId": "99999999"}, nil)
	s.createUpdate(t, map[string]any{"terminalId": s.terminals[0], "packageId": "countertop-1.2.0"})
	s.waitInfo(t, s.terminals[0], "INSTALLED", lastStatus(instore.UpdateInstalled))
	s.srv.Close()
	logs := s.logs.String()
	if !strings.Contains(logs, "update delivered") {
		t.Fatalf("no update log lines captured:\n%s", logs)
	}
	for _, secret := range s.secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain a secret or identifier %.12s...:\n%s", secret, logs)
		}
	}
}

// TestSandboxRestartKeepsInstalledVersion: a virtual terminal restarts
// with the version it installed, not the one it was provisioned with.
func TestSandboxRestartKeepsInstalledVersion(t *testing.T) {
	s := startSandbox(t)
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	s.createUpdate(t, map[string]any{"terminalId": s.terminals[1], "packageId": "mobile-1.2.0"})
	s.waitInfo(t, s.terminals[1], "INSTALLED", lastStatus(instore.UpdateInstalled))
	serial := s.srv.SandboxDevices()[1].SerialNumber
	must(t, s.srv.Close())
	restarted := time.Now()

	cfg := testserver.Config(s.srv.DataDir())
	sandboxConfig(&cfg)
	srv2 := testserver.Start(t, cfg)
	testwait.For(t, "the virtual terminal to come back after the restart", func() bool {
		d, err := srv2.Store.Device(context.Background(), serial)
		must(t, err)
		if d.LastSeenAt == nil || !d.LastSeenAt.After(restarted) {
			return false
		}
		if d.SoftwareVersion != "1.2.0" {
			t.Errorf("after the restart the virtual terminal says hello with %q, want 1.2.0", d.SoftwareVersion)
		}
		return true
	})
}

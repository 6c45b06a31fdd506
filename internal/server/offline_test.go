package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// cardNetwork posts a card-network control of the virtual terminal term.
func (s *sandbox) cardNetwork(t *testing.T, term string, body map[string]any) reply {
	t.Helper()
	return s.post(t, "/sandbox/v1/terminals/"+term+"/card-network", body, nil)
}

// listForwarding lists the refs of the merchant's transactions in the
// forwarding state.
func (s *sandbox) listForwarding(t *testing.T, state instore.ForwardingState) []string {
	t.Helper()
	var l struct{ Transactions []txJSON }
	s.get(t, "/in-store/api/v1/transactions?forwarding="+string(state)).decode(t, 200, &l)
	var refs []string
	for _, tx := range l.Transactions {
		if tx.Forwarding == nil || tx.Forwarding.State != state {
			t.Errorf("listing forwarding=%s gave %s with forwarding %+v", state, tx.OnlineAPIRefID, tx.Forwarding)
		}
		refs = append(refs, tx.OnlineAPIRefID)
	}
	return refs
}

// TestOfflineApprovals drives store and forward end to end on both
// backends with a virtual terminal: its card network down, two sales below
// the floor limit approved offline and listed QUEUED, one above ending
// TERMINAL_IS_OFFLINE (9), one with the queue full OFFLINE_QUEUE_IS_FULL
// (7); the next forward declined; the network back: one FORWARDED, one
// DECLINED, with their timeline entries and events; refunds and reversals
// of a sale QUEUED or DECLINED refused, of the FORWARDED one allowed.
func TestOfflineApprovals(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		term := s.terminals[0]
		s.cardNetwork(t, term, map[string]any{}).problem(t, 400, "validation")
		s.cardNetwork(t, term, map[string]any{"online": true, "floorLimit": 100}).problem(t, 400, "validation")
		s.cardNetwork(t, term, map[string]any{"online": false, "queueSize": 0}).problem(t, 400, "validation")
		var dev sandboxapi.DeviceJSON
		s.cardNetwork(t, term, map[string]any{"online": false, "floorLimit": 5000, "queueSize": 2}).decode(t, 200, &dev)
		if c := dev.CardNetwork; c.Online || c.FloorLimit != 5000 || c.QueueSize != 2 {
			t.Fatalf("card network after taking it down: %+v", c)
		}

		sale := func(amount int64) txJSON {
			t.Helper()
			return s.final(t, s.purchase(t, term, amount).tx(t, 201).OnlineAPIRefID)
		}
		first, second := sale(1000), sale(5000)
		for _, tx := range []txJSON{first, second} {
			if tx.StatusID != instore.StatusApproved || tx.Result == nil || !tx.Result.Offline || tx.Forwarding == nil ||
				tx.Forwarding.State != instore.ForwardQueued || tx.Forwarding.ForwardedAt != nil {
				t.Fatalf("a sale below the floor limit: status %d result %+v forwarding %+v", tx.StatusID, tx.Result, tx.Forwarding)
			}
		}
		if got := s.listForwarding(t, instore.ForwardQueued); len(got) != 2 || got[0] != second.OnlineAPIRefID || got[1] != first.OnlineAPIRefID {
			t.Errorf("forwarding=QUEUED lists %v, want both sales, newest first", got)
		}
		s.get(t, "/in-store/api/v1/transactions?forwarding=LOST").problem(t, 400, "validation")
		refund := func(orig txJSON, amount int64) reply {
			return s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": amount, "currency": "SEK",
				"originalOnlineAPIRefId": orig.OnlineAPIRefID}, nil)
		}
		if r := refund(first, 100); r.problem(t, 409, "conflict").Status != 409 || !strings.Contains(string(r.body), "QUEUED") {
			t.Errorf("refund of a queued sale: %s", r.body)
		}
		s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": second.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")

		if above := sale(6000); above.StatusID != instore.StatusTerminalIsOffline || above.Forwarding != nil {
			t.Errorf("a sale above the floor limit: status %d forwarding %+v, want 9", above.StatusID, above.Forwarding)
		}
		if full := sale(1500); full.StatusID != instore.StatusOfflineQueueIsFull || full.Forwarding != nil {
			t.Errorf("a sale with the queue full: status %d forwarding %+v, want 7", full.StatusID, full.Forwarding)
		}

		s.post(t, "/sandbox/v1/terminals/"+term+"/next-forward", map[string]any{}, nil).problem(t, 400, "validation")
		s.post(t, "/sandbox/v1/terminals/"+term+"/next-forward", map[string]any{"declined": true}, nil).decode(t, 200, &dev)
		if !dev.CardNetwork.NextForwardDeclined || len(dev.CardNetwork.Queued) != 2 {
			t.Fatalf("card network after next-forward: %+v", dev.CardNetwork)
		}
		s.cardNetwork(t, term, map[string]any{"online": true}).decode(t, 200, &dev)
		var declined, forwarded txJSON
		testwait.For(t, "both offline approvals forwarded", func() bool {
			declined = s.get(t, "/in-store/api/v1/transaction/"+first.OnlineAPIRefID).tx(t, 200)
			forwarded = s.get(t, "/in-store/api/v1/transaction/"+second.OnlineAPIRefID).tx(t, 200)
			return declined.Forwarding.State != instore.ForwardQueued && forwarded.Forwarding.State != instore.ForwardQueued
		})
		// The queue goes in order: the first forwarded took the decline.
		if declined.Forwarding.State != instore.ForwardDeclined || declined.Forwarding.ForwardedAt == nil || declined.StatusID != instore.StatusApproved {
			t.Errorf("the first sale: status %d forwarding %+v, want APPROVED, DECLINED", declined.StatusID, declined.Forwarding)
		}
		if forwarded.Forwarding.State != instore.ForwardForwarded || forwarded.Forwarding.ForwardedAt == nil {
			t.Errorf("the second sale: forwarding %+v, want FORWARDED", forwarded.Forwarding)
		}
		if got := s.listForwarding(t, instore.ForwardDeclined); len(got) != 1 || got[0] != first.OnlineAPIRefID {
			t.Errorf("forwarding=DECLINED lists %v", got)
		}
		for ref, kind := range map[string]instore.TimelineKind{first.OnlineAPIRefID: instore.EventForwardDeclined, second.OnlineAPIRefID: instore.EventForwarded} {
			tl := s.timeline(t, ref)
			if last := tl[len(tl)-1]; last.Kind != kind || last.Actor != instore.ActorTerminal || last.StatusBefore != "APPROVED" || last.StatusAfter != "APPROVED" {
				t.Errorf("%s: last timeline entry %+v, want %s", ref, last, kind)
			}
		}
		s.waitEvents(t, "&types=transaction.forwarded,transaction.forward_declined", func(evs []instore.EventWire) bool {
			got := map[instore.EventType]string{}
			for _, e := range evs {
				for _, ref := range []string{first.OnlineAPIRefID, second.OnlineAPIRefID} {
					if strings.Contains(string(e.Data), `"onlineAPIRefId":"`+ref+`"`) {
						got[e.Type] = ref
					}
				}
			}
			return len(evs) == 2 && got[instore.EventTransactionForwardDeclined] == first.OnlineAPIRefID &&
				got[instore.EventTransactionForwarded] == second.OnlineAPIRefID
		})

		_, mfs := s.scrape(t)
		if v, _ := value(mfs, "instore_forward_declined_total", nil); v != 1 {
			t.Errorf("instore_forward_declined_total = %v after one forward declined, want 1", v)
		}
		if r := refund(declined, 100); r.problem(t, 409, "conflict").Status != 409 || !strings.Contains(string(r.body), "not paid") {
			t.Errorf("refund of a declined sale: %s", r.body)
		}
		s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": declined.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
		if r := s.final(t, refund(forwarded, 5000).tx(t, 201).OnlineAPIRefID); r.StatusID != instore.StatusApproved {
			t.Errorf("refund of the forwarded sale: status %d", r.StatusID)
		}
		testwait.For(t, "the terminal's reports confirmed", func() bool {
			var devs struct{ Devices []sandboxapi.DeviceJSON }
			s.get(t, "/sandbox/v1/devices").decode(t, 200, &devs)
			for _, d := range devs.Devices {
				if d.TerminalID != nil && *d.TerminalID == term {
					return d.CardNetwork.Online && len(d.CardNetwork.Unconfirmed) == 0 && len(d.CardNetwork.Queued) == 0
				}
			}
			return false
		})
	})
}

// TestForwardedReportRawDevice: a terminal's forwarded report is applied
// once and confirmed every time it is sent; a report on an unknown
// transaction, or on one not approved offline, is confirmed and ignored;
// the terminal's session goes on. Both backends.
func TestForwardedReportRawDevice(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s := owedEnv(t, store, nil)
		term, d := s.rawTerminal(t, "RAW-OFF")
		approve := func(amount int64, offline bool) string {
			t.Helper()
			cmd, done := s.startPurchase(t, d, term, amount)
			d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
			(<-done).tx(t, 201)
			id := d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, AuthorizationCode: "Y1", Offline: offline})
			expectConfirmOf(t, d, id)
			return cmd.Ref
		}
		queued, online := approve(1000, true), approve(2000, false)
		if tx := s.final(t, queued); tx.Forwarding == nil || tx.Forwarding.State != instore.ForwardQueued || !tx.Result.Offline {
			t.Fatalf("an offline approval: forwarding %+v result %+v", tx.Forwarding, tx.Result)
		}
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		report := func(id, ref string, declined bool) {
			t.Helper()
			d.send(protocol.TypeForwarded, id, "", ref, protocol.Forwarded{Declined: &declined, ForwardedAt: at})
			expectConfirmOf(t, d, id)
		}
		report("fwd-1", queued, true)
		report("fwd-1", queued, true)  // resent: confirmed again, applied once
		report("fwd-2", queued, false) // contradicting: the first stands
		tx := s.get(t, "/in-store/api/v1/transaction/"+queued).tx(t, 200)
		if tx.Forwarding.State != instore.ForwardDeclined || !tx.Forwarding.ForwardedAt.Equal(at) || tx.StatusID != instore.StatusApproved {
			t.Errorf("after the reports: status %d forwarding %+v, want APPROVED, DECLINED at %v", tx.StatusID, tx.Forwarding, at)
		}
		n := 0
		for _, e := range s.timeline(t, queued) {
			if e.Kind == instore.EventForwardDeclined || e.Kind == instore.EventForwarded {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d forwarding entries in the timeline, want 1", n)
		}
		report("fwd-3", "txn_unknown", false)
		report("fwd-4", online, true)
		if tx := s.get(t, "/in-store/api/v1/transaction/"+online).tx(t, 200); tx.Forwarding != nil || tx.Result.Offline {
			t.Errorf("a report on an online approval changed it: forwarding %+v", tx.Forwarding)
		}
		// The session goes on: the terminal takes the next sale.
		approve(3000, false)
	})
}

// expectConfirmOf reads the device's frames until the server's confirm of
// its message id.
func expectConfirmOf(t *testing.T, d *rawDevice, id string) {
	t.Helper()
	for {
		if env := d.expect(protocol.TypeConfirm); env.Re == id {
			return
		}
	}
}

// TestSandboxOfflineOnlineAnswerTheNewState: POST .../offline and
// .../online answer with the virtual terminal's state after the change,
// and the service already sees it: a purchase right after offline is WP23,
// one right after online runs.
func TestSandboxOfflineOnlineAnswerTheNewState(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[1]
	state := func(path string) sandboxapi.DeviceJSON {
		t.Helper()
		resp, body := s.post(t, "/sandbox/v1/terminals/"+term+path, nil, nil).parts()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, body)
		}
		var d sandboxapi.DeviceJSON
		must(t, json.Unmarshal(body, &d))
		if d.TerminalID == nil || *d.TerminalID != term {
			t.Fatalf("POST %s answered %s, want terminal %s", path, body, term)
		}
		return d
	}
	// Twice: the second time the screen still shows the last result.
	for i := range 2 {
		if d := state("/offline"); d.Online || i == 0 && d.Screen != "Offline" {
			t.Fatalf("offline answered %+v, want online false (and the Offline screen)", d)
		}
		s.purchase(t, term, 100).problem(t, 409, "WP23")
		if d := state("/online"); !d.Online || i == 0 && d.Screen != "Idle" {
			t.Fatalf("online answered %+v, want online true (and the Idle screen)", d)
		}
		if tx := s.final(t, s.purchase(t, term, 100).tx(t, 201).OnlineAPIRefID); tx.StatusID != 0 {
			t.Fatalf("purchase right after online ended %d, want 0 APPROVED", tx.StatusID)
		}
	}
}

package sim

import (
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// TestCardNetworkDown: with the card network down, purchases at or below
// the floor limit are approved offline and queued, one above it ends
// TERMINAL_IS_OFFLINE and one with the queue full OFFLINE_QUEUE_IS_FULL, a
// refund TERMINAL_IS_OFFLINE, a declined card stays declined; when the
// network returns the queue is forwarded in order, the next forward
// declined as set, and each report is resent after a reconnect until
// confirmed.
func TestCardNetworkDown(t *testing.T) {
	g, r, c := linked(t, nil)
	if err := r.SetCardNetwork(false, 5000, 2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]int64{{-1, 2}, {5000, 0}, {5000, MaxOfflineQueue + 1}, {instore.MaxAmount + 1, 1}} {
		if err := r.SetCardNetwork(false, bad[0], int(bad[1])); err == nil {
			t.Errorf("SetCardNetwork(false, %d, %d) accepted", bad[0], bad[1])
		}
	}
	steps := []struct {
		ref     string
		kind    string
		amount  int64
		status  instore.TransactionStatus
		offline bool
	}{
		{"ref-a", protocol.TypePurchase, 1000, instore.StatusApproved, true},
		{"ref-above", protocol.TypePurchase, 5050, instore.StatusTerminalIsOffline, false},
		{"ref-declined", protocol.TypePurchase, 1011, instore.StatusTransactionDeclined, false},
		{"ref-refund", protocol.TypeRefund, 100, instore.StatusTerminalIsOffline, false},
		{"ref-b", protocol.TypePurchase, 5000, instore.StatusApproved, true},
		{"ref-full", protocol.TypePurchase, 100, instore.StatusOfflineQueueIsFull, false},
	}
	for _, s := range steps {
		c.expectAck(c.send(s.kind, "", s.ref, payment(s.amount)), s.ref)
		env, res, _ := c.result(s.ref)
		if res.StatusID != s.status || res.Offline != s.offline {
			t.Errorf("%s: status %d offline %v, want %d, %v", s.ref, res.StatusID, res.Offline, s.status, s.offline)
		}
		c.confirm(env.ID)
	}
	st := r.State().CardNetwork
	if st.Online || st.FloorLimit != 5000 || st.QueueSize != 2 || len(st.Queued) != 2 || st.Queued[0] != "ref-a" || st.Queued[1] != "ref-b" {
		t.Fatalf("card network %+v, want down with ref-a and ref-b queued", st)
	}

	r.SetNextForward(true)
	if err := r.SetCardNetwork(true, 0, 0); err != nil {
		t.Fatal(err)
	}
	forwarded := func(c *gwConn, ref string, declined bool) protocol.Envelope {
		t.Helper()
		env := c.expect(protocol.TypeForwarded)
		d := decodeData[protocol.Forwarded](t, env)
		if d.Declined == nil || d.ForwardedAt.IsZero() {
			t.Fatalf("forwarded data %s", env.Data)
		}
		if env.Ref != ref || *d.Declined != declined {
			t.Fatalf("forwarded %s declined %v, want %s declined %v", env.Ref, *d.Declined, ref, declined)
		}
		return env
	}
	a := forwarded(c, "ref-a", true) // the next forward: declined
	b := forwarded(c, "ref-b", false)
	if st := r.State().CardNetwork; !st.Online || len(st.Queued) != 0 || len(st.Unconfirmed) != 2 || st.NextForwardDeclined {
		t.Fatalf("card network after forwarding %+v", st)
	}
	c.confirm(a.ID)
	// The unconfirmed report is resent, same id, after a reconnect; the
	// confirmed one is not.
	c.expectAck(c.purchase("ref-sync", payment(1000)), "ref-sync") // the confirm was read
	sync, _, _ := c.result("ref-sync")
	c.confirm(sync.ID)
	c.ws.Close()
	c2 := g.accept(t)
	if again := c2.expect(protocol.TypeForwarded); again.ID != b.ID || again.Ref != "ref-b" {
		t.Fatalf("after reconnecting: %+v, want the report of ref-b again", again)
	}
	c2.confirm(b.ID)
	waitState(t, r.Terminal, "every report confirmed", func(s State) bool { return len(s.CardNetwork.Unconfirmed) == 0 })
	// Online again: approved online.
	c2.expectAck(c2.purchase("ref-online", payment(1000)), "ref-online")
	if _, res, _ := c2.result("ref-online"); res.StatusID != instore.StatusApproved || res.Offline {
		t.Errorf("online again: status %d offline %v", res.StatusID, res.Offline)
	}
}

package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/protocol"
)

// The card network (store and forward). A virtual terminal's card network
// is up until the sandbox takes it down (SetCardNetwork). While it is down
// the terminal still has its session with the service, but no issuer: a
// purchase it would approve is approved offline if its total is at or
// below the floor limit and the offline queue has room (result offline:
// true, kept in the queue); with the queue full it ends
// OFFLINE_QUEUE_IS_FULL (7); above the floor limit, and any refund,
// pre-authorisation or card-less command, TERMINAL_IS_OFFLINE (9): they
// need the issuer. An outcome that is not an approval (a declined card, a
// wrong PIN) is the card's and stays. When the network comes back the
// terminal forwards the queue in order and reports each outcome with a
// forwarded message, kept and resent (same message id) after every hello
// until the service confirms it; SetNextForward makes the next one
// declined by the issuer.

// Limits of SetCardNetwork.
const (
	MaxOfflineQueue = 100
)

// CardNetwork is a virtual terminal's card network as State shows it: the
// sandbox's wire form, whose one definition is the SDK's
// (client.SandboxCardNetworkState). Online is the default; FloorLimit and
// QueueSize are 0 while the network never went down; NextForwardDeclined
// is set by SetNextForward.
type CardNetwork = client.SandboxCardNetworkState

// cardNetwork is the card network's state, guarded by Terminal.mu.
type cardNetwork struct {
	down         bool
	floorLimit   int64
	queueSize    int
	queue        []string   // refs of offline approvals, oldest first
	reports      []*forward // forwarded reports not yet confirmed
	nextDeclined bool
}

// forward is a forwarded report kept until the service confirms it.
type forward struct {
	ref string
	env protocol.Envelope
}

// SetCardNetwork takes the terminal's card network down (online false),
// with the floor limit (0 up to instore.MaxAmount) and the offline queue's
// size (1 up to MaxOfflineQueue), or brings it back (online true; the
// limits are then ignored), which forwards the offline queue in order and
// sends a forwarded report for each approval.
func (t *Terminal) SetCardNetwork(online bool, floorLimit int64, queueSize int) error {
	if !online {
		switch {
		case floorLimit < 0 || floorLimit > instore.MaxAmount:
			return fmt.Errorf("sim: floor limit %d is not from 0 to %d", floorLimit, instore.MaxAmount)
		case queueSize < 1 || queueSize > MaxOfflineQueue:
			return fmt.Errorf("sim: offline queue size %d is not from 1 to %d", queueSize, MaxOfflineQueue)
		}
	}
	var sends []protocol.Envelope
	t.update(func() {
		n := &t.net
		if !online {
			n.down, n.floorLimit, n.queueSize = true, floorLimit, queueSize
			return
		}
		n.down = false
		sends = t.forwardQueueLocked()
	})
	if online {
		t.log.Info("sim: card network up; forwarding the offline queue", "approvals", len(sends))
	} else {
		t.log.Info("sim: card network down", "floorLimit", floorLimit, "queueSize", queueSize)
	}
	for _, env := range sends {
		t.send(env)
	}
	return nil
}

// SetNextForward makes the next approval the terminal forwards declined
// by the issuer (declined true), or accepted again (false).
func (t *Terminal) SetNextForward(declined bool) {
	t.update(func() { t.net.nextDeclined = declined })
}

// forwardQueueLocked forwards the offline queue, oldest first: each
// approval gets its report, kept until confirmed; it returns them to send.
func (t *Terminal) forwardQueueLocked() []protocol.Envelope {
	n := &t.net
	var out []protocol.Envelope
	for _, ref := range n.queue {
		declined := n.nextDeclined
		n.nextDeclined = false
		env := t.envelope(protocol.TypeForwarded, "", ref, protocol.Forwarded{Declined: &declined, ForwardedAt: time.Now().UTC()})
		n.reports = append(n.reports, &forward{ref: ref, env: env})
		out = append(out, env)
	}
	n.queue = nil
	return out
}

// offlineLocked is the card network's say on the outcome status of tx:
// with the network up, or an outcome that is not an approval, status
// stays; with it down, see the package comment. offline reports an
// approval kept in the offline queue.
func (t *Terminal) offlineLocked(tx *txn, status instore.TransactionStatus) (_ instore.TransactionStatus, offline bool) {
	n := &t.net
	if !n.down || status != instore.StatusApproved {
		return status, false
	}
	switch {
	case tx.kind != protocol.TypePurchase || tx.pay.PaymentMethodID != nil || tx.pay.Amount+tx.tip > n.floorLimit:
		return instore.StatusTerminalIsOffline, false
	case len(n.queue) >= n.queueSize:
		return instore.StatusOfflineQueueIsFull, false
	}
	if !slices.Contains(n.queue, tx.ref) {
		n.queue = append(n.queue, tx.ref)
	}
	return instore.StatusApproved, true
}

// forwardsLocked are the forwarded reports not yet confirmed, in order:
// resent after every hello, after the results.
func (t *Terminal) forwardsLocked() []protocol.Envelope {
	out := make([]protocol.Envelope, 0, len(t.net.reports))
	for _, f := range t.net.reports {
		out = append(out, f.env)
	}
	return out
}

// forwardConfirmed forgets the forwarded report the service confirmed
// (the message id id).
func (t *Terminal) forwardConfirmed(id string) {
	mine := func(f *forward) bool { return f.env.ID == id }
	t.mu.Lock()
	found := slices.ContainsFunc(t.net.reports, mine)
	t.mu.Unlock()
	if found {
		t.update(func() { t.net.reports = slices.DeleteFunc(t.net.reports, mine) })
	}
}

// cardNetworkLocked is the card network as State shows it.
func (t *Terminal) cardNetworkLocked() *CardNetwork {
	n := &t.net
	c := &CardNetwork{Online: !n.down, FloorLimit: n.floorLimit, QueueSize: n.queueSize,
		Queued: slices.Clone(n.queue), Unconfirmed: make([]string, 0, len(n.reports)), NextForwardDeclined: n.nextDeclined}
	if c.Queued == nil {
		c.Queued = []string{}
	}
	for _, f := range n.reports {
		c.Unconfirmed = append(c.Unconfirmed, f.ref)
	}
	return c
}

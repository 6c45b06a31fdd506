package client

import (
	"context"

	"github.com/instore-dev/instore"
)

// Offline approvals (store and forward): a terminal whose card network is
// down approves a purchase at or below its floor limit on its own and
// queues it; such a Transaction has Result.Offline and Forwarding (state
// QUEUED, then FORWARDED, or DECLINED when the issuer refused it when the
// terminal forwarded it: the customer left with the goods, the merchant
// was not paid). Its StatusID stays APPROVED. A refund or reversal of a
// sale QUEUED or DECLINED answers 409. ListParams.Forwarding lists them by
// state; the events transaction.forwarded and transaction.forward_declined
// tell each move.

// Forwarding is an offline approval's forwarding (nil on every other
// transaction).
type Forwarding = instore.Forwarding

// Forwarding states.
const (
	ForwardQueued    = instore.ForwardQueued
	ForwardForwarded = instore.ForwardForwarded
	ForwardDeclined  = instore.ForwardDeclined
)

// Queued reports whether t was approved offline and is not forwarded yet.
func (t *Transaction) Queued() bool {
	return t.Forwarding != nil && t.Forwarding.State == instore.ForwardQueued
}

// ForwardDeclined reports whether t was approved offline and the issuer
// declined it when its terminal forwarded it: the merchant was not paid.
func (t *Transaction) ForwardDeclined() bool {
	return t.Forwarding != nil && t.Forwarding.State == instore.ForwardDeclined
}

// SandboxCardNetworkState is a virtual device's card network
// (SandboxDevice.CardNetwork).
type SandboxCardNetworkState struct {
	// Online: the device reaches its issuers.
	Online bool `json:"online"`
	// FloorLimit (minor units) and QueueSize as set when it went down.
	FloorLimit int64 `json:"floorLimit"`
	QueueSize  int   `json:"queueSize"`
	// Queued are the offline approvals in its queue, oldest first;
	// Unconfirmed the forwarded ones whose report the service has not
	// confirmed yet.
	Queued      []string `json:"queued"`
	Unconfirmed []string `json:"unconfirmed"`
	// NextForwardDeclined: the next approval forwarded is declined.
	NextForwardDeclined bool `json:"nextForwardDeclined"`
}

// CardNetworkParams is the card network SandboxCardNetwork sets.
type CardNetworkParams struct {
	// Online false takes the network down; true brings it back, which
	// forwards the offline queue in order (FloorLimit and QueueSize are
	// then not sent).
	Online bool
	// FloorLimit (minor units; 0: the server's default, 5000) is the
	// highest total approved offline, QueueSize (0: the default, 10) how
	// many approvals the offline queue holds.
	FloorLimit int64
	QueueSize  int
}

// SandboxCardNetwork takes the virtual terminal's card network down or
// back up (CardNetworkParams). While it is down, a purchase at or below
// the floor limit is approved offline and queued; with the queue full it
// ends OFFLINE_QUEUE_IS_FULL (7), above the floor limit
// TERMINAL_IS_OFFLINE (9).
func (c *Client) SandboxCardNetwork(ctx context.Context, terminalID string, p CardNetworkParams, opts ...CallOption) (*SandboxDevice, error) {
	body := struct {
		Online     bool   `json:"online"`
		FloorLimit *int64 `json:"floorLimit,omitempty"`
		QueueSize  *int   `json:"queueSize,omitempty"`
	}{Online: p.Online}
	if !p.Online && p.FloorLimit != 0 {
		body.FloorLimit = &p.FloorLimit
	}
	if !p.Online && p.QueueSize != 0 {
		body.QueueSize = &p.QueueSize
	}
	return c.sandboxPost(ctx, terminalID, "card-network", "/sandbox/v1/terminals/{terminalId}/card-network", body, opts)
}

// SandboxNextForward makes the next approval the virtual terminal forwards
// declined by the issuer (declined true), or accepted (false).
func (c *Client) SandboxNextForward(ctx context.Context, terminalID string, declined bool, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "next-forward", "/sandbox/v1/terminals/{terminalId}/next-forward", map[string]bool{"declined": declined}, opts)
}

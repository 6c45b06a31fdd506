package cluster

import (
	"context"
	"errors"

	"github.com/instore-dev/instore"
)

var errNoBatchEvents = errors.New("cluster: the service takes no batches")

// SendClose sends a close through the local gateway when the device is
// online here, and wakes the node holding its session otherwise, which
// sends the PENDING close from the store (the Service's hello path).
func (g gatewayOf) SendClose(ctx context.Context, serial, batchID string) error {
	bg, ok := g.n.local.(instore.BatchGateway)
	if !ok {
		return instore.ErrOffline
	}
	return g.via(ctx, serial, func() error { return bg.SendClose(ctx, serial, batchID) })
}

// TerminalBatch is refused on a session that is no longer the device's
// current one (fencing), as every report is.
func (e events) TerminalBatch(ctx context.Context, serial string, r instore.BatchReport) error {
	if err := e.n.current(ctx, serial); err != nil {
		return err
	}
	be, ok := e.TerminalEvents.(instore.BatchEvents)
	if !ok {
		return errNoBatchEvents
	}
	return be.TerminalBatch(ctx, serial, r)
}

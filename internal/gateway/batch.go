package gateway

import (
	"context"
	"errors"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

var _ instore.BatchGateway = (*Server)(nil)

// errNoBatches: the gateway's TerminalEvents take no batch (a batch
// message is then not confirmed).
var errNoBatches = errors.New("the service takes no batches")

// SendClose asks the device to close its batch for the close batchID. The
// message id is the batchId: every send of one close carries the same.
func (g *Server) SendClose(ctx context.Context, serial, batchID string) error {
	return g.send(ctx, serial, protocol.TypeClose, batchID, batchID, nil)
}

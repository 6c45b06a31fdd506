package gateway

import (
	"context"
	"time"

	"github.com/instore-dev/instore"
)

// TerminalForwarded records a forwarding report.
func (r *recorder) TerminalForwarded(ctx context.Context, serial string, f instore.ForwardReport) error {
	r.add("forwarded %s %s %v %s", serial, f.Ref, f.Declined, f.ForwardedAt.UTC().Format(time.RFC3339))
	return nil
}

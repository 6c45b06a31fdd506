package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// TerminalForwarded records a forwarding report.
func (r *recorder) TerminalForwarded(ctx context.Context, serial string, f instore.ForwardReport) error {
	r.add("forwarded %s %s %v %s", serial, f.Ref, f.Declined, f.ForwardedAt.UTC().Format(time.RFC3339))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failForwards > 0 {
		r.failForwards--
		return errors.New("store down")
	}
	return nil
}

// TestForwardedConfirmedOnlyWhenApplied: a forwarded report the service
// could not store is not confirmed, and the session closes (1011) so the
// terminal reconnects and resends it at once, as a result.
func TestForwardedConfirmedOnlyWhenApplied(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-FORWARD"
	const report = `{"type":"forwarded","id":"t-43","ref":"txn_8","data":{"declined":false,"forwardedAt":"2026-03-02T10:00:00Z"}}`
	h.resendAfterFailure(t, serial, report, "t-43", func(r *recorder) { r.failForwards = 1 })
	if got := h.ev.count("forwarded " + serial + " txn_8 false 2026-03-02T10:00:00Z"); got != 2 {
		t.Errorf("forwarded reports applied = %d, want 2 (failed, then resent)", got)
	}
}

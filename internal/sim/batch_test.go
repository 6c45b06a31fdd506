package sim

import (
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// TestBatchTooLargeNotReported: a batch of more transactions than one
// batch message holds is not reported (the server's close ends WP25) and
// stays open: the terminal never sends a message the gateway must refuse
// (which it would resend after every reconnect), and goes on selling; a
// close of a batch that fits is answered.
func TestBatchTooLargeNotReported(t *testing.T) {
	_, r, c := linked(t, nil)
	for range protocol.MaxBatchTransactions + 1 {
		r.AddBatchExtra(instore.TypePurchase, 100, "SEK")
	}
	c.send(protocol.TypeClose, "", "bat_1", nil)
	// The next message is the ack of a purchase: no batch came (nextAny
	// fails the test on a frame the gateway would refuse).
	c.expectAck(c.send(protocol.TypePurchase, "", "ref-after", payment(1000)), "ref-after")
	env, res, _ := c.result("ref-after")
	if res.StatusID != instore.StatusApproved {
		t.Fatalf("the sale after the refused close: status %d", res.StatusID)
	}
	c.confirm(env.ID)
	if n := len(r.ClosedBatches()); n != 0 {
		t.Errorf("closed batches = %d, want none", n)
	}
}

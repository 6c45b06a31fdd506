package client_test

import (
	"testing"

	"github.com/instore-dev/instore/client"
)

// exerciseTips drives tips against the demo: each way to ask, the sandbox's
// next tip, and a refund of the whole total.
func exerciseTips(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)
	for _, tc := range []struct {
		name string
		next int64 // SandboxNextTip first, unless negative
		tip  *client.Tip
		want int64
	}{
		{"prompt", -1, client.TipPrompt(10, 15, 20), 100},
		{"enter total", 250, client.TipEnterTotal(), 250},
		{"fixed", -1, client.TipFixed(150), 150},
	} {
		if tc.next >= 0 {
			mustOK[*client.SandboxDevice](t, "SandboxNextTip")(c.SandboxNextTip(ctx, term, tc.next))
		}
		sale := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1000, Currency: "SEK", Tip: tc.tip})
		if !sale.Approved() || sale.TipAmount != tc.want || sale.TotalAmount != 1000+tc.want || sale.Tip == nil || sale.Tip.Mode != tc.tip.Mode {
			t.Errorf("%s: status %d, tip %+v, tipAmount %d, totalAmount %d; want APPROVED with %d", tc.name, sale.StatusID, sale.Tip, sale.TipAmount, sale.TotalAmount, tc.want)
			continue
		}
		refund := mustOK[*client.Transaction](t, "Refund")(c.Refund(ctx, client.RefundParams{TerminalID: term, Amount: sale.TotalAmount,
			Currency: "SEK", OriginalOnlineAPIRefID: sale.OnlineAPIRefID}))
		if final, err := c.WaitForFinal(ctx, refund.OnlineAPIRefID, nil); err != nil || !final.Approved() {
			t.Errorf("%s: refund of the total: %v %+v", tc.name, err, final)
		}
	}
}

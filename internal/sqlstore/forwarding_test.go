package sqlstore_test

import (
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestListForwardingPlan: GET /transactions?forwarding= reads one range of
// the partial index of offline approvals backwards (migration 0016), with
// no sort, alone or with a terminal and a cursor.
func TestListForwardingPlan(t *testing.T) {
	forEachSeeded(t, 2000, func(t *testing.T, be backend, db *sqlstore.DB, fx *benchFixture) {
		month := benchEnd.Add(-instore.MaxListRange)
		for i := range 4 {
			f := instore.TransactionFilter{MerchantID: "mer_bench", From: month, To: benchEnd, Limit: instore.DefaultListLimit,
				TransactionSelection: instore.TransactionSelection{Forwarding: instore.ForwardQueued}}
			if i&1 != 0 {
				f.TerminalID = fx.Terminals[3]
			}
			if i&2 != 0 {
				f.After = &fx.Deep
			}
			plan, text := explainList(t, db, f)
			switch be.name {
			case "sqlite":
				want := "SEARCH transactions USING INDEX transactions_merchant_forwarding_created (merchant_id=? AND forwarding_state=? AND created_at>? AND created_at<?)"
				if len(plan) != 2 || plan[0] != want || !strings.Contains(plan[1], "Prev") || strings.Contains(plan[1], "Sorter") {
					t.Errorf("filter %d: plan\n%s\nwant %s walked backwards", i, text, want)
				}
			default:
				if !strings.Contains(text, "Index Scan Backward using transactions_merchant_forwarding_created") ||
					strings.Contains(text, "Sort") || strings.Contains(text, "Seq Scan") {
					t.Errorf("filter %d: plan\n%s\nwant an Index Scan Backward of the forwarding index", i, text)
				}
			}
		}
	})
}

package sqlstore_test

import (
	"context"
	"strings"
	"testing"
)

// TestSchemaGuards proves, on every backend, the guarantees the schema
// gives the code that comes next: one PENDING transaction per terminal, a
// transaction's merchant its terminal ID's, one unfinished update per
// terminal, one terminal ID per device.
func TestSchemaGuards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		_, db := b.migrated(t)
		ctx := context.Background()
		q := func(query string) string {
			if b.driver != "pgx" {
				return query
			}
			n := 0
			var out strings.Builder
			for _, r := range query {
				if r == '?' {
					n++
					out.WriteString("$" + string(rune('0'+n)))
					continue
				}
				out.WriteRune(r)
			}
			return out.String()
		}
		exec := func(query string, args ...any) error {
			_, err := db.ExecContext(ctx, q(query), args...)
			return err
		}
		mustExec := func(query string, args ...any) {
			t.Helper()
			if err := exec(query, args...); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		mustExec(`INSERT INTO customers (id, name, created_at) VALUES ('cus_1', 'c', 1)`)
		mustExec(`INSERT INTO merchants (id, customer_id, name, active, created_at) VALUES ('mer_1', 'cus_1', 'm', ?, 1)`, true)
		mustExec(`INSERT INTO devices (serial_number, model, secret_hash, created_at) VALUES ('S1', 'countertop', ?, 1)`, []byte{1})
		mustExec(`INSERT INTO terminals (terminal_id, customer_id, merchant_id, serial_number, created_at) VALUES ('10000001', 'cus_1', 'mer_1', 'S1', 1)`)
		mustExec(`INSERT INTO terminals (terminal_id, customer_id, merchant_id, created_at) VALUES ('10000002', 'cus_1', 'mer_1', 1)`)
		mustExec(`INSERT INTO merchants (id, customer_id, name, active, created_at) VALUES ('mer_2', 'cus_1', 'n', ?, 1)`, true)
		mustExec(`INSERT INTO terminals (terminal_id, customer_id, merchant_id, created_at) VALUES ('10000004', 'cus_1', 'mer_2', 1)`)
		mustExec(`INSERT INTO terminals (terminal_id, customer_id, created_at) VALUES ('10000005', 'cus_1', 1)`)

		tx := `INSERT INTO transactions (id, merchant_id, terminal_id, type, amount, currency, status_id, progress, created_at)
		       VALUES (?, 'mer_1', ?, 'PURCHASE', 100, 'SEK', ?, 'SENT', 1)`
		mustExec(tx, "t1", "10000001", 14)
		if err := exec(tx, "t2", "10000001", 14); err == nil {
			t.Errorf("a second PENDING transaction on one terminal was accepted")
		}
		mustExec(tx, "t3", "10000002", 14) // another terminal
		mustExec(tx, "t4", "10000001", 0)  // a final one beside the pending one
		mustExec(`UPDATE transactions SET status_id = 0 WHERE id = 't1'`)
		mustExec(tx, "t5", "10000001", 14) // pending again once the first ended
		// A transaction's merchant is its terminal ID's: not another
		// merchant's terminal, nor one allocated to no merchant.
		for _, id := range []string{"10000004", "10000005", "99999999"} {
			if err := exec(tx, "t-"+id, id, 0); err == nil {
				t.Errorf("a transaction of mer_1 on terminal ID %s (not mer_1's) was accepted", id)
			}
		}

		if err := exec(`INSERT INTO terminals (terminal_id, customer_id, serial_number, created_at) VALUES ('10000003', 'cus_1', 'S1', 1)`); err == nil {
			t.Errorf("one device linked to two terminal IDs was accepted")
		}

		mustExec(`INSERT INTO packages (id, model, name, version, size_bytes, sha256, released_at) VALUES ('p1', 'countertop', 'fw', '1.0.0', 1, 'x', 1)`)
		up := `INSERT INTO updates (id, terminal_id, package_id, status, created_at, updated_at) VALUES (?, '10000001', 'p1', ?, 1, 1)`
		mustExec(up, "u1", "SCHEDULED")
		if err := exec(up, "u2", "DOWNLOADING"); err == nil {
			t.Errorf("two unfinished updates on one terminal were accepted")
		}
		mustExec(up, "u3", "INSTALLED")
		if err := exec(up, "u4", "LOST"); err == nil {
			t.Errorf("an update status outside the list was accepted")
		}
	})
}

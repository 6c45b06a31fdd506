package sqlstore

import (
	"reflect"
	"testing"
)

func TestOfCustomer(t *testing.T) {
	const base = `SELECT id FROM merchants`
	for _, tc := range []struct {
		customerID, order string
		query             string
		args              []any
	}{
		{"", "created_at, id", base + ` ORDER BY created_at, id`, nil},
		{"cus_1", "created_at, id", base + ` WHERE customer_id = ? ORDER BY created_at, id`, []any{"cus_1"}},
		{"cus_2", "serial_number", base + ` WHERE customer_id = ? ORDER BY serial_number`, []any{"cus_2"}},
	} {
		query, args := ofCustomer(base, tc.customerID, tc.order)
		if query != tc.query || !reflect.DeepEqual(args, tc.args) {
			t.Errorf("ofCustomer(%q, %q) = %q, %v; want %q, %v", tc.customerID, tc.order, query, args, tc.query, tc.args)
		}
	}
}

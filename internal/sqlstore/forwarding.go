package sqlstore

import (
	"database/sql"

	"github.com/instore-dev/instore"
)

// The forwarding of an offline approval (instore.Forwarding, migration
// 0016): forwarding_state (QUEUED, FORWARDED, DECLINED; NULL: not approved
// offline) and forwarded_at. The listing's ?forwarding= filter reads the
// partial index transactions_merchant_forwarding_created (listIndex).

// forwardingArgs are the values of forwarding_state and forwarded_at of t.
func forwardingArgs(t *instore.Transaction) []any {
	f := t.Forwarding
	if f == nil {
		return []any{sql.NullString{}, sql.NullInt64{}}
	}
	return []any{string(f.State), nullMicros(f.ForwardedAt)}
}

// scanForwarding is the forwarding of a stored row (nil: none).
func scanForwarding(state sql.NullString, at sql.NullInt64) *instore.Forwarding {
	if !state.Valid {
		return nil
	}
	return &instore.Forwarding{State: instore.ForwardingState(state.String), ForwardedAt: fromNullMicros(at)}
}

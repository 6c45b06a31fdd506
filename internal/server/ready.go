package server

import (
	"context"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// primaryChecker is a store that tells whether it reaches a primary it can
// write to (sqlstore.DB: PostgreSQL behind a failover).
type primaryChecker interface {
	Primary(ctx context.Context) error
}

// storeReady is /readyz's check of the store: it answers a query (on
// PostgreSQL: it is a primary). The problem's detail says why not: "database:
// no primary reachable" while a failover runs (no server answers, or only
// a standby), a load balancer and an operator read it there.
func (s *Server) storeReady(ctx context.Context) error {
	var err error
	if pc, ok := s.Store.(primaryChecker); ok {
		err = pc.Primary(ctx)
	} else {
		err = s.Store.Ping(ctx)
	}
	switch {
	case err == nil:
		return nil
	case sqlstore.Unavailable(err):
		return &instore.Error{Code: instore.EUnavailable, Detail: sqlstore.NoPrimary + ".", Err: err}
	default:
		return &instore.Error{Code: instore.EUnavailable, Detail: "The store is not reachable.", Err: err}
	}
}

package service

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// TransactionEvents returns the timeline of one of the merchant's
// transactions, oldest first: what happened to it, when, and who caused
// it. Errors: WP03, WP04.
func (s *Service) TransactionEvents(ctx context.Context, p *instore.Principal, ref string) ([]instore.TransactionEvent, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(ref) {
		return nil, instore.Errorf(instore.WP04, "No transaction with this onlineAPIRefId.")
	}
	t, err := s.ownTransaction(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	es, err := s.Store.TransactionEvents(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("transaction events: %w", err)
	}
	return es, nil
}

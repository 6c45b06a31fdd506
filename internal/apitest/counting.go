package apitest

import (
	"context"
	"sync/atomic"

	"github.com/instore-dev/instore"
)

// CountingStore wraps a store and counts the reads tests watch:
// AuthReads, those authentication makes (API clients, subscription keys,
// merchants), what a request's credentials cost the store, for the tests
// of the credentials cache and the rate limit taken before authentication;
// OpenUpdateReads, those of a terminal's open update, for the test that
// the end of a transaction looks for an update only when one waits.
type CountingStore struct {
	instore.Store
	AuthReads       atomic.Int64
	OpenUpdateReads atomic.Int64
}

func (s *CountingStore) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	s.AuthReads.Add(1)
	return s.Store.APIClient(ctx, id)
}

func (s *CountingStore) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	s.AuthReads.Add(1)
	return s.Store.SubscriptionKeyByHash(ctx, hash)
}

func (s *CountingStore) Merchant(ctx context.Context, id string) (*instore.Merchant, error) {
	s.AuthReads.Add(1)
	return s.Store.Merchant(ctx, id)
}

func (s *CountingStore) OpenUpdate(ctx context.Context, terminalID string) (*instore.Update, error) {
	s.OpenUpdateReads.Add(1)
	return s.Store.OpenUpdate(ctx, terminalID)
}

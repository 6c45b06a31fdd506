package apitest

import (
	"context"
	"sync/atomic"

	"github.com/instore-dev/instore"
)

// AuthReads wraps a store and counts the reads authentication makes (API
// clients, subscription keys, merchants): what a request's credentials
// cost the store, for the tests of the credentials cache and the rate
// limit taken before authentication.
type AuthReads struct {
	instore.Store
	Reads atomic.Int64
}

func (s *AuthReads) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	s.Reads.Add(1)
	return s.Store.APIClient(ctx, id)
}

func (s *AuthReads) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	s.Reads.Add(1)
	return s.Store.SubscriptionKeyByHash(ctx, hash)
}

func (s *AuthReads) Merchant(ctx context.Context, id string) (*instore.Merchant, error) {
	s.Reads.Add(1)
	return s.Store.Merchant(ctx, id)
}

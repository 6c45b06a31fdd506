package apitest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// SQLite opens a new SQLite store in a temporary directory of t with the
// synchronous pragma given ("" for the store's default, FULL), closed when
// the test ends. An error fails t.
func SQLite(t testing.TB, synchronous string) *sqlstore.DB {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "store.db"), sqlstore.Options{Synchronous: synchronous})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Seeder is what NewShop and NewCredentials need of the administration:
// internal/admin's Admin has it.
type Seeder interface {
	CreateCustomer(ctx context.Context, name string) (*instore.Customer, error)
	CreateMerchant(ctx context.Context, customerID, name string, active bool) (*instore.Merchant, error)
	CreateClient(ctx context.Context, surface instore.Surface, ownerID, name string) (*instore.APIClient, string, error)
	CreateKey(ctx context.Context, surface instore.Surface, ownerID string) (*instore.SubscriptionKey, string, error)
}

// Credentials are what an integrator is given for one API surface: an API
// client with its secret and a subscription key, of the same owner.
type Credentials struct {
	Client *instore.APIClient
	Secret string // the client's secret, shown once
	KeyRec *instore.SubscriptionKey
	Key    string // the subscription key, shown once
}

// NewCredentials creates with ad an API client named name ("" for the
// default name) and a subscription key of surface for ownerID: a merchant
// for the Online API, a customer for the Access API. An error fails t.
func NewCredentials(t testing.TB, ad Seeder, surface instore.Surface, ownerID, name string) Credentials {
	t.Helper()
	ctx := context.Background()
	var c Credentials
	var err error
	if c.Client, c.Secret, err = ad.CreateClient(ctx, surface, ownerID, name); err != nil {
		t.Fatal(err)
	}
	if c.KeyRec, c.Key, err = ad.CreateKey(ctx, surface, ownerID); err != nil {
		t.Fatal(err)
	}
	return c
}

// Shop is a customer with an active merchant and the merchant's Online API
// credentials: what `instore admin` sets up for a shop's ECR.
type Shop struct {
	Customer *instore.Customer
	Merchant *instore.Merchant
	Online   Credentials
}

// NewShop creates with ad the customer named customer, its active merchant
// named merchant, and the merchant's Online API credentials, the client
// named client ("" for the default name). An error fails t.
func NewShop(t testing.TB, ad Seeder, customer, merchant, client string) Shop {
	t.Helper()
	ctx := context.Background()
	var s Shop
	var err error
	if s.Customer, err = ad.CreateCustomer(ctx, customer); err != nil {
		t.Fatal(err)
	}
	if s.Merchant, err = ad.CreateMerchant(ctx, s.Customer.ID, merchant, true); err != nil {
		t.Fatal(err)
	}
	s.Online = NewCredentials(t, ad, instore.SurfaceOnline, s.Merchant.ID, client)
	return s
}

package apitest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
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

// Credentials are what an integrator is given for one API surface
// (admin.Credentials).
type Credentials = admin.Credentials

// NewCredentials creates with ad an API client named name ("" for the
// default name) and a subscription key of surface for ownerID: a merchant
// for the Online API, a customer for the Access API. An error fails t.
func NewCredentials(t testing.TB, ad *admin.Admin, surface instore.Surface, ownerID, name string) Credentials {
	t.Helper()
	c, err := ad.CreateCredentials(context.Background(), surface, ownerID, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Shop is a customer with an active merchant and the merchant's Online API
// credentials (admin.Shop).
type Shop = admin.Shop

// NewShop creates with ad the customer named customer, its active merchant
// named merchant, and the merchant's Online API credentials, the client
// named client ("" for the default name). An error fails t.
func NewShop(t testing.TB, ad *admin.Admin, customer, merchant, client string) Shop {
	t.Helper()
	s, err := ad.CreateShop(context.Background(), customer, merchant, client)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

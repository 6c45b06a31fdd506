package admin

import (
	"context"

	"github.com/instore-dev/instore"
)

// Credentials are what an integrator is given for one API surface: an API
// client with its secret and a subscription key, of the same owner.
type Credentials struct {
	Client *instore.APIClient
	Secret string // the client's secret, shown once
	KeyRec *instore.SubscriptionKey
	Key    string // the subscription key, shown once
}

// CreateCredentials creates an API client named name ("" for the default
// name) and a subscription key of surface for ownerID: a merchant for the
// Online API, a customer for the Access API.
func (a *Admin) CreateCredentials(ctx context.Context, surface instore.Surface, ownerID, name string) (Credentials, error) {
	var c Credentials
	var err error
	if c.Client, c.Secret, err = a.CreateClient(ctx, surface, ownerID, name); err != nil {
		return Credentials{}, err
	}
	if c.KeyRec, c.Key, err = a.CreateKey(ctx, surface, ownerID); err != nil {
		return Credentials{}, err
	}
	return c, nil
}

// Shop is a customer with an active merchant and the merchant's Online API
// credentials: what `instore admin` sets up for a shop's ECR.
type Shop struct {
	Customer *instore.Customer
	Merchant *instore.Merchant
	Online   Credentials
}

// CreateShop creates the customer named customer, its active merchant
// named merchant, and the merchant's Online API credentials, the client
// named client ("" for the default name).
func (a *Admin) CreateShop(ctx context.Context, customer, merchant, client string) (Shop, error) {
	var s Shop
	var err error
	if s.Customer, err = a.CreateCustomer(ctx, customer); err != nil {
		return Shop{}, err
	}
	if s.Merchant, err = a.CreateMerchant(ctx, s.Customer.ID, merchant, true); err != nil {
		return Shop{}, err
	}
	if s.Online, err = a.CreateCredentials(ctx, instore.SurfaceOnline, s.Merchant.ID, client); err != nil {
		return Shop{}, err
	}
	return s, nil
}

// Package admin holds the operator's operations on accounts and
// credentials, used by `instore admin` and the demo. Secrets are returned
// once, at creation, and stored only as digests.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/ids"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/wallclock"
)

// Admin runs operator operations on a store.
type Admin struct {
	Store instore.Store
	// Clock is the time of day of what the admin stamps (nil: the wall
	// clock, wallclock.Clock).
	Clock instore.Clock
}

// New returns an Admin on st, on the wall clock.
func New(st instore.Store) *Admin { return &Admin{Store: st} }

// now is the admin's time of day as it stamps it: UTC, to the
// microsecond.
func (a *Admin) now() time.Time {
	c := a.Clock
	if c == nil {
		c = wallclock.Clock{}
	}
	return c.Now().UTC().Truncate(time.Microsecond)
}

func checkName(name string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > 200 || !utf8.ValidString(name) {
		return fmt.Errorf("name must be 1-200 characters")
	}
	return nil
}

// CreateCustomer creates a customer.
func (a *Admin) CreateCustomer(ctx context.Context, name string) (*instore.Customer, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	c := &instore.Customer{ID: ids.New(ids.Customer), Name: name, CreatedAt: a.now()}
	if err := a.Store.CreateCustomer(ctx, c); err != nil {
		return nil, fmt.Errorf("create customer: %w", err)
	}
	return c, nil
}

// CreateMerchant creates a merchant of a customer.
func (a *Admin) CreateMerchant(ctx context.Context, customerID, name string, active bool) (*instore.Merchant, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if _, err := a.Store.Customer(ctx, customerID); err != nil {
		return nil, fmt.Errorf("customer: %w", err)
	}
	m := &instore.Merchant{ID: ids.New(ids.Merchant), CustomerID: customerID, Name: name, Active: active, CreatedAt: a.now()}
	if err := a.Store.CreateMerchant(ctx, m); err != nil {
		return nil, fmt.Errorf("create merchant: %w", err)
	}
	return m, nil
}

// owner resolves the account that credentials of a surface belong to: a
// merchant for the Online API, a customer for the Access API.
func (a *Admin) owner(ctx context.Context, surface instore.Surface, ownerID string) (customerID, merchantID string, err error) {
	switch surface {
	case instore.SurfaceOnline:
		m, err := a.Store.Merchant(ctx, ownerID)
		if err != nil {
			return "", "", fmt.Errorf("merchant: %w", err)
		}
		return m.CustomerID, m.ID, nil
	case instore.SurfaceAccess:
		c, err := a.Store.Customer(ctx, ownerID)
		if err != nil {
			return "", "", fmt.Errorf("customer: %w", err)
		}
		return c.ID, "", nil
	}
	return "", "", fmt.Errorf("surface must be %q or %q", instore.SurfaceOnline, instore.SurfaceAccess)
}

// CreateClient creates an API client of a surface for its owner (merchant
// id for online, customer id for access) and returns its secret, once.
func (a *Admin) CreateClient(ctx context.Context, surface instore.Surface, ownerID, name string) (*instore.APIClient, string, error) {
	cus, mer, err := a.owner(ctx, surface, ownerID)
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		name = string(surface) + " client"
	}
	if err := checkName(name); err != nil {
		return nil, "", err
	}
	secret, digest := auth.NewSecret(auth.ClientSecretPrefix)
	c := &instore.APIClient{
		ID: ids.New(ids.Client), Surface: surface, CustomerID: cus, MerchantID: mer,
		Name: name, SecretHash: digest, CreatedAt: a.now(),
	}
	if err := a.Store.CreateAPIClient(ctx, c); err != nil {
		return nil, "", fmt.Errorf("create client: %w", err)
	}
	return c, secret, nil
}

// CreateKey creates a subscription key of a surface for its owner and
// returns the key, once.
func (a *Admin) CreateKey(ctx context.Context, surface instore.Surface, ownerID string) (*instore.SubscriptionKey, string, error) {
	cus, mer, err := a.owner(ctx, surface, ownerID)
	if err != nil {
		return nil, "", err
	}
	secret, digest := auth.NewSecret(auth.SubscriptionKeyPrefix)
	k := &instore.SubscriptionKey{
		ID: ids.New(ids.SubscriptionKey), Surface: surface, CustomerID: cus, MerchantID: mer,
		Prefix: secret[:len(auth.SubscriptionKeyPrefix)+4], Hash: digest, CreatedAt: a.now(),
	}
	if err := a.Store.CreateSubscriptionKey(ctx, k); err != nil {
		return nil, "", fmt.Errorf("create key: %w", err)
	}
	return k, secret, nil
}

// SetMerchantActive activates or deactivates a merchant.
func (a *Admin) SetMerchantActive(ctx context.Context, id string, active bool) error {
	return a.Store.SetMerchantActive(ctx, id, active)
}

// RevokeClient revokes an API client: its tokens stop working.
func (a *Admin) RevokeClient(ctx context.Context, id string) error {
	return a.Store.RevokeAPIClient(ctx, id, a.now())
}

// RevokeKey revokes a subscription key.
func (a *Admin) RevokeKey(ctx context.Context, id string) error {
	return a.Store.RevokeSubscriptionKey(ctx, id, a.now())
}

// CreateDevice provisions a terminal device and returns its secret, once.
// customerID may be empty: the device then belongs to the customer of the
// first terminal ID it is linked to.
func (a *Admin) CreateDevice(ctx context.Context, serial, model, customerID string) (*instore.Device, string, error) {
	if !instore.ValidSerialNumber(serial) {
		return nil, "", fmt.Errorf("serial number must be 1-64 of A-Z a-z 0-9 . _ -")
	}
	if !instore.ValidModel(model) {
		return nil, "", fmt.Errorf("model must be one of %s", strings.Join(instore.Models, ", "))
	}
	if customerID != "" {
		if _, err := a.Store.Customer(ctx, customerID); err != nil {
			return nil, "", fmt.Errorf("customer: %w", err)
		}
	}
	secret, digest := auth.NewSecret(auth.DeviceSecretPrefix)
	d := &instore.Device{SerialNumber: serial, Model: model, CustomerID: customerID, SecretHash: digest, CreatedAt: a.now()}
	if err := a.Store.CreateDevice(ctx, d); err != nil {
		return nil, "", fmt.Errorf("create device: %w", err)
	}
	return d, secret, nil
}

// AllocateTerminals allocates n terminal IDs to a merchant (at most 1000 at
// a time) with the domain operation behind the Access API's
// POST /getTerminalId, acting for the merchant's customer.
func (a *Admin) AllocateTerminals(ctx context.Context, merchantID string, n int) ([]*instore.Terminal, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("count must be 1-1000")
	}
	m, err := a.Store.Merchant(ctx, merchantID)
	if err != nil {
		return nil, fmt.Errorf("merchant: %w", err)
	}
	svc := a.service()
	p := &instore.Principal{Surface: instore.SurfaceAccess, CustomerID: m.CustomerID}
	out := make([]*instore.Terminal, 0, n)
	for range n {
		t, err := svc.AllocateTerminal(ctx, p, &instore.TerminalIDRequest{CustomerID: m.CustomerID, MerchantID: m.ID})
		if err != nil {
			return out, fmt.Errorf("allocate terminal ID: %w", err)
		}
		out = append(out, t.Terminal)
	}
	return out, nil
}

// service is the domain service on the admin's store and clock, without a
// gateway: the operator's commands reach no terminal session.
func (a *Admin) service() *service.Service {
	return &service.Service{Store: a.Store, Clock: a.Clock, Gateway: instore.NoGateway{}}
}

// ImportResult says what a catalogue import did.
type ImportResult struct {
	// Read is how many packages the file holds; Added how many were new
	// (the others were imported before, unchanged).
	Read  int `json:"read"`
	Added int `json:"added"`
}

// ImportPackages loads a package catalogue (docs/access-api.md describes
// the file): every package is checked first, then all are stored in one
// transaction, or none. Packages imported before are skipped when
// unchanged and refused when changed (packages are immutable).
func (a *Admin) ImportPackages(ctx context.Context, r io.Reader) (*ImportResult, error) {
	ps, err := instore.ParseCatalogue(r)
	if err != nil {
		return nil, err
	}
	for i, p := range ps {
		if p.CustomerID == "" {
			continue
		}
		if _, err := a.Store.Customer(ctx, p.CustomerID); err != nil {
			return nil, fmt.Errorf("/packages/%d/customerId: customer: %w", i, err)
		}
	}
	added, err := a.Store.ImportPackages(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("import packages: %w", err)
	}
	return &ImportResult{Read: len(ps), Added: added}, nil
}

// ErrNothingToFingerprint is Fingerprint's answer to an empty value.
var ErrNothingToFingerprint = errors.New("nothing to fingerprint: give a terminal ID, a merchant id or another identifier")

// Fingerprint returns the fingerprint ("fp:" and 10 hex digits) that the
// service's log lines show in place of value (a terminal ID, a merchant
// id, a serial number), under the configured key if there is one
// (--log-fingerprint-key) and otherwise the key `instore serve` keeps in
// the store: grep the logs for it to find that terminal's or merchant's
// lines.
func (a *Admin) Fingerprint(ctx context.Context, value string, configured []byte) (string, error) {
	if value == "" {
		return "", ErrNothingToFingerprint
	}
	key := configured
	if len(key) == 0 {
		var err error
		if key, err = logging.LoadFingerprintKey(ctx, a.Store, nil); err != nil {
			return "", err
		}
	}
	return logging.Fingerprint(key, value), nil
}

package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// CreateAPIClient stores a new OAuth client; a taken id or a missing
// customer or merchant is instore.ErrConflict.
func (db *DB) CreateAPIClient(ctx context.Context, ac *instore.APIClient) error {
	return db.create(ctx, "create api client", func(c conn) error {
		return apiClientRow(ac).insert(ctx, c, "api_clients", apiClientColumns)
	})
}

// APIClient returns the OAuth client with id, revoked or not.
func (db *DB) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	return getOne(ctx, db.read(), scanAPIClient, "api client", `SELECT `+apiClientColumns+` FROM api_clients WHERE id = ?`, id)
}

// APIClients lists the OAuth clients of a customer (both surfaces), or all
// when customerID is empty, oldest first.
func (db *DB) APIClients(ctx context.Context, customerID string) ([]*instore.APIClient, error) {
	query, args := ofCustomer(`SELECT `+apiClientColumns+` FROM api_clients`, customerID, `created_at, id`)
	return getAll(ctx, db.read(), scanAPIClient, "list api clients", query, args...)
}

// RevokeAPIClient marks a client revoked at t; revoking it again keeps the
// first time.
func (db *DB) RevokeAPIClient(ctx context.Context, id string, t time.Time) error {
	return db.update(ctx, func(c conn) error {
		return revoke(ctx, c, "api_clients", "api client", id, t)
	})
}

// CreateSubscriptionKey stores a new subscription key; a taken id or key
// hash, or a missing customer or merchant, is instore.ErrConflict.
func (db *DB) CreateSubscriptionKey(ctx context.Context, k *instore.SubscriptionKey) error {
	return db.create(ctx, "create subscription key", func(c conn) error {
		return subscriptionKeyRow(k).insert(ctx, c, "subscription_keys", subscriptionKeyColumns)
	})
}

// SubscriptionKeyByHash finds a key, revoked or not, by the SHA-256 digest of
// its value.
func (db *DB) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	return getOne(ctx, db.read(), scanSubscriptionKey, "subscription key",
		`SELECT `+subscriptionKeyColumns+` FROM subscription_keys WHERE key_hash = ?`, hash)
}

// SubscriptionKeys lists the keys of a customer (both surfaces), or all when
// customerID is empty, oldest first.
func (db *DB) SubscriptionKeys(ctx context.Context, customerID string) ([]*instore.SubscriptionKey, error) {
	query, args := ofCustomer(`SELECT `+subscriptionKeyColumns+` FROM subscription_keys`, customerID, `created_at, id`)
	return getAll(ctx, db.read(), scanSubscriptionKey, "list subscription keys", query, args...)
}

// RevokeSubscriptionKey marks a key revoked at t; revoking it again keeps the
// first time.
func (db *DB) RevokeSubscriptionKey(ctx context.Context, id string, t time.Time) error {
	return db.update(ctx, func(c conn) error {
		return revoke(ctx, c, "subscription_keys", "subscription key", id, t)
	})
}

// revoke sets revoked_at of row id in table unless it is already set. table
// is one of the package's constants, never input.
func revoke(ctx context.Context, c conn, table, what, id string, t time.Time) error {
	res, err := c.exec(ctx, `UPDATE `+table+` SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, micros(t), id)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", what, err)
	}
	return mustAffect(res, what)
}

// The columns of api_clients and subscription_keys, which differ only in
// the fifth and sixth: a client's name and secret hash, a key's prefix and
// key hash.
const (
	apiClientColumns       = `id, surface, customer_id, merchant_id, name, secret_hash, created_at, revoked_at`
	subscriptionKeyColumns = `id, surface, customer_id, merchant_id, prefix, key_hash, created_at, revoked_at`
)

// credential is a row of api_clients or subscription_keys, its fields
// pointing into the instore.APIClient or instore.SubscriptionKey it is
// written from or scanned into.
type credential struct {
	id                           *string
	surface                      *instore.Surface
	customerID, merchantID, name *string
	secret                       *[]byte
	created                      *time.Time
	revoked                      **time.Time
}

func apiClientRow(ac *instore.APIClient) credential {
	return credential{&ac.ID, &ac.Surface, &ac.CustomerID, &ac.MerchantID, &ac.Name, &ac.SecretHash, &ac.CreatedAt, &ac.RevokedAt}
}

func subscriptionKeyRow(k *instore.SubscriptionKey) credential {
	return credential{&k.ID, &k.Surface, &k.CustomerID, &k.MerchantID, &k.Prefix, &k.Hash, &k.CreatedAt, &k.RevokedAt}
}

// insert stores r in table, whose columns are columns; both are the
// package's constants, never input.
func (r credential) insert(ctx context.Context, c conn, table, columns string) error {
	_, err := c.exec(ctx, `INSERT INTO `+table+` (`+columns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		*r.id, string(*r.surface), *r.customerID, nullString(*r.merchantID), *r.name, *r.secret,
		micros(*r.created), nullMicros(*r.revoked))
	return err
}

// scan reads a row of the credential columns into r.
func (r credential) scan(s scanner) error {
	return s.Scan(r.id, intoString(r.surface), r.customerID, intoString(r.merchantID), r.name, r.secret,
		intoTime(r.created), intoNullTime(r.revoked))
}

// scanCredential returns the scan function of rows of T, into which row
// points a credential.
func scanCredential[T any](row func(*T) credential) func(scanner) (*T, error) {
	return func(s scanner) (*T, error) {
		var v T
		if err := row(&v).scan(s); err != nil {
			return nil, err
		}
		return &v, nil
	}
}

var (
	scanAPIClient       = scanCredential(apiClientRow)
	scanSubscriptionKey = scanCredential(subscriptionKeyRow)
)

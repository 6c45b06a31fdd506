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
	return apiClients.create(ctx, db, ac)
}

// APIClient returns the OAuth client with id, revoked or not.
func (db *DB) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	return apiClients.get(ctx, db, "id", id)
}

// APIClients lists the OAuth clients of a customer (both surfaces), or all
// when customerID is empty, oldest first.
func (db *DB) APIClients(ctx context.Context, customerID string) ([]*instore.APIClient, error) {
	return apiClients.list(ctx, db, customerID)
}

// RevokeAPIClient marks a client revoked at t; revoking it again keeps the
// first time.
func (db *DB) RevokeAPIClient(ctx context.Context, id string, t time.Time) error {
	return apiClients.revoke(ctx, db, id, t)
}

// CreateSubscriptionKey stores a new subscription key; a taken id or key
// hash, or a missing customer or merchant, is instore.ErrConflict.
func (db *DB) CreateSubscriptionKey(ctx context.Context, k *instore.SubscriptionKey) error {
	return subscriptionKeys.create(ctx, db, k)
}

// SubscriptionKeyByHash finds a key, revoked or not, by the SHA-256 digest of
// its value.
func (db *DB) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	return subscriptionKeys.get(ctx, db, "key_hash", hash)
}

// SubscriptionKeys lists the keys of a customer (both surfaces), or all when
// customerID is empty, oldest first.
func (db *DB) SubscriptionKeys(ctx context.Context, customerID string) ([]*instore.SubscriptionKey, error) {
	return subscriptionKeys.list(ctx, db, customerID)
}

// RevokeSubscriptionKey marks a key revoked at t; revoking it again keeps the
// first time.
func (db *DB) RevokeSubscriptionKey(ctx context.Context, id string, t time.Time) error {
	return subscriptionKeys.revoke(ctx, db, id, t)
}

// credentialTable is a table of credentials, api_clients or
// subscription_keys, and what is written and read the same for both: its
// columns, what messages call a row, and the credential a T's row is.
type credentialTable[T any] struct {
	table, columns, what string
	row                  func(*T) credential
}

var (
	apiClients       = credentialTable[instore.APIClient]{"api_clients", apiClientColumns, "api client", apiClientRow}
	subscriptionKeys = credentialTable[instore.SubscriptionKey]{"subscription_keys", subscriptionKeyColumns, "subscription key", subscriptionKeyRow}
)

// create stores v; a taken unique column or a missing customer or
// merchant is instore.ErrConflict.
func (k credentialTable[T]) create(ctx context.Context, db *DB, v *T) error {
	return db.create(ctx, "create "+k.what, func(c conn) error {
		return k.row(v).insert(ctx, c, k.table, k.columns)
	})
}

// get returns the credential whose column (one of the package's
// constants, never input) is value, revoked or not.
func (k credentialTable[T]) get(ctx context.Context, db *DB, column string, value any) (*T, error) {
	return getOne(ctx, db.read(), k.scan, k.what, `SELECT `+k.columns+` FROM `+k.table+` WHERE `+column+` = ?`, value)
}

// list returns the credentials of a customer, or all when customerID is
// empty, oldest first.
func (k credentialTable[T]) list(ctx context.Context, db *DB, customerID string) ([]*T, error) {
	query, args := ofCustomer(`SELECT `+k.columns+` FROM `+k.table, customerID, `created_at, id`)
	return getAll(ctx, db.read(), k.scan, "list "+k.what+"s", query, args...)
}

// revoke marks credential id revoked at t; revoking it again keeps the
// first time.
func (k credentialTable[T]) revoke(ctx context.Context, db *DB, id string, t time.Time) error {
	return db.update(ctx, func(c conn) error {
		return revoke(ctx, c, k.table, k.what, id, t)
	})
}

// scan reads a row of the table's columns into a new T.
func (k credentialTable[T]) scan(s scanner) (*T, error) {
	var v T
	if err := k.row(&v).scan(s); err != nil {
		return nil, err
	}
	return &v, nil
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

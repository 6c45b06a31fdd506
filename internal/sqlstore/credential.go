package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// CreateAPIClient stores a new OAuth client; a taken id or a missing
// customer or merchant is instore.ErrConflict.
func (db *DB) CreateAPIClient(ctx context.Context, ac *instore.APIClient) error {
	return db.create(ctx, "create api client", func(c conn) error { return insertAPIClient(ctx, c, ac) })
}

// APIClient returns the OAuth client with id, revoked or not.
func (db *DB) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	return findAPIClient(ctx, db.read(), id)
}

// APIClients lists the OAuth clients of a customer (both surfaces), or all
// when customerID is empty, oldest first.
func (db *DB) APIClients(ctx context.Context, customerID string) ([]*instore.APIClient, error) {
	return listAPIClients(ctx, db.read(), customerID)
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
	return db.create(ctx, "create subscription key", func(c conn) error { return insertSubscriptionKey(ctx, c, k) })
}

// SubscriptionKeyByHash finds a key, revoked or not, by the SHA-256 digest of
// its value.
func (db *DB) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	return findSubscriptionKeyByHash(ctx, db.read(), hash)
}

// SubscriptionKeys lists the keys of a customer (both surfaces), or all when
// customerID is empty, oldest first.
func (db *DB) SubscriptionKeys(ctx context.Context, customerID string) ([]*instore.SubscriptionKey, error) {
	return listSubscriptionKeys(ctx, db.read(), customerID)
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

func insertAPIClient(ctx context.Context, c conn, ac *instore.APIClient) error {
	_, err := c.exec(ctx, `INSERT INTO api_clients
		(id, surface, customer_id, merchant_id, name, secret_hash, created_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		ac.ID, string(ac.Surface), ac.CustomerID, nullString(ac.MerchantID), ac.Name, ac.SecretHash,
		micros(ac.CreatedAt), nullMicros(ac.RevokedAt))
	return err
}

const apiClientColumns = `id, surface, customer_id, merchant_id, name, secret_hash, created_at, revoked_at`

func scanAPIClient(s scanner) (*instore.APIClient, error) {
	var (
		ac       instore.APIClient
		surface  string
		merchant sql.NullString
		created  int64
		revoked  sql.NullInt64
	)
	if err := s.Scan(&ac.ID, &surface, &ac.CustomerID, &merchant, &ac.Name, &ac.SecretHash, &created, &revoked); err != nil {
		return nil, err
	}
	ac.Surface = instore.Surface(surface)
	ac.MerchantID = merchant.String
	ac.CreatedAt = fromMicros(created)
	ac.RevokedAt = fromNullMicros(revoked)
	return &ac, nil
}

func findAPIClient(ctx context.Context, c conn, id string) (*instore.APIClient, error) {
	return getOne(ctx, c, scanAPIClient, "api client", `SELECT `+apiClientColumns+` FROM api_clients WHERE id = ?`, id)
}

func listAPIClients(ctx context.Context, c conn, customerID string) ([]*instore.APIClient, error) {
	query, args := ofCustomer(`SELECT `+apiClientColumns+` FROM api_clients`, customerID, `created_at, id`)
	return getAll(ctx, c, scanAPIClient, "list api clients", query, args...)
}

func insertSubscriptionKey(ctx context.Context, c conn, k *instore.SubscriptionKey) error {
	_, err := c.exec(ctx, `INSERT INTO subscription_keys
		(id, surface, customer_id, merchant_id, prefix, key_hash, created_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, string(k.Surface), k.CustomerID, nullString(k.MerchantID), k.Prefix, k.Hash,
		micros(k.CreatedAt), nullMicros(k.RevokedAt))
	return err
}

const subscriptionKeyColumns = `id, surface, customer_id, merchant_id, prefix, key_hash, created_at, revoked_at`

func scanSubscriptionKey(s scanner) (*instore.SubscriptionKey, error) {
	var (
		k        instore.SubscriptionKey
		surface  string
		merchant sql.NullString
		created  int64
		revoked  sql.NullInt64
	)
	if err := s.Scan(&k.ID, &surface, &k.CustomerID, &merchant, &k.Prefix, &k.Hash, &created, &revoked); err != nil {
		return nil, err
	}
	k.Surface = instore.Surface(surface)
	k.MerchantID = merchant.String
	k.CreatedAt = fromMicros(created)
	k.RevokedAt = fromNullMicros(revoked)
	return &k, nil
}

func findSubscriptionKeyByHash(ctx context.Context, c conn, hash []byte) (*instore.SubscriptionKey, error) {
	return getOne(ctx, c, scanSubscriptionKey, "subscription key",
		`SELECT `+subscriptionKeyColumns+` FROM subscription_keys WHERE key_hash = ?`, hash)
}

func listSubscriptionKeys(ctx context.Context, c conn, customerID string) ([]*instore.SubscriptionKey, error) {
	query, args := ofCustomer(`SELECT `+subscriptionKeyColumns+` FROM subscription_keys`, customerID, `created_at, id`)
	return getAll(ctx, c, scanSubscriptionKey, "list subscription keys", query, args...)
}

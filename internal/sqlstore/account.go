package sqlstore

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// CreateCustomer stores a new customer; a taken id is instore.ErrConflict.
func (db *DB) CreateCustomer(ctx context.Context, cust *instore.Customer) error {
	return db.create(ctx, "create customer", func(c conn) error {
		_, err := c.exec(ctx, `INSERT INTO customers (`+customerColumns+`) VALUES (?, ?, ?)`,
			cust.ID, cust.Name, micros(cust.CreatedAt))
		return err
	})
}

// Customer returns the customer with id.
func (db *DB) Customer(ctx context.Context, id string) (*instore.Customer, error) {
	return getOne(ctx, db.read(), scanCustomer, "customer", `SELECT `+customerColumns+` FROM customers WHERE id = ?`, id)
}

// Customers lists every customer, oldest first.
func (db *DB) Customers(ctx context.Context) ([]*instore.Customer, error) {
	return getAll(ctx, db.read(), scanCustomer, "list customers",
		`SELECT `+customerColumns+` FROM customers ORDER BY created_at, id`)
}

// CreateMerchant stores a new merchant; a taken id or a missing customer is
// instore.ErrConflict.
func (db *DB) CreateMerchant(ctx context.Context, m *instore.Merchant) error {
	return db.create(ctx, "create merchant", func(c conn) error {
		_, err := c.exec(ctx, `INSERT INTO merchants (`+merchantColumns+`) VALUES (?, ?, ?, ?, ?)`,
			m.ID, m.CustomerID, m.Name, m.Active, micros(m.CreatedAt))
		return err
	})
}

// Merchant returns the merchant with id.
func (db *DB) Merchant(ctx context.Context, id string) (*instore.Merchant, error) {
	return getOne(ctx, db.read(), scanMerchant, "merchant", `SELECT `+merchantColumns+` FROM merchants WHERE id = ?`, id)
}

// Merchants lists the merchants of a customer, or all when customerID is
// empty, oldest first.
func (db *DB) Merchants(ctx context.Context, customerID string) ([]*instore.Merchant, error) {
	query, args := ofCustomer(`SELECT `+merchantColumns+` FROM merchants`, customerID, `created_at, id`)
	return getAll(ctx, db.read(), scanMerchant, "list merchants", query, args...)
}

// SetMerchantActive activates or deactivates a merchant.
func (db *DB) SetMerchantActive(ctx context.Context, id string, active bool) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE merchants SET active = ? WHERE id = ?`, active, id)
		if err != nil {
			return fmt.Errorf("set merchant active: %w", err)
		}
		return mustAffect(res, "merchant")
	})
}

const customerColumns = `id, name, created_at`

func scanCustomer(s scanner) (*instore.Customer, error) {
	var (
		cust    instore.Customer
		created int64
	)
	if err := s.Scan(&cust.ID, &cust.Name, &created); err != nil {
		return nil, err
	}
	cust.CreatedAt = fromMicros(created)
	return &cust, nil
}

const merchantColumns = `id, customer_id, name, active, created_at`

func scanMerchant(s scanner) (*instore.Merchant, error) {
	var (
		m       instore.Merchant
		created int64
	)
	if err := s.Scan(&m.ID, &m.CustomerID, &m.Name, &m.Active, &created); err != nil {
		return nil, err
	}
	m.CreatedAt = fromMicros(created)
	return &m, nil
}

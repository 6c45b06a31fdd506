package sqlstore

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// CreateCustomer stores a new customer; a taken id is instore.ErrConflict.
func (db *DB) CreateCustomer(ctx context.Context, cust *instore.Customer) error {
	return db.create(ctx, "create customer", func(c conn) error { return insertCustomer(ctx, c, cust) })
}

// Customer returns the customer with id.
func (db *DB) Customer(ctx context.Context, id string) (*instore.Customer, error) {
	return findCustomer(ctx, db.read(), id)
}

// Customers lists every customer, oldest first.
func (db *DB) Customers(ctx context.Context) ([]*instore.Customer, error) {
	return listCustomers(ctx, db.read())
}

// CreateMerchant stores a new merchant; a taken id or a missing customer is
// instore.ErrConflict.
func (db *DB) CreateMerchant(ctx context.Context, m *instore.Merchant) error {
	return db.create(ctx, "create merchant", func(c conn) error { return insertMerchant(ctx, c, m) })
}

// Merchant returns the merchant with id.
func (db *DB) Merchant(ctx context.Context, id string) (*instore.Merchant, error) {
	return findMerchant(ctx, db.read(), id)
}

// Merchants lists the merchants of a customer, or all when customerID is
// empty, oldest first.
func (db *DB) Merchants(ctx context.Context, customerID string) ([]*instore.Merchant, error) {
	return listMerchants(ctx, db.read(), customerID)
}

// SetMerchantActive activates or deactivates a merchant.
func (db *DB) SetMerchantActive(ctx context.Context, id string, active bool) error {
	return db.update(ctx, func(c conn) error {
		return setMerchantActive(ctx, c, id, active)
	})
}

func insertCustomer(ctx context.Context, c conn, cust *instore.Customer) error {
	_, err := c.exec(ctx, `INSERT INTO customers (id, name, created_at) VALUES (?, ?, ?)`,
		cust.ID, cust.Name, micros(cust.CreatedAt))
	return err
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

func findCustomer(ctx context.Context, c conn, id string) (*instore.Customer, error) {
	return getOne(ctx, c, scanCustomer, "customer", `SELECT `+customerColumns+` FROM customers WHERE id = ?`, id)
}

func listCustomers(ctx context.Context, c conn) ([]*instore.Customer, error) {
	return getAll(ctx, c, scanCustomer, "list customers",
		`SELECT `+customerColumns+` FROM customers ORDER BY created_at, id`)
}

func insertMerchant(ctx context.Context, c conn, m *instore.Merchant) error {
	_, err := c.exec(ctx, `INSERT INTO merchants (id, customer_id, name, active, created_at) VALUES (?, ?, ?, ?, ?)`,
		m.ID, m.CustomerID, m.Name, m.Active, micros(m.CreatedAt))
	return err
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

func findMerchant(ctx context.Context, c conn, id string) (*instore.Merchant, error) {
	return getOne(ctx, c, scanMerchant, "merchant", `SELECT `+merchantColumns+` FROM merchants WHERE id = ?`, id)
}

func listMerchants(ctx context.Context, c conn, customerID string) ([]*instore.Merchant, error) {
	query, args := ofCustomer(`SELECT `+merchantColumns+` FROM merchants`, customerID, `created_at, id`)
	return getAll(ctx, c, scanMerchant, "list merchants", query, args...)
}

func setMerchantActive(ctx context.Context, c conn, id string, active bool) error {
	res, err := c.exec(ctx, `UPDATE merchants SET active = ? WHERE id = ?`, active, id)
	if err != nil {
		return fmt.Errorf("set merchant active: %w", err)
	}
	return mustAffect(res, "merchant")
}

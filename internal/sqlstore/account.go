package sqlstore

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// CreateCustomer stores a new customer; a taken id is instore.ErrConflict.
func (db *DB) CreateCustomer(ctx context.Context, cust *instore.Customer) error {
	return db.update(ctx, func(c conn) error {
		if err := insertCustomer(ctx, c, cust); err != nil {
			return db.conflictErr("create customer", err)
		}
		return nil
	})
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
	return db.update(ctx, func(c conn) error {
		if err := insertMerchant(ctx, c, m); err != nil {
			return db.conflictErr("create merchant", err)
		}
		return nil
	})
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
	cust, err := scanCustomer(c.queryRow(ctx, `SELECT `+customerColumns+` FROM customers WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "customer")
	}
	return cust, nil
}

func listCustomers(ctx context.Context, c conn) ([]*instore.Customer, error) {
	rows, err := c.query(ctx, `SELECT `+customerColumns+` FROM customers ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list customers: %w", err)
	}
	return collect(rows, scanCustomer, "list customers")
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
	m, err := scanMerchant(c.queryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "merchant")
	}
	return m, nil
}

func listMerchants(ctx context.Context, c conn, customerID string) ([]*instore.Merchant, error) {
	query, args := `SELECT `+merchantColumns+` FROM merchants`, []any(nil)
	if customerID != "" {
		query, args = query+` WHERE customer_id = ?`, append(args, customerID)
	}
	rows, err := c.query(ctx, query+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list merchants: %w", err)
	}
	return collect(rows, scanMerchant, "list merchants")
}

func setMerchantActive(ctx context.Context, c conn, id string, active bool) error {
	res, err := c.exec(ctx, `UPDATE merchants SET active = ? WHERE id = ?`, active, id)
	if err != nil {
		return fmt.Errorf("set merchant active: %w", err)
	}
	return mustAffect(res, "merchant")
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// The Access API's part of the store: terminal IDs allocated with their
// model and device, the package catalogue and software updates.

// isOpenUpdate selects unfinished updates; written into the SQL so that
// PostgreSQL can use the partial index updates_one_open.
const isOpenUpdate = `status IN ('` + string(instore.UpdateScheduled) + `', '` + string(instore.UpdateDownloading) + `')`

// AllocateTerminal allocates a terminal ID like AllocateTerminalID, records
// the model it is declared for and binds t.SerialNumber's device, all in
// one transaction; see instore.AccessStore. The terminal is inserted
// before the device row is written, the order LinkTerminal takes too, so
// that the two never wait for each other.
func (db *DB) AllocateTerminal(ctx context.Context, t *instore.Terminal, model string) error {
	id, err := updateValue(ctx, db, nil, func(c conn) (string, error) {
		id, err := allocateTerminalID(ctx, c, t, "allocate terminal")
		if err != nil {
			return "", err
		}
		if model != "" {
			if _, err := c.exec(ctx, `UPDATE terminals SET model = ? WHERE terminal_id = ?`, model, id); err != nil {
				return "", fmt.Errorf("allocate terminal: model: %w", err)
			}
		}
		if t.SerialNumber == "" {
			return id, nil
		}
		n, err := c.execAffected(ctx, `UPDATE devices SET link_code = NULL, customer_id = ?
			WHERE serial_number = ? AND (customer_id IS NULL OR customer_id = ?)`, t.CustomerID, t.SerialNumber, t.CustomerID)
		if err != nil {
			return "", c.conflictErr("allocate terminal: bind device", err)
		}
		if n == 0 {
			return "", fmt.Errorf("allocate terminal: device of another customer: %w", instore.ErrConflict)
		}
		return id, nil
	})
	if err != nil {
		return err
	}
	t.TerminalID = id
	return nil
}

// TerminalModel returns the model a terminal ID was declared for.
func (db *DB) TerminalModel(ctx context.Context, terminalID string) (string, error) {
	var model sql.NullString
	err := db.read().queryRow(ctx, `SELECT model FROM terminals WHERE terminal_id = ?`, terminalID).Scan(&model)
	if err != nil {
		return "", notFound(err, "terminal")
	}
	return model.String, nil
}

// ImportPackages stores new packages and skips those imported before; see
// instore.AccessStore.
func (db *DB) ImportPackages(ctx context.Context, ps []*instore.Package) (int, error) {
	added := 0
	err := db.update(ctx, func(c conn) error {
		added = 0
		for _, p := range ps {
			old, err := findPackage(ctx, c, p.ID)
			switch {
			case err == nil:
				if instore.SamePackage(old, p) {
					continue
				}
				return fmt.Errorf("import packages: package %s differs from the one imported before (packages are immutable; give a new release a new packageId): %w",
					p.ID, instore.ErrConflict)
			case !errors.Is(err, instore.ErrNotFound):
				return err
			}
			if _, err := c.exec(ctx, `INSERT INTO packages
				(id, customer_id, model, name, version, mandatory, size_bytes, sha256, released_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				p.ID, nullString(p.CustomerID), p.Model, p.Name, p.Version, p.Mandatory, p.SizeBytes, p.SHA256,
				micros(p.ReleasedAt)); err != nil {
				return c.conflictErr("import package "+p.ID, err)
			}
			added++
		}
		if added == 0 {
			return nil
		}
		// Nodes compare this value to notice a new catalogue.
		stamp := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(added)
		if _, err := c.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, instore.CatalogueSetting, stamp); err != nil {
			return fmt.Errorf("import packages: catalogue setting: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// Package returns the package with id.
func (db *DB) Package(ctx context.Context, id string) (*instore.Package, error) {
	return findPackage(ctx, db.read(), id)
}

// Packages lists a model's packages a customer may install, newest first.
func (db *DB) Packages(ctx context.Context, customerID, model string) ([]*instore.Package, error) {
	return getAll(ctx, db.read(), scanPackage, "list packages", `SELECT `+packageColumns+` FROM packages
		WHERE model = ? AND (customer_id IS NULL OR customer_id = ?)
		ORDER BY released_at DESC, id DESC`, model, customerID)
}

const packageColumns = `id, customer_id, model, name, version, mandatory, size_bytes, sha256, released_at`

func scanPackage(s scanner) (*instore.Package, error) {
	var (
		p        instore.Package
		customer sql.NullString
		released int64
	)
	if err := s.Scan(&p.ID, &customer, &p.Model, &p.Name, &p.Version, &p.Mandatory, &p.SizeBytes, &p.SHA256, &released); err != nil {
		return nil, err
	}
	p.CustomerID = customer.String
	p.ReleasedAt = fromMicros(released)
	return &p, nil
}

func findPackage(ctx context.Context, c conn, id string) (*instore.Package, error) {
	return getOne(ctx, c, scanPackage, "package", `SELECT `+packageColumns+` FROM packages WHERE id = ?`, id)
}

// CreateUpdate stores a new update; a second unfinished update of a
// terminal ID (the unique partial index updates_one_open), a taken id or a
// missing reference is instore.ErrConflict.
func (db *DB) CreateUpdate(ctx context.Context, u *instore.Update, evs ...instore.OutboxEvent) error {
	return db.updateOutbox(ctx, evs, func(c conn) error {
		_, err := c.exec(ctx, `INSERT INTO updates
			(id, terminal_id, package_id, status, reason, not_before, software_version, delivered_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.ID, u.TerminalID, u.PackageID, u.Status, nullString(u.Reason), nullMicros(u.NotBefore),
			nullString(u.SoftwareVersion), nullMicros(u.DeliveredAt), micros(u.CreatedAt), micros(u.UpdatedAt))
		if err != nil {
			return c.conflictErr("create update", err)
		}
		return nil
	})
}

// Update returns the update with id.
func (db *DB) Update(ctx context.Context, id string) (*instore.Update, error) {
	return findUpdate(ctx, db.read(), `WHERE id = ?`, id)
}

// OpenUpdate returns the unfinished update of a terminal ID.
func (db *DB) OpenUpdate(ctx context.Context, terminalID string) (*instore.Update, error) {
	return findUpdate(ctx, db.read(), `WHERE terminal_id = ? AND `+isOpenUpdate, terminalID)
}

// TerminalWithOpenUpdate returns a terminal ID and its unfinished update
// (nil if none) with one statement; see instore.AccessStore.
func (db *DB) TerminalWithOpenUpdate(ctx context.Context, terminalID string) (*instore.Terminal, *instore.Update, error) {
	var u nullUpdate
	t, err := scanTerminal(withMore{db.read().queryRow(ctx, terminalWithOpenUpdate, terminalID), u.dest()})
	if err != nil {
		return nil, nil, notFound(err, "terminal")
	}
	return t, u.update(), nil
}

// terminalWithOpenUpdate is the terminal's columns and its unfinished
// update's (at most one: updates_one_open), NULL when there is none.
var terminalWithOpenUpdate = `SELECT t.` + strings.ReplaceAll(terminalColumns, ", ", ", t.") + `, u.` + strings.ReplaceAll(updateColumns, ", ", ", u.") + `
	FROM terminals t LEFT JOIN updates u ON u.terminal_id = t.terminal_id AND u.` + isOpenUpdate + `
	WHERE t.terminal_id = ?`

// withMore scans a row whose first columns are s's caller's and the rest
// into more.
type withMore struct {
	s    scanner
	more []any
}

func (w withMore) Scan(dest ...any) error { return w.s.Scan(append(dest, w.more...)...) }

// nullUpdate is an update's columns from the outer side of a join.
type nullUpdate struct {
	id, terminalID, packageID, status, reason, version sql.NullString
	notBefore, delivered, created, updatedAt           sql.NullInt64
}

func (n *nullUpdate) dest() []any {
	return []any{&n.id, &n.terminalID, &n.packageID, &n.status, &n.reason, &n.notBefore, &n.version, &n.delivered,
		&n.created, &n.updatedAt}
}

// update is the update scanned, or nil when the join found none.
func (n *nullUpdate) update() *instore.Update {
	if !n.id.Valid {
		return nil
	}
	return &instore.Update{
		ID: n.id.String, TerminalID: n.terminalID.String, PackageID: n.packageID.String, Status: instore.UpdateStatus(n.status.String),
		Reason: n.reason.String, SoftwareVersion: n.version.String,
		NotBefore: fromNullMicros(n.notBefore), DeliveredAt: fromNullMicros(n.delivered),
		CreatedAt: fromMicros(n.created.Int64), UpdatedAt: fromMicros(n.updatedAt.Int64),
	}
}

// LatestUpdate returns the newest update of a terminal ID.
func (db *DB) LatestUpdate(ctx context.Context, terminalID string) (*instore.Update, error) {
	return findUpdate(ctx, db.read(), `WHERE terminal_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, terminalID)
}

// OpenUpdates lists the unfinished updates, oldest first.
func (db *DB) OpenUpdates(ctx context.Context) ([]*instore.Update, error) {
	return getAll(ctx, db.read(), scanUpdate, "list open updates", `SELECT `+updateColumns+` FROM updates WHERE `+isOpenUpdate+` ORDER BY created_at, id`)
}

// MarkUpdateDelivered sets delivered_at when the update may be sent; see
// instore.AccessStore.
func (db *DB) MarkUpdateDelivered(ctx context.Context, id string, at, staleBefore time.Time) error {
	return db.update(ctx, func(c conn) error {
		n, err := c.execAffected(ctx, `UPDATE updates SET delivered_at = ?
			WHERE id = ? AND status = '`+string(instore.UpdateScheduled)+`' AND (delivered_at IS NULL OR delivered_at < ?)
			AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.terminal_id = updates.terminal_id AND t.`+isPending+`)`,
			micros(at), id, micros(staleBefore))
		if err != nil {
			return fmt.Errorf("mark update delivered: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("update not deliverable now: %w", instore.ErrConflict)
		}
		return nil
	})
}

// ClearUpdateDelivered clears delivered_at.
func (db *DB) ClearUpdateDelivered(ctx context.Context, id string) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE updates SET delivered_at = NULL WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("clear update delivered: %w", err)
		}
		return mustAffect(res, "update")
	})
}

// SetUpdateStatus moves an update on with compare-and-set on its status;
// see instore.AccessStore.
func (db *DB) SetUpdateStatus(ctx context.Context, u *instore.Update, evs []instore.OutboxEvent, from ...instore.UpdateStatus) error {
	if len(from) == 0 {
		return errors.New("set update status: no status to move from")
	}
	args := []any{u.Status, nullString(u.Reason), nullString(u.SoftwareVersion), micros(u.UpdatedAt), u.ID}
	for _, f := range from {
		args = append(args, f)
	}
	return db.updateOutbox(ctx, evs, func(c conn) error {
		n, err := c.execAffected(ctx, `UPDATE updates SET status = ?, reason = ?, software_version = ?, updated_at = ?, delivered_at = NULL
			WHERE id = ? AND status IN (?`+strings.Repeat(", ?", len(from)-1)+`)`, args...)
		if err != nil {
			return fmt.Errorf("set update status: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("update status moved on: %w", instore.ErrConflict)
		}
		if u.Status != instore.UpdateInstalled || u.SoftwareVersion == "" {
			return nil
		}
		if _, err := c.exec(ctx, `UPDATE devices SET software_version = ?
			WHERE serial_number = (SELECT serial_number FROM terminals WHERE terminal_id = ?)`,
			u.SoftwareVersion, u.TerminalID); err != nil {
			return fmt.Errorf("set update status: device version: %w", err)
		}
		return nil
	})
}

const updateColumns = `id, terminal_id, package_id, status, reason, not_before, software_version, delivered_at, created_at, updated_at`

func scanUpdate(s scanner) (*instore.Update, error) {
	var (
		u                    instore.Update
		reason, version      sql.NullString
		notBefore, delivered sql.NullInt64
		created, updatedAt   int64
	)
	if err := s.Scan(&u.ID, &u.TerminalID, &u.PackageID, &u.Status, &reason, &notBefore, &version, &delivered,
		&created, &updatedAt); err != nil {
		return nil, err
	}
	u.Reason, u.SoftwareVersion = reason.String, version.String
	u.NotBefore, u.DeliveredAt = fromNullMicros(notBefore), fromNullMicros(delivered)
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updatedAt)
	return &u, nil
}

// findUpdate returns the update matching where (and its ORDER BY); where is
// one of the package's constants, never input.
func findUpdate(ctx context.Context, c conn, where string, arg any) (*instore.Update, error) {
	return getOne(ctx, c, scanUpdate, "update", `SELECT `+updateColumns+` FROM updates `+where, arg)
}

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

const printJobColumns = `id, merchant_id, terminal_id, transaction_id, copy, lines, status_id, created_at, completed_at`

// CreatePrintJob stores p as given: its lines as a JSON array (no lines as
// []), an empty TransactionID or Copy as NULL, a nil StatusID (running) as
// NULL. A taken id or a missing merchant, terminal or transaction is
// instore.ErrConflict.
func (db *DB) CreatePrintJob(ctx context.Context, p *instore.PrintJob) error {
	return db.update(ctx, func(c conn) error { return insertPrintJob(ctx, c, p) })
}

func insertPrintJob(ctx context.Context, c conn, p *instore.PrintJob) error {
	lines := p.Lines
	if lines == nil {
		lines = []string{}
	}
	b, err := json.Marshal(lines)
	if err != nil {
		return fmt.Errorf("create print job: encode lines: %w", err)
	}
	_, err = c.exec(ctx, `INSERT INTO print_jobs (`+printJobColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.MerchantID, p.TerminalID, nullString(p.TransactionID), nullString(p.Copy), string(b),
		nullInt(p.StatusID), micros(p.CreatedAt), nullMicros(p.CompletedAt))
	if err != nil {
		return c.conflictErr("create print job", err)
	}
	return nil
}

// PrintJob returns the print job with id. A job stored without lines
// returns nil Lines.
func (db *DB) PrintJob(ctx context.Context, id string) (*instore.PrintJob, error) {
	return getOne(ctx, db.read(), scanPrintJob, "print job", `SELECT `+printJobColumns+` FROM print_jobs WHERE id = ?`, id)
}

// RunningPrintJobs lists the jobs without a final status, oldest first
// (the partial index print_jobs_running, migration 0008).
func (db *DB) RunningPrintJobs(ctx context.Context) ([]*instore.PrintJob, error) {
	return getAll(ctx, db.read(), scanPrintJob, "list running print jobs", `SELECT `+printJobColumns+` FROM print_jobs
		WHERE status_id IS NULL ORDER BY created_at, id`)
}

func scanPrintJob(s scanner) (*instore.PrintJob, error) {
	var (
		p                   instore.PrintJob
		transactionID, cpy  sql.NullString
		lines               string
		statusID, completed sql.NullInt64
		created             int64
	)
	err := s.Scan(&p.ID, &p.MerchantID, &p.TerminalID, &transactionID, &cpy, &lines, &statusID, &created, &completed)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(lines), &p.Lines); err != nil {
		return nil, fmt.Errorf("decode print job lines: %w", err)
	}
	if len(p.Lines) == 0 {
		p.Lines = nil
	}
	p.TransactionID = transactionID.String
	p.Copy = cpy.String
	p.StatusID = (*instore.PrintStatus)(fromNullInt(statusID))
	p.CreatedAt = fromMicros(created)
	p.CompletedAt = fromNullMicros(completed)
	return &p, nil
}

// CompletePrintJob sets the print status and completion time of a running
// job, and ends its open print effects (instore.EffectMoot): nothing is
// owed for a job that ended. The status is set once: a job that already
// has one is instore.ErrConflict (the first status stays), a missing one
// instore.ErrNotFound.
func (db *DB) CompletePrintJob(ctx context.Context, id string, statusID instore.PrintStatus, at time.Time, evs ...instore.OutboxEvent) error {
	return db.updateOutbox(ctx, evs, func(c conn) error {
		n, err := c.execAffected(ctx, `UPDATE print_jobs SET status_id = ?, completed_at = ?
			WHERE id = ? AND status_id IS NULL`, statusID, micros(at), id)
		if err != nil {
			return fmt.Errorf("complete print job: %w", err)
		}
		if n > 0 {
			_, err := endEffectsOf(ctx, c, id, instore.EffectPrint, instore.EffectMoot, at)
			return err
		}
		return notUpdated(ctx, c, "print_jobs", "print job", id, "complete print job", "it has a status already")
	})
}

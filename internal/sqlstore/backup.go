package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNotSQLite is what BackupSQLite and RestoreSQLite return (errors.Is)
// for a PostgreSQL URL: PostgreSQL is backed up with its own tools.
var ErrNotSQLite = errors.New("instore backs up and restores SQLite stores only: back PostgreSQL up with its own tools, pg_basebackup with WAL archiving (or pgBackRest) for point-in-time recovery, pg_dump for a logical copy; see docs/operations.md")

// BackupSQLite writes a consistent copy of the SQLite store src, which a
// running server may be writing (in this process or another), to the new
// file dst, and returns the copy's schema version.
//
// The copy is made by VACUUM INTO, which reads the whole database in one
// read transaction: in WAL mode that transaction sees one snapshot, every
// transaction committed before it began and none after, while the server's
// writer goes on committing (it is never blocked; only checkpoints cannot
// pass the snapshot until the copy ends, so the WAL grows meanwhile). Why
// not SQLite's online backup API (sqlite3_backup_step): copying a few pages
// per step restarts from the beginning whenever another process writes, so
// under sales it would never end, and copying all in one step holds the
// same read transaction VACUUM INTO does; VACUUM INTO is plain SQL through
// database/sql, writes a compact file with no WAL beside it, and refuses
// an existing file.
//
// The copy is written to a temporary file beside dst, synced, checked
// (CheckSQLite) and renamed to dst: dst exists only complete. dst must not
// exist.
func BackupSQLite(ctx context.Context, src, dst string) (version int, err error) {
	if isPostgres(src) {
		return 0, ErrNotSQLite
	}
	if err := mustBeFile(src); err != nil {
		return 0, err
	}
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("backup: %s exists: give a new file name (a backup never overwrites one)", dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp := dst + ".partial-" + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp)
	// Created empty first (VACUUM INTO fills an empty file) to be the
	// owner's only: the copy holds digests of secrets and payment records.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	f.Close()
	defer func() {
		if err != nil {
			removeDatabase(tmp)
		}
	}()
	// Not query_only, which refuses VACUUM INTO although it writes
	// nothing to src.
	db, err := sql.Open("sqlite", sqliteDSN(src))
	if err != nil {
		return 0, fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return 0, fmt.Errorf("backup: copy %s: %w", src, err)
	}
	// VACUUM INTO does not sync what it wrote.
	if err := syncFile(tmp); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if version, err = CheckSQLite(ctx, tmp); err != nil {
		return 0, fmt.Errorf("backup: the copy fails its check: %w", err)
	}
	if err := renameSynced(tmp, dst); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return version, nil
}

// CheckSQLite checks that the SQLite file path is a sound instore store
// this binary can serve: PRAGMA integrity_check finds nothing wrong and its
// schema version is one this binary knows (a newer one would be refused
// at serve). It returns the schema version.
func CheckSQLite(ctx context.Context, path string) (version int, err error) {
	if err := mustBeFile(path); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", sqliteDSN(path, "_query_only", "on"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return 0, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return 0, err
		}
		if s != "ok" && len(problems) < 5 {
			problems = append(problems, s)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("%s fails PRAGMA integrity_check: %s", path, strings.Join(problems, "; "))
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || !v.Valid {
		return 0, fmt.Errorf("%s is not an instore store (no schema version)", path)
	}
	ms, err := loadMigrations(migrationFS, newSQLite().dir)
	if err != nil {
		return 0, err
	}
	if known := ms[len(ms)-1].version; int(v.Int64) > known {
		return 0, fmt.Errorf("%s has schema version %d, newer than this binary knows (%d): restore it with a newer instore", path, v.Int64, known)
	}
	return int(v.Int64), nil
}

// RestoreSQLite replaces the SQLite store dst by the backup src and
// returns the name the replaced store is kept under ("" when there was
// none) and the restored schema version. The caller must hold the data
// directory (no server may have dst open: the server's lock says so).
//
// Nothing is replaced until the backup, copied beside dst, passes
// CheckSQLite. The store it replaces is first checkpointed (its WAL folded
// into its file) and kept, hard-linked as dst.replaced-TIME; its WAL and
// shared-memory files are moved out of the way, since SQLite would apply a
// stale WAL to the restored file; then the copy is renamed over dst, so
// dst is at every moment either the old store or the restored one.
// Migrations newer than the backup's schema run at the next serve.
func RestoreSQLite(ctx context.Context, src, dst string) (kept string, version int, err error) {
	if isPostgres(dst) {
		return "", 0, ErrNotSQLite
	}
	if err := mustBeFile(src); err != nil {
		return "", 0, err
	}
	tmp := dst + ".restoring"
	removeDatabase(tmp) // a restore that died half-way
	defer func() {
		if err != nil {
			removeDatabase(tmp)
		}
	}()
	if err := copySynced(src, tmp); err != nil {
		return "", 0, fmt.Errorf("restore: %w", err)
	}
	if version, err = CheckSQLite(ctx, tmp); err != nil {
		return "", 0, fmt.Errorf("restore refused, nothing changed: %w", err)
	}
	// The check writes nothing; what it may leave beside the copy is not
	// the copy's.
	_, _ = os.Remove(tmp+"-wal"), os.Remove(tmp+"-shm")
	if _, err := os.Stat(dst); err == nil {
		kept = dst + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		// Fold the WAL into the file so that the kept link is the whole
		// store. A store too broken to checkpoint keeps its WAL beside it.
		ckErr := checkpoint(ctx, dst)
		if err := os.Link(dst, kept); err != nil {
			return "", 0, fmt.Errorf("restore: keep the replaced store: %w", err)
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(dst + suffix); err != nil {
				continue
			}
			if suffix == "-wal" && ckErr != nil {
				err = os.Rename(dst+suffix, kept+suffix)
			} else {
				err = os.Remove(dst + suffix)
			}
			if err != nil {
				return "", 0, fmt.Errorf("restore: %w", err)
			}
		}
	}
	if err := renameSynced(tmp, dst); err != nil {
		return "", 0, fmt.Errorf("restore: %w", err)
	}
	return kept, version, nil
}

// checkpoint folds the WAL of the SQLite file path into it and empties the
// WAL; it fails when another connection holds the database.
func checkpoint(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return err
	}
	defer db.Close()
	var busy, logFrames, done int
	if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return err
	}
	if busy != 0 {
		return errors.New("checkpoint: the database is busy")
	}
	return nil
}

// sqliteDSN is the driver's name of the SQLite file path with params.
func sqliteDSN(path string, params ...string) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.Itoa(sqliteBusyTimeout))
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return path + "?" + q.Encode()
}

// mustBeFile fails unless path is a regular file: opening a missing one
// would create an empty database.
func mustBeFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a file", path)
	}
	return nil
}

// removeDatabase removes the SQLite file path and its WAL and
// shared-memory files, ignoring the missing ones.
func removeDatabase(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p)
	}
}

// copySynced copies the file src to the new file dst and syncs it.
func copySynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

// syncFile flushes the file path to the disk.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// renameSynced renames from to to and syncs their directory, so the new
// name survives a power cut.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

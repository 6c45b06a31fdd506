package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// sqliteFile returns the SQLite file of the store a selects: an exit
// status 2 error on PostgreSQL, which instore does not back up.
func (a *adminFlags) sqliteFile(what string) (string, error) {
	switch {
	case a.databaseURL != "":
		return "", exitError{code: 2, err: fmt.Errorf("%s: %w", what, sqlstore.ErrNotSQLite)}
	case a.data == "":
		return "", usageError{errors.New("no store: set --data DIR (or INSTORE_DATA); PostgreSQL is backed up with its own tools (docs/operations.md)")}
	}
	return filepath.Join(a.data, server.DatabaseFile), nil
}

// newBackupCmds are `instore admin backup` and `instore admin restore`.
func newBackupCmds(af *adminFlags) []*cobra.Command {
	backup := &cobra.Command{Use: "backup FILE", Short: "Copy the SQLite store to FILE while the server runs (a consistent snapshot; no stop, no lost write)",
		Long: `Write a consistent copy of the SQLite store in --data to FILE, a new file,
while "instore serve" goes on selling: the copy holds every transaction
committed before it began (VACUUM INTO, one read transaction; the server's
writes never wait for it). The copy is checked (PRAGMA integrity_check)
before it gets its name. Copy FILE off the machine; put it back with
"instore admin restore". PostgreSQL is backed up with its own tools
(pg_basebackup and WAL archiving, or pgBackRest): see docs/operations.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := af.sqliteFile("backup")
			if err != nil {
				return err
			}
			version, err := sqlstore.BackupSQLite(cmd.Context(), src, args[0])
			if err != nil {
				return err
			}
			return af.print(cmd, backupResult{File: args[0], SchemaVersion: version})
		}}
	restore := &cobra.Command{Use: "restore FILE", Short: "Replace the SQLite store by the backup FILE (the server must be stopped; the replaced store is kept)",
		Long: `Replace the SQLite store in --data by the backup FILE that "instore admin
backup" wrote. Refused while a server (serve, demo) holds the data directory:
stop it first, restore, start it again. FILE is copied beside the store and
checked (PRAGMA integrity_check, a schema version this binary knows) before
anything is replaced; then it takes the store's name in one rename. The store
it replaces is kept beside it as instore.db.replaced-TIME: delete it once the
restored store is good.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dst, err := af.sqliteFile("restore")
			if err != nil {
				return err
			}
			lock, err := server.LockDataDir(af.data)
			var held *server.DataDirLockedError
			if errors.As(err, &held) {
				who := "an instore process"
				if held.PID > 0 {
					who = fmt.Sprintf("instore (pid %d)", held.PID)
				}
				return exitError{code: 2, err: fmt.Errorf("restore refused, nothing changed: %s is serving the data directory %s; stop it, restore, then start it again", who, af.data)}
			}
			if err != nil {
				return err
			}
			defer lock.Release()
			kept, version, err := sqlstore.RestoreSQLite(cmd.Context(), args[0], dst)
			if err != nil {
				return err
			}
			return af.print(cmd, restoreResult{Restored: dst, SchemaVersion: version, Replaced: kept})
		}}
	return []*cobra.Command{backup, restore}
}

type backupResult struct {
	File          string `json:"file"`
	SchemaVersion int    `json:"schemaVersion"`
}

type restoreResult struct {
	Restored      string `json:"restored"`
	SchemaVersion int    `json:"schemaVersion"`
	// Replaced is where the replaced store is kept; empty when there was
	// none.
	Replaced string `json:"replaced,omitempty"`
}

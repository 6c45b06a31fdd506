package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestBackupWhileWriting backs a SQLite store up while another connection
// pool (a server's store) creates customers without pause: the backup
// holds every customer whose creation returned before it began, it is a
// sound store, and a second backup to the same name is refused.
func TestBackupWhileWriting(t *testing.T) {
	ctx := t.Context()
	src := sqlitePath(t)
	st := mustOpen(t, src, sqlstore.Options{})
	create := func(id string) error {
		return st.CreateCustomer(ctx, &instore.Customer{ID: id, Name: id})
	}
	for i := range 200 {
		must(t, create(fmt.Sprintf("before-%d", i)))
	}
	writing, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; writing.Err() == nil; i++ {
			if err := create(fmt.Sprintf("during-%d", i)); err != nil {
				t.Errorf("create during the backup: %v", err)
				return
			}
		}
	}()
	dst := filepath.Join(t.TempDir(), "backup.db")
	version, err := sqlstore.BackupSQLite(ctx, src, dst)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("BackupSQLite() = %v", err)
	}
	if version <= 0 {
		t.Errorf("BackupSQLite() version = %d, want > 0", version)
	}
	if _, err := sqlstore.BackupSQLite(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second backup to the same file = %v, want refused", err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v, %v; want 0600 (it holds digests of secrets)", fi, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("the backup's directory holds %d files, want only the backup", len(entries))
	}
	restored := filepath.Join(t.TempDir(), "instore.db")
	if _, _, err := sqlstore.RestoreSQLite(ctx, dst, restored); err != nil {
		t.Fatalf("RestoreSQLite() into an empty directory = %v", err)
	}
	back := mustOpen(t, restored, sqlstore.Options{})
	for i := range 200 {
		if _, err := back.Customer(ctx, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatalf("customer before-%d, created before the backup: %v", i, err)
		}
	}
}

// TestRestoreReplacesAndKeeps restores a backup over a store that changed
// since and was left as a crash leaves it (its last writes in its WAL):
// the store is the backup's again, and the replaced one is kept whole
// beside it, its WAL's writes included.
func TestRestoreReplacesAndKeeps(t *testing.T) {
	ctx := t.Context()
	running := sqlitePath(t)
	st := mustOpen(t, running, sqlstore.Options{})
	must(t, st.CreateCustomer(ctx, &instore.Customer{ID: "old", Name: "old"}))
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlstore.BackupSQLite(ctx, running, backup); err != nil {
		t.Fatal(err)
	}
	must(t, st.CreateCustomer(ctx, &instore.Customer{ID: "new", Name: "new"}))
	// What a kill -9 leaves: the file and its WAL, not checkpointed.
	live := sqlitePath(t)
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(running + suffix)
		must(t, err)
		must(t, os.WriteFile(live+suffix, b, 0o600))
	}
	if fi, err := os.Stat(live + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("the crashed store has no WAL to fold: %v", err)
	}

	kept, _, err := sqlstore.RestoreSQLite(ctx, backup, live)
	if err != nil {
		t.Fatalf("RestoreSQLite() = %v", err)
	}
	if _, err := os.Stat(live + "-wal"); err == nil {
		t.Errorf("the replaced store's WAL is still beside the restored store")
	}
	for path, want := range map[string][]string{live: {"old"}, kept: {"new", "old"}} {
		db := mustOpen(t, path, sqlstore.Options{})
		cs, err := db.Customers(ctx)
		must(t, err)
		var got []string
		for _, c := range cs {
			got = append(got, c.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("customers of %s = %v, want %v", filepath.Base(path), got, want)
		}
	}
}

// TestRestoreRefusesBadBackups: a file that is no SQLite database, a
// damaged one, one that is no instore store, one of a newer schema and a
// PostgreSQL URL are refused, and the store is left as it was.
func TestRestoreRefusesBadBackups(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	live := sqlitePath(t)
	st := mustOpen(t, live, sqlstore.Options{})
	for i := range 500 {
		must(t, st.CreateCustomer(ctx, &instore.Customer{ID: fmt.Sprint(i), Name: strings.Repeat("n", 200)}))
	}
	good := filepath.Join(dir, "good.db")
	if _, err := sqlstore.BackupSQLite(ctx, live, good); err != nil {
		t.Fatal(err)
	}
	must(t, st.Close())
	b, err := os.ReadFile(good)
	must(t, err)
	file := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, content, 0o600))
		return p
	}
	damaged := append([]byte(nil), b...)
	for i := len(damaged) / 2; i < len(damaged)/2+4096; i++ {
		damaged[i] ^= 0x5a
	}
	newer := file("newer.db", b)
	raw := rawOpen(t, "sqlite", newer)
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`); err != nil {
		t.Fatal(err)
	}
	must(t, raw.Close())
	empty := filepath.Join(dir, "empty.db")
	raw = rawOpen(t, "sqlite", empty)
	if _, err := raw.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	must(t, raw.Close())
	for _, c := range []struct{ name, path, want string }{
		{"text", file("text.db", []byte("not a database at all, not a database at all, not a database")), "not a readable SQLite database"},
		{"damaged", file("damaged.db", damaged), "integrity_check"},
		{"not instore", empty, "not an instore store"},
		{"newer", newer, "newer than this binary knows"},
		{"missing", filepath.Join(dir, "missing.db"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := sqlstore.RestoreSQLite(ctx, c.path, live); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("RestoreSQLite() = %v, want an error with %q", err, c.want)
			}
		})
	}
	db := mustOpen(t, live, sqlstore.Options{})
	if cs, err := db.Customers(ctx); err != nil || len(cs) != 500 {
		t.Errorf("the store after the refused restores: %d customers, %v; want 500", len(cs), err)
	}
	if _, err := os.Stat(live + ".restoring"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore left its copy behind: %v", err)
	}
	for _, f := range []func() error{
		func() error {
			_, err := sqlstore.BackupSQLite(ctx, "postgres://localhost/x", filepath.Join(dir, "pg.db"))
			return err
		},
		func() error { _, _, err := sqlstore.RestoreSQLite(ctx, good, "postgres://localhost/x"); return err },
	} {
		if err := f(); !errors.Is(err, sqlstore.ErrNotSQLite) {
			t.Errorf("on PostgreSQL: %v, want ErrNotSQLite", err)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

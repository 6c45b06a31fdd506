package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/instore-dev/instore/internal/server"
)

func TestLockDataDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock: the data directory is not locked")
	}
	dir := filepath.Join(t.TempDir(), "data") // created by LockDataDir
	first, err := server.LockDataDir(dir)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	// flock locks conflict within one process too.
	second, err := server.LockDataDir(dir)
	if !errors.Is(err, server.ErrDataDirLocked) {
		second.Release()
		t.Fatalf("second lock = %v, want ErrDataDirLocked", err)
	}
	var le *server.DataDirLockedError
	if !errors.As(err, &le) || le.Dir != dir || le.PID != os.Getpid() {
		t.Errorf("error %#v, want the directory and this pid %d", err, os.Getpid())
	}
	for _, want := range []string{"another instore process (pid " + strconv.Itoa(os.Getpid()) + ")", dir, "PostgreSQL (--database-url)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}

	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	third, err := server.LockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after Release: %v", err)
	}
	defer third.Release()
	if _, err := os.Stat(filepath.Join(dir, server.LockFile)); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

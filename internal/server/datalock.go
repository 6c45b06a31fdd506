package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the lock file inside an SQLite data directory: the process
// that serves the directory holds an exclusive lock on it (LockDataDir).
const LockFile = "instore.lock"

// ErrDataDirLocked is what LockDataDir's error matches (errors.Is) when
// another process, or another lock in this one, holds the data directory.
var ErrDataDirLocked = errors.New("the data directory is in use")

// DataDirLockedError says which data directory is held, and by which
// process when the lock file names it.
type DataDirLockedError struct {
	Dir string
	PID int // 0 when unknown
}

func (e *DataDirLockedError) Error() string {
	who := "another instore process"
	if e.PID > 0 {
		who += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("%s holds the data directory %s: SQLite serves one node, one process per data directory; to run several nodes, use PostgreSQL (--database-url)", who, e.Dir)
}

func (e *DataDirLockedError) Is(target error) bool { return target == ErrDataDirLocked }

// DataDirLock is an exclusive lock on an SQLite data directory, held from
// LockDataDir until Release or the end of the process.
type DataDirLock struct {
	f *os.File // nil where locking is not supported
}

// LockDataDir takes the exclusive lock on the SQLite data directory dir
// (creating it, and the lock file LockFile, if need be) or fails at once
// with a *DataDirLockedError when another process holds it: two
// processes serving one SQLite store would contend for its single writer
// and each keep the terminals' sessions and timers of its own, which only
// the PostgreSQL store's cross-node design is made for. The lock is the
// kernel's: it ends with the process, however it ends (kill -9 too), so a
// crash never leaves a stale lock behind. `instore admin` does not take
// it: its short transactions share the store with the server's.
func LockDataDir(dir string) (*DataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if !held {
		f.Close()
		e := &DataDirLockedError{Dir: dir}
		if b, err := os.ReadFile(path); err == nil {
			e.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return nil, e
	}
	// For the message of the process refused next, and for people: the
	// holder's pid. The lock, not this content, decides.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DataDirLock{f: f}, nil
}

// Release gives the lock up. The lock file stays: removing it could let
// two processes lock two different files of the same name.
func (l *DataDirLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	_ = f.Truncate(0)
	return f.Close() // closing the descriptor drops the lock
}

//go:build unix

package server

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive flock(2) on f without waiting and reports
// whether it got it.
//
// Why flock and this package: flock locks belong to the open file
// description, so they are dropped by the kernel when the process ends,
// however it ends (kill -9 included), and two locks conflict even within
// one process (an in-process test starting a second server sees the
// refusal too); POSIX fcntl locks would be dropped by closing any other
// descriptor of the file and never conflict within a process, and they
// are what SQLite uses on the database file, a different file. The call
// comes from golang.org/x/sys/unix, already in the module graph (go.mod),
// rather than the frozen syscall package or a new dependency such as
// github.com/gofrs/flock (not in the module cache) for one system call.
func tryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

//go:build !unix

package server

import "os"

// tryLock does not lock where flock(2) is missing (Windows): the service
// is built for Unix systems (the container image, systemd); elsewhere
// nothing stops a second process on the same data directory.
func tryLock(f *os.File) (bool, error) { return true, nil }

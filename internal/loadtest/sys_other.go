//go:build !linux

package loadtest

import "os/exec"

// raiseOpenFiles is a no-op outside Linux (the load tool reads /proc and
// runs on Linux only).
func raiseOpenFiles() uint64 { return 0 }

func dieWithParent(cmd *exec.Cmd) {}

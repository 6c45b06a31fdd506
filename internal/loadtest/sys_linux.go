package loadtest

import (
	"os/exec"
	"syscall"
)

// raiseOpenFiles raises this process's soft limit of open files to the
// hard limit (the tool may hold tens of thousands of sockets) and returns
// the new soft limit.
func raiseOpenFiles() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
		}
	}
	return l.Cur
}

// dieWithParent makes the child killed when the load tool dies, so that an
// interrupted run leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

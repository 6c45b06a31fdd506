package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnOneDataDirRefused runs `instore serve` (the test binary
// as the instore binary) on an SQLite data directory, then a second serve
// and a demo on the same directory, which must exit 2 saying why; after
// the first is killed with SIGKILL, the kernel has dropped its lock and a
// new serve starts.
func TestSecondServeOnOneDataDirRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers as child processes")
	}
	if runtime.GOOS == "windows" {
		t.Skip("no flock: the data directory is not locked")
	}
	dir := t.TempDir()
	first := startTLSServe(t, "--data", dir)
	pid := strconv.Itoa(first.cmd.Process.Pid)

	exe, err := os.Executable()
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, exe, slices.Concat([]string{"serve", "--data", dir}, onFreePorts)...)
	second.Env = append(os.Environ(), asBinaryEnv+"=1")
	out, err := second.CombinedOutput() // waits: the process is gone after this
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("second serve: %v, want exit status 2\n%s", err, out)
	}
	for _, want := range []string{"another instore process (pid " + pid + ") holds the data directory " + dir, "PostgreSQL (--database-url)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second serve said %q, want %q", out, want)
		}
	}

	// The demo on the same directory, in this process: refused the same.
	_, errs, code := runCmd(t, demoArgs("--data", dir)...)
	if code != 2 || !strings.Contains(errs, "another instore process (pid "+pid+")") || !strings.Contains(errs, "--database-url") {
		t.Errorf("demo on the same directory = exit %d, stderr %q; want 2 and the reason", code, errs)
	}

	// SIGKILL: no chance to unlock; the kernel drops the lock.
	must(t, first.cmd.Process.Kill())
	err = <-first.done
	first.done <- err // for startTLSServe's cleanup
	third := startTLSServe(t, "--data", dir)
	resp, err := http.Get("http://" + third.addrs["ops"] + "/readyz")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the serve after the kill: /readyz = %d, want 200", resp.StatusCode)
	}
}

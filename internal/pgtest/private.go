package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// A private PostgreSQL: the server programs (initdb, pg_ctl, postgres) run
// on a data directory of the test's own, on a port of its own, never the
// shared server of INSTORE_TEST_DATABASE_URL, which no test stops.

// BinDir returns the directory of PostgreSQL's server programs:
// INSTORE_PG_BIN, else the newest /usr/lib/postgresql/*/bin (Debian),
// else the directory of pg_ctl on PATH; "" when there is none.
func BinDir() string {
	if d := os.Getenv("INSTORE_PG_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(r)
		}
	}
	return ""
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Credential is the user PostgreSQL's processes run as: nil (this
// process's) unless this process is root, which PostgreSQL refuses; then
// the "postgres" user's, or an error when there is none.
func Credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Command is the command bin args run as cred (Credential).
func Command(cred *syscall.Credential, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// Dir returns a new directory owned by cred's user (Credential), removed
// when tb ends. Not under tb.TempDir, whose parents only root may enter
// when root runs the test.
func Dir(tb testing.TB, cred *syscall.Credential) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "instore-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// FreePort returns a TCP port of the loopback interface free right now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Instance is a private PostgreSQL server.
type Instance struct {
	// URL is its postgres database's, as the superuser (trust on
	// loopback).
	URL  string
	bin  string
	data string
	cred *syscall.Credential
}

// Private initialises and starts a private PostgreSQL on a free port of
// the loopback interface; it is stopped (immediate) when tb ends. It skips
// tb where no server programs are installed.
func Private(tb testing.TB) *Instance {
	tb.Helper()
	bin := BinDir()
	if bin == "" {
		tb.Skip("no PostgreSQL server programs (initdb, pg_ctl): install postgresql or set INSTORE_PG_BIN")
	}
	cred, err := Credential()
	if err != nil {
		tb.Skip(err.Error())
	}
	dir := Dir(tb, cred)
	port, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	in := &Instance{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		bin: bin, data: filepath.Join(dir, "data"), cred: cred}
	if out, err := in.run("initdb", "-D", in.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nshared_buffers = 16MB\nfsync = off\n", port, dir)
	if err := os.WriteFile(filepath.Join(in.data, "postgresql.auto.conf"), []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	if cred != nil {
		os.Chown(filepath.Join(in.data, "postgresql.auto.conf"), int(cred.Uid), int(cred.Gid))
	}
	tb.Cleanup(func() { in.run("pg_ctl", "stop", "-D", in.data, "-m", "immediate", "-w") })
	in.Start(tb)
	return in
}

// Start starts the server and waits until it accepts connections.
func (in *Instance) Start(tb testing.TB) {
	tb.Helper()
	if out, err := in.run("pg_ctl", "start", "-D", in.data, "-l", filepath.Join(filepath.Dir(in.data), "server.log"), "-w", "-t", "60"); err != nil {
		tb.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// Stop stops the server (fast: its sessions are ended with SQLSTATE 57P01)
// and waits until it is gone.
func (in *Instance) Stop(tb testing.TB) {
	tb.Helper()
	if out, err := in.run("pg_ctl", "stop", "-D", in.data, "-m", "fast", "-w", "-t", "60"); err != nil {
		tb.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (in *Instance) run(program string, args ...string) ([]byte, error) {
	return Command(in.cred, filepath.Join(in.bin, program), args...).CombinedOutput()
}

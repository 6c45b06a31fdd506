package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/testwait"
)

// A PostgreSQL pair run by Patroni (Debian's package) with one etcd, all
// on loopback ports of their own, in a temporary directory: the primary
// and a synchronous standby (synchronous_mode), which Patroni promotes when
// the primary's node dies. The store reaches whichever is primary through a
// multi-host URL with target_session_attrs=read-write.

// Patroni's timing: the leader key lives ttl seconds, renewed every
// loop_wait; a standby takes over at most ttl + loop_wait after the
// leader's node died. 10 s is as low as the checks allow (ttl >= loop_wait
// + 2 retry_timeout); Patroni's default is 30.
const (
	patroniTTL          = 10
	patroniLoopWait     = 1
	patroniRetryTimeout = 3
)

// patroniAsync, from INSTORE_PATRONI_ASYNC=1, runs the pair without
// synchronous replication: a control of the checks, which must then find
// acknowledged purchases lost (the standby, left behind the primary before
// the kill, has not received them).
func patroniAsync() bool { return os.Getenv("INSTORE_PATRONI_ASYNC") == "1" }

// haPair is the running pair.
type haPair struct {
	t       *testing.T
	dir     string
	cred    *syscall.Credential
	etcd    *proc
	members []*pgMember
	// url reaches the primary, whichever member it is.
	url string
}

// pgMember is one Patroni and the PostgreSQL it runs.
type pgMember struct {
	name            string
	pgPort, apiPort int
	dataDir         string
	patroni         *proc
	cfg             string
}

// status is the status of a GET of u (0: no answer).
func status(ctx context.Context, u string) int {
	st, _ := httpGet(ctx, u)
	return st
}

func (m *pgMember) api(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", m.apiPort, path)
}

// patroniNeeds skips where Patroni cannot run: under -short, without
// patroni, etcd or PostgreSQL's server programs, or as root without a
// postgres user to run PostgreSQL as. It returns the server programs'
// directory.
func patroniNeeds(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the Patroni test starts etcd, two PostgreSQL servers under Patroni and the service, and kills the primary under load for about a minute; run it without -short")
	}
	for _, prog := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s is not installed (apt-get install patroni etcd-server); the Patroni test needs a real failover", prog)
		}
	}
	bin := pgtest.BinDir()
	if bin == "" {
		t.Skip("no PostgreSQL server programs (apt-get install postgresql, or INSTORE_PG_BIN); the Patroni test runs two of its own")
	}
	if _, err := pgtest.Credential(); err != nil {
		t.Skip(err.Error())
	}
	return bin
}

// startPatroni starts etcd and two members, and waits until one is the
// leader and the other its synchronous standby, streaming.
func startPatroni(t *testing.T, ctx context.Context, bin string) *haPair {
	cred, _ := pgtest.Credential()
	h := &haPair{t: t, dir: pgtest.Dir(t, cred), cred: cred}
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	client, peer := ports[0], ports[1]
	h.etcd = h.start("etcd", filepath.Join(h.dir, "etcd.log"), "etcd", "--name", "e1", "--data-dir", filepath.Join(h.dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client), "--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("e1=http://127.0.0.1:%d", peer), "--initial-cluster-state", "new")
	if !testwait.Until(30*time.Second, func() bool {
		return h.etcd.exited() || status(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", client)) == 200
	}) || h.etcd.exited() {
		t.Skipf("etcd cannot run here (it exited or did not answer within 30 s); the Patroni test needs it:\n%s", h.etcd.logTail(20))
	}
	var hosts []string
	for i := range 2 {
		m := &pgMember{name: fmt.Sprintf("pg%d", i+1), pgPort: ports[2+2*i], apiPort: ports[3+2*i]}
		m.dataDir = filepath.Join(h.dir, m.name)
		m.cfg = filepath.Join(h.dir, m.name+".yml")
		if err := os.WriteFile(m.cfg, []byte(patroniConfig(h.dir, bin, client, m)), 0o644); err != nil {
			t.Fatal(err)
		}
		h.members = append(h.members, m)
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", m.pgPort))
	}
	// The first bootstraps the cluster; the second then copies it.
	for i, m := range h.members {
		m.patroni = h.start("patroni "+m.name, filepath.Join(h.dir, m.name+".log"), "patroni", m.cfg)
		if i == 0 {
			h.awaitRole(ctx, m, "leader", 90*time.Second)
		}
	}
	standby := "sync_standby"
	if patroniAsync() {
		standby = "replica"
	}
	h.awaitRole(ctx, h.members[1], standby, 90*time.Second)
	h.url = "postgres://postgres@" + strings.Join(hosts, ",") +
		"/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
	return h
}

// start runs a program as the PostgreSQL user, killed when the test ends.
func (h *haPair) start(name, log, prog string, args ...string) *proc {
	path, err := exec.LookPath(prog)
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := pgtest.Command(h.cred, path, args...)
	cmd.Env = os.Environ()
	p, err := startCmd(name, cmd, log, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		p.kill()
		h.killChildren(p) // a postmaster Patroni started, if its Patroni was killed first
	})
	return p
}

// patroniConfig is member m's configuration: its ports, its data directory
// in dir, trust on loopback (the test's), synchronous replication, and
// Patroni's shortest timing.
func patroniConfig(dir, bin string, etcdPort int, m *pgMember) string {
	// Patroni's default: a standby more than 1 MiB behind is not promoted.
	// The control (patroniAsync) promotes it whatever its lag, as an
	// operator who wants the service back more than every commit would.
	maxLag := 1 << 20
	if patroniAsync() {
		maxLag = 1 << 40
	}
	return fmt.Sprintf(`scope: instore-crashtest
name: %[1]s
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: %[8]d
    loop_wait: %[9]d
    retry_timeout: %[10]d
    synchronous_mode: %[11]t
    maximum_lag_on_failover: %[12]d
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
        synchronous_commit: "on"
  initdb:
  - encoding: UTF8
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication replicator 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[6]s
  pgpass: %[7]s/pgpass-%[1]s
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
  parameters:
    unix_socket_directories: %[7]s
    shared_buffers: 32MB
`, m.name, m.apiPort, etcdPort, m.pgPort, m.dataDir, bin, dir, patroniTTL, patroniLoopWait, patroniRetryTimeout, !patroniAsync(), maxLag)
}

// cluster is Patroni's view of the members, from one member's REST API.
func (h *haPair) cluster(ctx context.Context, via *pgMember) map[string]string {
	_, b := httpGet(ctx, via.api("/cluster"))
	var v struct {
		Members []struct{ Name, Role, State string }
	}
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	roles := map[string]string{}
	for _, m := range v.Members {
		if m.State == "running" || m.State == "streaming" {
			roles[m.Name] = m.Role
		}
	}
	return roles
}

// awaitRole waits until m runs with role (leader, sync_standby); the test
// skips when it does not.
func (h *haPair) awaitRole(ctx context.Context, m *pgMember, role string, limit time.Duration) {
	h.t.Helper()
	if !testwait.Until(limit, func() bool {
		return m.patroni.exited() || ctx.Err() != nil || h.cluster(ctx, m)[m.name] == role
	}) || m.patroni.exited() || ctx.Err() != nil {
		// Before the service runs: Patroni cannot run here, which is not
		// the service's failure.
		h.t.Skipf("Patroni cannot run here: %s is not %s within %s (Patroni's view: %v):\n%s", m.name, role, limit, h.cluster(ctx, m), m.patroni.logTail(30))
	}
}

// primary is the member whose REST API answers /primary 200, or nil.
func (h *haPair) primary(ctx context.Context) *pgMember {
	for _, m := range h.members {
		if !m.patroni.exited() && status(ctx, m.api("/primary")) == 200 {
			return m
		}
	}
	return nil
}

// killNode kills m's node with SIGKILL, as a machine dies: its Patroni
// first (it would start PostgreSQL again), then the postmaster and every
// process of PostgreSQL's.
func (h *haPair) killNode(m *pgMember) {
	pm := postmasterPID(m.dataDir)
	if !postmasterOf(pm, m.dataDir) {
		pm = 0
	}
	kids := childrenOf(pm)
	m.patroni.kill()
	if pm > 0 {
		syscall.Kill(pm, syscall.SIGKILL)
	}
	for _, k := range kids {
		syscall.Kill(k, syscall.SIGKILL)
	}
}

// freezeSender stops the WAL sender of primary m (SIGSTOP): its standby
// receives nothing more, as one that lags behind; with synchronous
// replication the primary's commits wait for it. The sender dies with the
// node (killNode).
func (h *haPair) freezeSender(m *pgMember) {
	pm := postmasterPID(m.dataDir)
	if !postmasterOf(pm, m.dataDir) {
		h.t.Fatalf("%s: no postmaster", m.name)
	}
	for _, k := range childrenOf(pm) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k)); strings.Contains(string(b), "walsender") {
			syscall.Kill(k, syscall.SIGSTOP)
			return
		}
	}
	h.t.Fatalf("%s: no WAL sender", m.name)
}

// killChildren kills what is left of the PostgreSQL of a Patroni p
// started, at the end (p is gone).
func (h *haPair) killChildren(p *proc) {
	for _, m := range h.members {
		if m.patroni != p {
			continue
		}
		if pm := postmasterPID(m.dataDir); pm > 0 && postmasterOf(pm, m.dataDir) {
			kids := childrenOf(pm)
			syscall.Kill(pm, syscall.SIGKILL)
			for _, k := range kids {
				syscall.Kill(k, syscall.SIGKILL)
			}
		}
	}
}

// postmasterPID reads the postmaster's pid from its data directory (0:
// none).
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	if pid <= 0 {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ")".
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(s))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// postmasterOf reports whether pid is still the postmaster of dataDir (a
// pid read from a file left by a killed server may be another's now).
func postmasterOf(pid int, dataDir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), dataDir)
}

// httpGet is the status and body of a GET of u (0 when there is no
// answer).
func httpGet(ctx context.Context, u string) (int, []byte) {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// viaHAProxy starts HAProxy in front of the pair, in TCP mode with its
// health check on Patroni's REST API (GET /primary: 200 on the primary
// only), as docs/operations.md has it, and returns the URL that reaches
// the primary through it.
func (h *haPair) viaHAProxy(ctx context.Context, haproxy string) string {
	t := h.t
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global
    maxconn 1000
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 2s
listen postgres
    bind 127.0.0.1:%d
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
`, ports[0])
	for _, m := range h.members {
		cfg += fmt.Sprintf("    server %s 127.0.0.1:%d check port %d\n", m.name, m.pgPort, m.apiPort)
	}
	path := filepath.Join(h.dir, "haproxy-postgres.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	stats, sock := statsSocket(t)
	lb, err := startProc("haproxy", haproxy, []string{"-db", "-f", path, "-f", stats}, nil, filepath.Join(h.dir, "haproxy.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.kill)
	waitListening(t, ports, lb)
	// HAProxy starts every server up; until its checks of Patroni's
	// /primary have marked the standby down, a connection may reach it
	// (read-only: the first migration failed so).
	waitServers(t, sock, lb, "haproxy's checks to mark the primary alone up", func(up, down int) bool {
		return up == 1 && down == len(h.members)-1
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", ports[0])
}

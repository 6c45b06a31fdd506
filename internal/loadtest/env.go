package loadtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the fresh schema

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sim"
)

// env is one scenario's world: a store (a temporary SQLite directory or a
// fresh PostgreSQL schema, or a target's store), the accounts and devices
// seeded in it, and the server under test.
type env struct {
	o        *Options
	scenario string
	runID    string
	dir      string // temporary directory: logs, the SQLite data, baseline files

	backend string // sqlite or postgres
	dataDir string // SQLite data directory ("" with PostgreSQL)
	dbURL   string // PostgreSQL URL (with search_path for a fresh schema)
	schema  string // the fresh schema, dropped at close
	pgAdmin *sql.DB

	customerID, merchantID string
	clientID, clientSecret string
	key, token             string
	devices                []device

	srv *serverProc
	// rcv is the webhook receiver of purchase --webhooks and of the
	// webhooks scenario, started before the server (which trusts its
	// certificate).
	rcv *receiver
	// fleet is the virtual terminals of startFleet, by device.
	fleet []*sim.Terminal
}

type device struct {
	serial, secret, terminalID string
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.o.Log, "loadtest: "+format+"\n", args...)
}

func newEnv(ctx context.Context, o *Options) (*env, error) {
	b := make([]byte, 4)
	rand.Read(b)
	e := &env{o: o, runID: hex.EncodeToString(b), backend: "sqlite"}
	dir, err := os.MkdirTemp("", "instore-loadtest-")
	if err != nil {
		return nil, err
	}
	e.dir = dir
	switch {
	case o.Target != nil:
		e.dataDir, e.dbURL = o.DataDir, o.DatabaseURL
	case o.DatabaseURL != "":
		if err := e.freshSchema(ctx); err != nil {
			e.close()
			return nil, err
		}
	default:
		e.dataDir = filepath.Join(dir, "data")
	}
	switch {
	case e.dbURL != "":
		e.backend = "postgres"
	case e.dataDir == "":
		e.backend = "unknown" // a target without its store
	}
	return e, nil
}

// hasStore reports whether the run may write to the server's store.
func (e *env) hasStore() bool { return e.dataDir != "" || e.dbURL != "" }

// freshSchema creates a schema of its own in the PostgreSQL database and
// points the store at it (search_path); close drops it.
func (e *env) freshSchema(ctx context.Context) error {
	db, err := sql.Open("pgx", e.o.DatabaseURL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	e.pgAdmin = db
	e.schema = "loadtest_" + e.runID
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+e.schema); err != nil {
		return fmt.Errorf("postgres: create schema: %w", err)
	}
	u, err := url.Parse(e.o.DatabaseURL)
	if err != nil {
		return errors.New("postgres: invalid URL")
	}
	q := u.Query()
	q.Set("search_path", e.schema)
	u.RawQuery = q.Encode()
	e.dbURL = u.String()
	return nil
}

// openStore opens the store for seeding and counting. SQLite opens with
// synchronous=NORMAL: the setup's durability does not matter, and the
// server opens it again with the setting under test.
func (e *env) openStore(ctx context.Context) (instore.Store, error) {
	return server.OpenStore(ctx, server.Config{DataDir: e.dataDir, DatabaseURL: e.dbURL, SQLiteSynchronous: "NORMAL"})
}

// seed creates a customer, an active merchant, an Online API client and
// subscription key, and n devices, each linked to a terminal ID of the
// merchant. Without store access (a target), the Online API credentials
// come from the options.
func (e *env) seed(ctx context.Context, n int) error {
	if !e.hasStore() {
		if n > 0 {
			return errors.New("this scenario provisions devices: give the target's store (--data or --database-url)")
		}
		e.key, e.token = e.o.SubscriptionKey, e.o.AccessToken
		e.clientID, e.clientSecret = e.o.ClientID, e.o.ClientSecret
		if e.key == "" || (e.token == "" && e.clientSecret == "") {
			return errors.New("a target without its store needs a subscription key and an access token or client credentials")
		}
		return nil
	}
	if e.dataDir != "" {
		if err := os.MkdirAll(e.dataDir, 0o700); err != nil {
			return err
		}
	}
	st, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ad := admin.New(st)
	shop, err := ad.CreateShop(ctx, "Load test "+e.runID, "Load test "+e.runID, "loadtest")
	if err != nil {
		return err
	}
	cus, mer := shop.Customer, shop.Merchant
	e.customerID, e.merchantID, e.clientID, e.clientSecret, e.key = cus.ID, mer.ID, shop.Online.Client.ID, shop.Online.Secret, shop.Online.Key
	if n == 0 {
		return nil
	}
	e.logf("provisioning %d devices and terminal IDs", n)
	e.devices = make([]device, n)
	jobs := make(chan int)
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				d := &e.devices[i]
				d.serial = fmt.Sprintf("LT-%s-%05d", e.runID, i)
				_, sec, err := ad.CreateDevice(ctx, d.serial, instore.ModelCountertop, cus.ID)
				if err == nil {
					var ts []*instore.Terminal
					if ts, err = ad.AllocateTerminals(ctx, mer.ID, 1); err == nil {
						d.secret, d.terminalID = sec, ts[0].TerminalID
						_, _, err = st.LinkTerminal(ctx, d.terminalID, d.serial, time.Now().UTC().Truncate(time.Microsecond))
					}
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		select {
		case jobs <- i:
		case err := <-errc:
			close(jobs)
			wg.Wait()
			return fmt.Errorf("provision devices: %w", err)
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return fmt.Errorf("provision devices: %w", err)
	default:
	}
	return nil
}

// close stops the server and removes what the run created.
func (e *env) close() {
	if e.srv != nil {
		e.srv.close()
	}
	if e.rcv != nil {
		e.rcv.close()
	}
	if e.pgAdmin != nil {
		if e.schema != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			e.pgAdmin.ExecContext(ctx, "DROP SCHEMA "+e.schema+" CASCADE")
			cancel()
		}
		e.pgAdmin.Close()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// serverProc is the server under test, however it runs.
type serverProc struct {
	kind                  string // child, in-process, target
	online, terminal, ops string
	pid                   int
	child                 *child
	inproc                *server.Server
}

// stats reads the server's RSS and CPU.
func (s *serverProc) stats() (procStats, error) {
	switch s.kind {
	case "child":
		return readProc(s.pid)
	case "in-process":
		return readProc(0)
	default:
		if s.ops == "" {
			return procStats{}, errors.New("no ops URL for the target")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return readMetrics(ctx, s.ops)
	}
}

func (s *serverProc) close() {
	switch s.kind {
	case "child":
		s.child.stop(20 * time.Second)
	case "in-process":
		s.inproc.Close()
	}
}

// startServer starts the server under test (or takes the target).
func (e *env) startServer(ctx context.Context) error {
	o := e.o
	if o.Target != nil {
		e.srv = &serverProc{kind: "target", online: o.Target["online"], terminal: o.Target["terminal"], ops: o.Target["ops"]}
		if e.srv.terminal != "" && !strings.HasPrefix(e.srv.terminal, "ws") {
			e.srv.terminal = "ws" + strings.TrimPrefix(e.srv.terminal, "http")
		}
		e.srv.terminal = strings.TrimSuffix(e.srv.terminal, "/terminal/v1/connect")
		return e.getToken(ctx)
	}
	var extra []string
	if e.webhookReceiver() && e.rcv == nil {
		rcv, err := newReceiver(e.dir)
		if err != nil {
			return err
		}
		e.rcv = rcv
		// Go reads the trusted roots from SSL_CERT_FILE when it first
		// verifies a certificate: the child's whole life, or (in-process)
		// this process's, unless it verified one before.
		extra = append(extra, "SSL_CERT_FILE="+rcv.certFile)
		if o.InProcess {
			os.Setenv("SSL_CERT_FILE", rcv.certFile)
		}
	}
	if o.InProcess {
		f, err := os.Create(filepath.Join(e.dir, "server.log"))
		if err != nil {
			return err
		}
		cfg := server.Config{
			ListenOnline: "127.0.0.1:0", ListenAccess: "127.0.0.1:0", ListenTerminal: "127.0.0.1:0", ListenOps: "127.0.0.1:0",
			DataDir: e.dataDir, DatabaseURL: e.dbURL, SQLiteSynchronous: o.Synchronous,
			TokenTTL: time.Hour, AuthCacheTTL: time.Second, RateLimit: serverRateLimit, RateBurst: serverRateLimit,
			StreamsPerClient: MaxClients,
			ShutdownTimeout:  5 * time.Second, Logger: logging.New(f, logging.Options{Format: logging.FormatJSON}),
			Pprof: o.ProfileDir != "", WebhookAllowPrivate: e.webhookReceiver(),
		}
		srv, err := server.New(ctx, cfg)
		if err != nil {
			return err
		}
		if err := srv.Start(); err != nil {
			return err
		}
		e.srv = &serverProc{kind: "in-process", online: srv.URL("online"), terminal: srv.URL("terminal"), ops: srv.URL("ops"), inproc: srv}
		return e.getToken(ctx)
	}
	if e.dataDir == "" {
		// Not on the command line: it may hold a password.
		extra = append(extra, "INSTORE_DATABASE_URL="+e.dbURL)
	}
	// The ports are picked here, not by the child (port 0), so that the
	// server's log level does not matter; a port taken in between makes the
	// child exit at once, and the next attempt takes others.
	var lastErr error
	for range 3 {
		ports, err := freePorts(4)
		if err != nil {
			return err
		}
		addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
		args := append(append([]string{}, o.ServeArgs...),
			"--listen-online", addr(0), "--listen-access", addr(1), "--listen-terminal", addr(2), "--listen-ops", addr(3),
			"--log-format", "json", "--log-level", "info",
			// The limiter runs (its cost is measured) but never limits.
			"--rate-limit", fmt.Sprint(serverRateLimit), "--rate-burst", fmt.Sprint(serverRateLimit),
			// --streams M follows with one client.
			"--streams-per-client", fmt.Sprint(MaxClients),
			"--sqlite-synchronous", o.Synchronous)
		if e.dataDir != "" {
			args = append(args, "--data", e.dataDir)
		}
		if o.ProfileDir != "" {
			args = append(args, "--pprof")
		}
		if e.webhookReceiver() {
			// The receiver listens on loopback.
			args = append(args, "--webhook-allow-private")
		}
		args = append(args, o.ServerArgs...)
		e.logf("starting the server: %s %s", filepath.Base(o.Exe), strings.Join(args, " "))
		c, err := startChild(o.Exe, args, extra, filepath.Join(e.dir, "server.log"))
		if err != nil {
			return err
		}
		e.srv = &serverProc{kind: "child", child: c, pid: c.cmd.Process.Pid,
			online: "http://" + addr(0), terminal: "ws://" + addr(2), ops: "http://" + addr(3)}
		if lastErr = c.waitReady(ctx, e.srv.ops+"/readyz", 60*time.Second); lastErr == nil {
			return e.getToken(ctx)
		}
		c.stop(5 * time.Second)
		e.srv = nil
		if !strings.Contains(c.logTail(), "address already in use") {
			break
		}
	}
	return lastErr
}

// freePorts returns n free TCP ports of the loopback interface.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady waits until u answers 200, the child exits, or timeout.
func (c *child) waitReady(ctx context.Context, u string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := probe(ctx, u)
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("the server exited (%v):\n%s", c.err, c.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the server is not ready within %s: %v\n%s", timeout, err, c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func probe(ctx context.Context, u string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// serverRateLimit is the server's rate limit per API client during a
// run: far above any rate here, so the limiter's cost is in the figures but
// it never answers 429.
const serverRateLimit = 1000000

// getToken takes an access token with the client credentials (unless the
// options gave one).
func (e *env) getToken(ctx context.Context) error {
	if e.token != "" {
		return nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}}
	req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.online+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("token: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		return fmt.Errorf("token: no access_token in the answer")
	}
	e.token = tok.AccessToken
	return nil
}

// authHeaders are the Online API's authentication headers, as pairs.
func (e *env) authHeaders() []string {
	return []string{"Accept", "application/json", "Authorization", "Bearer " + e.token, "Ocp-Apim-Subscription-Key", e.key}
}

// child is a process of the same binary: the server or a baseline server.
type child struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// childEnv is this process's environment without INSTORE_ variables (they
// would configure the child's flags), plus extra.
func childEnv(extra []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INSTORE_") && !strings.HasPrefix(kv, "INSTORE_TEST_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// startChild starts exe with args; its output goes to logPath.
func startChild(exe string, args, extraEnv []string, logPath string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = childEnv(extraEnv)
	cmd.Stdout, cmd.Stderr = f, f
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	c := &child{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// waitListening reads the child's JSON log until it has logged the address
// of each named listener ({"msg":"listening","surface":...,"addr":...}).
func (c *child) waitListening(names []string, timeout time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		addrs := map[string]string{}
		if f, err := os.Open(c.logPath); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				var l struct{ Msg, Surface, Addr string }
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" {
					addrs[l.Surface] = l.Addr
				}
			}
			f.Close()
		}
		all := true
		for _, n := range names {
			all = all && addrs[n] != ""
		}
		if all {
			return addrs, nil
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("the child exited (%v) before listening:\n%s", c.err, c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the child did not listen within %s:\n%s", timeout, c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *child) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop ends the child with SIGTERM, then SIGKILL after timeout.
func (c *child) stop(timeout time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// webhookReceiver reports whether the run's webhooks go to the receiver
// of this process (on loopback).
func (e *env) webhookReceiver() bool {
	return e.o.Webhooks > 0 || e.scenario == WebhooksScenario
}

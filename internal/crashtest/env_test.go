package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the checks and a fresh schema
	_ "modernc.org/sqlite"             // the "sqlite" driver, for the checks

	"github.com/instore-dev/instore/internal/pgtest"
)

// The crash tests' environment: a store provisioned with `instore admin`,
// the server and its terminals started, and the store opened for the checks.

// freshPostgres returns a URL of a new schema of the test database, or ""
// when INSTORE_TEST_DATABASE_URL is unset.
func freshPostgres(t *testing.T) string { return pgtest.Schema(t, "crash") }

// startTerminals starts e.set.terminals `instore terminal` processes on the
// gateway URL gw, the i-th with serial(i, total) and secrets[i], and links
// each by the code it shows.
func (e *crashEnv) startTerminals(t *testing.T, ctx context.Context, gw string, secrets []string, total int) {
	t.Helper()
	for i := range e.set.terminals {
		tp, err := startTerminal(e.bin, e.dir, gw, serial(i, total), secrets[i], cardDelays[i%len(cardDelays)])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tp.p.kill)
		e.procs = append(e.procs, tp)
		code, err := tp.linkCode(ctx)
		if err != nil {
			t.Fatalf("terminal %d: %v\n%s", i, err, tp.p.logTail(10))
		}
		e.link(ctx, i, code)
	}
}

// clusterNeeds skips a cluster test (named name) under -short, without
// PostgreSQL or without HAProxy, and returns the database URL and the
// path of haproxy.
func clusterNeeds(t *testing.T, name, whatItDoes string) (dbURL, haproxy string) {
	t.Helper()
	if testing.Short() {
		t.Skip("the " + name + " builds the binary and " + whatItDoes + "; run it without -short")
	}
	dbURL = freshPostgres(t)
	if dbURL == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is not set; the " + name + " needs PostgreSQL")
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (apt-get install haproxy); the " + name + " needs a real load balancer")
	}
	return dbURL, haproxy
}

// crashEnv is one store's run: the server, its terminals, the ECR.
type crashEnv struct {
	t        *testing.T
	set      settings
	bin, dir string
	dbURL    string // PostgreSQL; "" for SQLite in dir
	db       *sql.DB
	srv      *server
	terms    []string // terminal IDs, by index; the last is the raw terminal's
	procs    []*terminalProc
	raw      *rawTerminal
	ecr      *ecr
	led      *ledger
	// serveArgs are more flags of `instore serve` (setup).
	serveArgs []string
	// reported holds the findings about a transaction already reported,
	// so that a later check does not repeat them.
	reported map[string]bool
}

// newCrashEnv returns the run of bin on the store at dbURL (PostgreSQL;
// "" for SQLite in a temporary directory), serve run with more flags
// serveArgs; nothing is started yet.
func newCrashEnv(t *testing.T, set settings, bin, dbURL string, serveArgs ...string) *crashEnv {
	return &crashEnv{t: t, set: set, bin: bin, dir: t.TempDir(), dbURL: dbURL, led: newLedger(), reported: map[string]bool{}, serveArgs: serveArgs}
}

// seeded returns the random source of the seed's stream first on SQLite,
// first+1 on PostgreSQL: each crash test has streams of its own, so that
// one seed repeats every test's kill moments.
func (e *crashEnv) seeded(first uint64) *mrand.Rand {
	if e.postgres() {
		first++
	}
	return mrand.New(mrand.NewPCG(e.set.seed, first))
}

// first reports whether a finding about a transaction is new.
func (e *crashEnv) first(finding, ref string) bool {
	k := finding + " " + ref
	if e.reported[k] {
		return false
	}
	e.reported[k] = true
	return true
}

func (e *crashEnv) postgres() bool { return e.dbURL != "" }

// storeEnv is the environment that points a command at the store.
func (e *crashEnv) storeEnv() []string {
	if e.postgres() {
		// Not on the command line, where it would show a password.
		return []string{"INSTORE_DATABASE_URL=" + e.dbURL}
	}
	return []string{"INSTORE_DATA=" + filepath.Join(e.dir, "data")}
}

// accountIDs matches the identifiers a message must not show in clear.
var accountIDs = regexp.MustCompile(`\b(mer|cus|cli|key)_[0-9A-Za-z]+`)

// admin runs `instore admin --json` and decodes its output.
func (e *crashEnv) admin(out any, args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"admin", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), e.storeEnv()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("instore admin %s: %v\n%s", args[0], err, accountIDs.ReplaceAllString(stderr.String(), "${1}_…"))
	}
	if err := json.Unmarshal(b, out); err != nil {
		e.t.Fatalf("instore admin %s output: %v", args[0], err)
	}
}

// account is what provision made: the ECR's credentials and the devices'
// secrets, by index (e.terms holds their terminal IDs).
type account struct {
	clientID, clientSecret, key string
	secrets                     []string
}

// provision makes, with `instore admin`, a customer, a merchant, its Online
// API credentials and n terminal IDs with a device each.
func (e *crashEnv) provision(n int) account {
	var cus struct {
		ID string `json:"customerId"`
	}
	e.admin(&cus, "customer", "create", "--name", "Crash AB")
	var mer struct {
		ID string `json:"merchantId"`
	}
	e.admin(&mer, "merchant", "create", "--customer", cus.ID, "--name", "Crash AB Kungsgatan")
	var cli struct {
		ID     string `json:"clientId"`
		Secret string `json:"clientSecret"`
	}
	e.admin(&cli, "client", "create", "--surface", "online", "--merchant", mer.ID)
	var key struct {
		Key string `json:"subscriptionKey"`
	}
	e.admin(&key, "key", "create", "--surface", "online", "--merchant", mer.ID)
	var terms []struct {
		ID string `json:"terminalId"`
	}
	e.admin(&terms, "terminal", "add", "--merchant", mer.ID, "--count", strconv.Itoa(n))
	acc := account{clientID: cli.ID, clientSecret: cli.Secret, key: key.Key, secrets: make([]string, len(terms))}
	for i := range terms {
		var dev struct {
			Secret string `json:"deviceSecret"`
		}
		e.admin(&dev, "device", "add", "--serial", serial(i, len(terms)), "--model", "countertop", "--customer", cus.ID)
		acc.secrets[i] = dev.Secret
		e.terms = append(e.terms, terms[i].ID)
	}
	return acc
}

// setup provisions the store with `instore admin`, starts the server and
// the terminals and links them through the API.
func (e *crashEnv) setup(ctx context.Context) {
	acc := e.provision(e.set.terminals + 1)
	e.startServer(ctx, acc)
	e.startTerminals(e.t, ctx, e.srv.terminal(), acc.secrets, len(e.terms))
	e.startRaw(ctx, acc.secrets[len(e.terms)-1])
}

// startServer starts the server on the provisioned store, opens the store
// for the checks and gets the ECR its token.
func (e *crashEnv) startServer(ctx context.Context, acc account) {
	t := e.t
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = &server{bin: e.bin, dir: e.dir, ports: ports, env: e.storeEnv(), args: []string{
		"--ack-timeout", ackTimeout.String(), "--transaction-deadline", txDeadline.String(),
		"--idempotency-wait", idemWait.String(), "--rate-limit", "0",
		"--sqlite-synchronous", "FULL", "--log-format", "json",
	}}
	e.srv.args = append(e.srv.args, e.serveArgs...)
	t.Cleanup(func() {
		if e.srv.p != nil {
			e.srv.p.kill()
		}
	})
	if err := e.srv.start(ctx); err != nil {
		t.Fatal(err)
	}
	e.db = e.openDB()
	tok, err := token(ctx, e.srv.online(), acc.clientID, acc.clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	e.ecr = newECR(e.srv.online(), acc.key, tok, e.led)
}

// startRaw runs the raw terminal, the last provisioned device (its device
// secret secret), and links it.
func (e *crashEnv) startRaw(ctx context.Context, secret string) {
	t := e.t
	last := len(e.terms) - 1
	rawCtx, stopRaw := context.WithCancel(context.Background())
	e.raw = newRawTerminal(e.srv.terminal(), serial(last, len(e.terms)), secret)
	var rawDone sync.WaitGroup
	rawDone.Add(1)
	go func() {
		defer rawDone.Done()
		e.raw.run(rawCtx)
	}()
	t.Cleanup(func() {
		stopRaw()
		rawDone.Wait()
	})
	code, err := e.raw.linkCode(ctx)
	if err != nil {
		t.Fatalf("the raw terminal: %v", err)
	}
	e.link(ctx, last, code)
}

// serial is the serial number of device i of n; the last is the raw
// terminal.
func serial(i, n int) string {
	if i == n-1 {
		return "CRASH-RAW"
	}
	return fmt.Sprintf("CRASH-%02d", i)
}

func (e *crashEnv) link(ctx context.Context, i int, code string) {
	body, _ := json.Marshal(map[string]string{"terminalId": e.terms[i], "linkCode": code})
	if a := e.ecr.do(ctx, "POST", "/in-store/api/v1/terminal/link", body, ""); a.err != nil || a.status != http.StatusOK {
		e.t.Fatalf("link terminal %d: %s", i, a)
	}
}

// openDB opens the store for the checks, beside the server.
func (e *crashEnv) openDB() *sql.DB {
	var db *sql.DB
	var err error
	if e.postgres() {
		db, err = sql.Open("pgx", e.dbURL)
	} else {
		db, err = sql.Open("sqlite", "file:"+filepath.Join(e.dir, "data", "instore.db")+"?_pragma=busy_timeout(10000)")
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

// terminalIndex names a terminal in messages by its index, never its ID.
func (e *crashEnv) terminalIndex(id string) int {
	for i, x := range e.terms {
		if x == id {
			return i
		}
	}
	return -1
}

// q writes a query's ? placeholders as the store's dialect wants them.
func (e *crashEnv) q(query string) string {
	if !e.postgres() {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the checks and a fresh schema
	_ "modernc.org/sqlite"             // the "sqlite" driver, for the checks

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The server's and terminals' time-outs, short so that a round's
// transactions end within seconds of a restart.
const (
	ackTimeout  = time.Second
	txDeadline  = 3 * time.Second
	idemWait    = 2 * time.Second
	defaultRuns = 3
	soakRuns    = 40
)

// cardDelays are the terminals' times to read a card, by index: with none,
// a purchase's life is mostly its POST, which a kill then often cuts; with
// one, transactions are PENDING when the server dies, and end after it
// restarts.
var cardDelays = []time.Duration{0, 300 * time.Millisecond, 100 * time.Millisecond}

// settings are the run's size, from the environment.
type settings struct {
	rounds, terminals int
	seed              uint64
	// A round's purchases run for a random time in [runMin, runMax) before
	// the kill.
	runMin, runMax time.Duration
	limit          time.Duration // the whole run of one store
}

func loadSettings(t *testing.T) settings {
	s := settings{rounds: defaultRuns, terminals: 3, runMin: 300 * time.Millisecond, runMax: 2 * time.Second}
	if os.Getenv("INSTORE_CRASH_SOAK") == "1" {
		s.rounds, s.terminals, s.runMax = soakRuns, 6, 8*time.Second
	}
	if v := os.Getenv("INSTORE_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("INSTORE_CRASH_ROUNDS=%q: want a number of rounds from 1", v)
		}
		s.rounds = n
	}
	s.seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("INSTORE_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("INSTORE_CRASH_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	// A round takes seconds; a stuck key adds keyBudget to its round.
	s.limit = 2*time.Minute + time.Duration(s.rounds)*(s.runMax+3*keyBudget)
	return s
}

// TestCrash kills a real `instore serve` with SIGKILL during concurrent
// purchases, restarts it on the same data, and checks the API's promises
// after each restart; then kills it at a chosen moment: after the terminal
// acknowledged a purchase, before the purchase's 201 was stored.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test builds the binary and kills it under load for about a minute; run it without -short")
	}
	set := loadSettings(t)
	t.Logf("seed %d (INSTORE_CRASH_SEED=%d repeats the kill moments), %d rounds, %d terminals", set.seed, set.seed, set.rounds, set.terminals)
	bin := buildInstore(t, t.TempDir())
	t.Run("sqlite", func(t *testing.T) {
		runCrash(t, set, bin, "")
	})
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		if u == "" {
			t.Skip("INSTORE_TEST_DATABASE_URL is not set")
		}
		runCrash(t, set, bin, u)
	})
}

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
	// reported holds the findings about a transaction already reported,
	// so that a later check does not repeat them.
	reported map[string]bool
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

func runCrash(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), set.limit)
	defer cancel()
	e := &crashEnv{t: t, set: set, bin: bin, dir: t.TempDir(), dbURL: dbURL, led: newLedger(), reported: map[string]bool{}}
	e.setup(ctx)
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	follower := e.follow(fctx)
	start := time.Now()
	stream := uint64(1) // one stream of the seed per store
	if e.postgres() {
		stream = 2
	}
	rng := mrand.New(mrand.NewPCG(set.seed, stream))
	for round := 1; round <= set.rounds; round++ {
		e.randomRound(ctx, round, rng)
		e.check(ctx, fmt.Sprintf("round %d", round))
	}
	e.ackedThenKilled(ctx, "frozen")
	if e.postgres() {
		e.ackedThenKilled(ctx, "locked")
	}
	e.unconfirmedKilled(ctx)
	e.check(ctx, "the end")
	e.checkStream(ctx, follower, stopFollowing)
	named, acked := e.led.known()
	t.Logf("%s: %d rounds and the chosen kills in %s; %d transactions named to the ECR, %d acknowledged (201)",
		e.backend(), set.rounds, time.Since(start).Round(time.Second), len(named), len(acked))
}

func (e *crashEnv) backend() string {
	if e.postgres() {
		return "postgres"
	}
	return "sqlite"
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
	t := e.t
	acc := e.provision(e.set.terminals + 1)
	secrets, terms := acc.secrets, e.terms
	cli := struct{ ID, Secret string }{acc.clientID, acc.clientSecret}
	key := struct{ Key string }{acc.key}

	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = &server{bin: e.bin, dir: e.dir, ports: ports, env: e.storeEnv(), args: []string{
		"--ack-timeout", ackTimeout.String(), "--transaction-deadline", txDeadline.String(),
		"--idempotency-wait", idemWait.String(), "--rate-limit", "0",
		"--sqlite-synchronous", "FULL", "--log-format", "json",
	}}
	t.Cleanup(func() {
		if e.srv.p != nil {
			e.srv.p.kill()
		}
	})
	if err := e.srv.start(ctx); err != nil {
		t.Fatal(err)
	}
	e.db = e.openDB()
	tok, err := token(ctx, e.srv.online(), cli.ID, cli.Secret)
	if err != nil {
		t.Fatal(err)
	}
	e.ecr = &ecr{base: e.srv.online(), subscriptionKey: key.Key, token: tok, led: e.led,
		client: &http.Client{Timeout: 30 * time.Second}}

	e.startTerminals(t, ctx, e.srv.terminal(), secrets, len(terms))
	rawCtx, stopRaw := context.WithCancel(context.Background())
	e.raw = newRawTerminal(e.srv.terminal(), serial(len(terms)-1, len(terms)), secrets[len(terms)-1])
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
	e.link(ctx, len(terms)-1, code)
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

// randomRound runs a worker per terminal process, each paying one purchase
// after another with a key of its own, kills the server at a random moment
// and starts it again on the same data while they go on, then lets each
// worker finish the purchase it is in and stops them.
func (e *crashEnv) randomRound(ctx context.Context, round int, rng *mrand.Rand) {
	phase, stop := context.WithCancel(ctx)
	wg, counts := e.startWorkers(ctx, phase, round, rng)
	run := e.set.runMin + time.Duration(rng.Int64N(int64(e.set.runMax-e.set.runMin)))
	down := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
	sleep(ctx, run)
	e.srv.kill9()
	sleep(ctx, down)
	if err := e.srv.start(ctx); err != nil {
		stop()
		e.t.Fatalf("round %d: restart: %v", round, err)
	}
	stop()
	wg.Wait()
	total := map[string]int{}
	for _, c := range counts {
		for k, n := range c {
			total[k] += n
		}
	}
	e.t.Logf("%s round %d: SIGKILL after %s of purchases, %s down; purchases: %v", e.backend(), round,
		run.Round(time.Millisecond), down.Round(time.Millisecond), total)
}

// startWorkers starts a worker per terminal (see work), each with its own
// random source seeded from rng, and returns what to wait on and each
// worker's counts.
func (e *crashEnv) startWorkers(ctx, phase context.Context, round int, rng *mrand.Rand) (*sync.WaitGroup, []map[string]int) {
	var wg sync.WaitGroup
	counts := make([]map[string]int, len(e.procs))
	for i := range e.procs {
		wg.Add(1)
		seed := rng.Uint64()
		counts[i] = map[string]int{}
		go func() {
			defer wg.Done()
			e.work(ctx, phase, round, i, mrand.New(mrand.NewPCG(seed, 1)), counts[i])
		}()
	}
	return &wg, counts
}

// work pays purchases on terminal i until phase ends; the one in progress
// is finished under ctx.
func (e *crashEnv) work(ctx, phase context.Context, round, i int, rng *mrand.Rand, counts map[string]int) {
	for n := 0; phase.Err() == nil; n++ {
		key := fmt.Sprintf("r%d-t%d-%d", round, i, n)
		// Amounts ending in 00: approved after the terminal's card delay.
		out := e.ecr.purchase(ctx, i, e.terms[i], 100*(1+rng.Int64N(900)), key)
		counts[out.kind]++
		switch out.kind {
		case "acked":
			st, ok := e.ecr.final(ctx, out.ref)
			if !ok {
				e.led.violation("key %s: its transaction %s is not final within %s", key, out.ref, keyBudget)
			} else if st == instore.StatusTerminalIsBusy {
				counts["busy"]++ // reported by check (checkBusy)
			}
		default:
			// Busy, offline while reconnecting, or given up: a new key
			// after a pause.
			sleep(ctx, retryPause)
		}
	}
}

// storedTx is a transaction as the store holds it.
type storedTx struct {
	id, terminalID string
	statusID       instore.TransactionStatus
	deadline       time.Time
}

func (e *crashEnv) transactions(ctx context.Context) []storedTx {
	rows, err := e.db.QueryContext(ctx, `SELECT id, terminal_id, status_id, deadline_at FROM transactions WHERE type = 'PURCHASE'`)
	if err != nil {
		e.t.Fatalf("read the transactions: %v", err)
	}
	defer rows.Close()
	var out []storedTx
	for rows.Next() {
		var tx storedTx
		var deadline sql.NullInt64
		if err := rows.Scan(&tx.id, &tx.terminalID, &tx.statusID, &deadline); err != nil {
			e.t.Fatalf("read the transactions: %v", err)
		}
		if deadline.Valid {
			tx.deadline = time.UnixMicro(deadline.Int64)
		}
		out = append(out, tx)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("read the transactions: %v", err)
	}
	return out
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

// check verifies the promises on the quiet system after a restart:
// nothing acknowledged lost, no key with two transactions (and no
// transaction no key's answer named), no transaction PENDING past its
// deadline, and every terminal takes a payment.
func (e *crashEnv) check(ctx context.Context, label string) {
	var bad []string
	bad = append(bad, e.led.takeViolations()...)

	// The server acts on deadlines that passed while it was down as it
	// starts; give it a moment.
	sleep(ctx, time.Until(e.srv.upSince.Add(2*time.Second)))
	stored := e.transactions(ctx)
	byID := map[string]storedTx{}
	now := time.Now()
	for _, tx := range stored {
		byID[tx.id] = tx
		if tx.statusID == instore.StatusPending && !tx.deadline.IsZero() && tx.deadline.Before(now.Add(-time.Second)) && e.first("pending", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s on terminal %d is PENDING %s past its deadline",
				tx.id, e.terminalIndex(tx.terminalID), now.Sub(tx.deadline).Round(time.Millisecond)))
		}
	}

	named, acked := e.led.known()
	for _, ref := range acked {
		if _, ok := byID[ref]; !ok && e.first("lost", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s was acknowledged to the ECR (201, key %s) and is not in the store", ref, named[ref]))
			continue
		}
		if a := e.ecr.do(ctx, "GET", "/in-store/api/v1/transaction/"+ref, nil, ""); (a.err != nil || a.status != http.StatusOK || a.ref != ref) && e.first("get", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s was acknowledged to the ECR (201, key %s); GET answers %s", ref, named[ref], a))
		}
	}
	for ref, key := range named {
		if _, ok := byID[ref]; !ok && !containsString(acked, ref) && e.first("lost", ref) {
			bad = append(bad, fmt.Sprintf("transaction %s named to key %s is not in the store", ref, key))
		}
	}
	// Every purchase here carries a key: a transaction no answer named was
	// created by a key whose retries never learned of it, or is a key's
	// second.
	for _, tx := range stored {
		if _, ok := named[tx.id]; !ok && e.first("unnamed", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s on terminal %d (status %d) is named by no answer the ECR got for its keys (keys left without a definitive answer so far: %s)",
				tx.id, e.terminalIndex(tx.terminalID), tx.statusID, strings.Join(e.led.stuckSoFar(), ", ")))
		}
	}
	bad = append(bad, e.checkKeyColumn(ctx, named)...)
	bad = append(bad, e.checkUsable(ctx, label)...)
	bad = append(bad, e.checkBusy(ctx)...)
	bad = append(bad, e.led.takeViolations()...)
	for _, b := range bad {
		e.t.Errorf("%s, %s (INSTORE_CRASH_SEED=%d): %s", e.backend(), label, e.set.seed, b)
	}
	if len(bad) > 0 {
		if w := e.srv.warnings(10); w != "" {
			e.t.Logf("the server's warnings and errors since its start:\n%s", w)
		}
	}
}

// checkKeyColumn checks, once the store keeps the transaction each
// Idempotency-Key created (idempotency_keys.transaction_id), that every
// transaction is the one of exactly the key the ECR's answers tied it to.
func (e *crashEnv) checkKeyColumn(ctx context.Context, named map[string]string) []string {
	rows, err := e.db.QueryContext(ctx, `SELECT key, transaction_id FROM idempotency_keys WHERE transaction_id IS NOT NULL`)
	if err != nil {
		return nil // no such column yet
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var key, ref string
		if err := rows.Scan(&key, &ref); err != nil {
			return []string{fmt.Sprintf("read idempotency_keys: %v", err)}
		}
		if k, ok := named[ref]; ok && k != key {
			bad = append(bad, fmt.Sprintf("the store ties transaction %s to key %s, the ECR's answers to key %s", ref, key, k))
		}
	}
	return bad
}

// checkBusy finds the sales a terminal answered TERMINAL_IS_BUSY. The
// service sent each to a terminal it counted idle (no transaction
// PENDING on it); the terminals here have no user of their own and no
// update, so the terminal was still running a transaction the service had
// ended (a cancel overtaken by the next command: internal/service/owed.go). There must be
// none.
func (e *crashEnv) checkBusy(ctx context.Context) []string {
	var bad []string
	for _, tx := range e.busySales(ctx) {
		if e.first("busy", tx.id) {
			bad = append(bad, fmt.Sprintf("transaction %s was answered TERMINAL_IS_BUSY by terminal %d, which the service counted idle",
				tx.id, e.terminalIndex(tx.terminalID)))
		}
	}
	return bad
}

// busySales returns the transactions that ended TERMINAL_IS_BUSY.
func (e *crashEnv) busySales(ctx context.Context) []storedTx {
	var out []storedTx
	for _, tx := range e.transactions(ctx) {
		if tx.statusID == instore.StatusTerminalIsBusy {
			out = append(out, tx)
		}
	}
	return out
}

// checkUsable pays one purchase on every terminal: each must end APPROVED.
// A terminal still busy with a transaction of before the kill, or still
// reconnecting, is asked again with a new key for up to keyBudget.
func (e *crashEnv) checkUsable(ctx context.Context, label string) []string {
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	slug := strings.ReplaceAll(label, " ", "-")
	for i := range e.terms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			for n := 0; ; n++ {
				out := e.ecr.purchase(ctx, i, e.terms[i], 5000, fmt.Sprintf("usable-%s-t%d-%d", slug, i, n))
				if out.kind == "acked" {
					st, ok := e.ecr.final(ctx, out.ref)
					if !ok || st != instore.StatusApproved {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("terminal %d: a purchase after the restart ended with status %d (final: %t), want APPROVED", i, st, ok))
						mu.Unlock()
					}
					return
				}
				if time.Since(start) > keyBudget || ctx.Err() != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("terminal %d takes no purchase within %s of the check; the last answer: %s", i, keyBudget, out.last))
					mu.Unlock()
					return
				}
				sleep(ctx, 200*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return bad
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ackedThenKilled kills the server after the terminal acknowledged a
// purchase and before the purchase's 201 was stored, then retries the
// purchase with its key: the answer must be about the same transaction,
// at once and after the record would count as abandoned, and never a
// second transaction.
//
// "frozen" (both stores): the server is stopped (SIGSTOP) as the raw
// terminal receives the command, the terminal sends its ack, and the
// server is killed: the terminal acknowledged, the server stored neither
// the ack nor the 201. "locked" (PostgreSQL): the test holds the row lock
// of the key's record, the terminal acknowledges, the server commits the
// ack and blocks storing the 201, and is killed there.
func (e *crashEnv) ackedThenKilled(ctx context.Context, variant string) {
	t := e.t
	label := "the kill between the ack and the 201 (" + variant + ")"
	rawTerm := len(e.terms) - 1
	key := "acked-then-killed-" + variant
	before := e.countOn(ctx, e.terms[rawTerm])

	held := e.raw.hold()
	first := make(chan answer, 1)
	body, _ := json.Marshal(map[string]any{"terminalId": e.terms[rawTerm], "amount": 4200, "currency": "SEK"})
	go func() { first <- e.ecr.do(ctx, "POST", "/in-store/api/v1/purchase", body, key) }()
	var ref string
	select {
	case env := <-held:
		ref = env.Ref
		if variant == "locked" {
			e.ackLocked(ctx, env, key)
			break
		}
		if err := e.srv.freeze(); err != nil {
			t.Fatal(err)
		}
		if err := e.raw.ack(env); err != nil {
			t.Fatalf("ack: %v", err)
		}
		e.srv.kill9()
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: the command never reached the raw terminal", label)
	}
	if a := <-first; a.err == nil {
		t.Errorf("%s: the first request was answered %s; the server was to die before", label, a)
	}
	var status sql.NullInt64
	if err := e.db.QueryRowContext(ctx, e.q(`SELECT status_code FROM idempotency_keys WHERE key = ?`), key).Scan(&status); err != nil {
		t.Fatalf("%s: the key's record: %v", label, err)
	}
	if status.Valid {
		t.Fatalf("%s: the key's record holds a response (%d): the kill came too late for this round", label, status.Int64)
	}
	// The terminal goes on with its payment: approved, resent until
	// confirmed, as the protocol has it.
	e.raw.finish(ref, instore.StatusApproved)
	if err := e.srv.start(ctx); err != nil {
		t.Fatalf("%s: restart: %v", label, err)
	}

	retry := func(when string) {
		out := e.ecr.purchaseQuiet(ctx, rawTerm, e.terms[rawTerm], 4200, key)
		switch {
		case out.kind == "stuck":
			t.Errorf("%s (INSTORE_CRASH_SEED=%d): the retry %s got no answer about transaction %s within %s; the last: %s",
				e.backend(), e.set.seed, when, ref, keyBudget, out.last)
		case out.ref != ref:
			t.Errorf("%s, %s: the retry %s answered %s about transaction %q, want %s: never a second transaction",
				e.backend(), label, when, out.last, out.ref, ref)
		}
	}
	retry("after the restart")
	// Later: the record would count as abandoned (5 minutes); aged here
	// rather than waited for.
	if _, err := e.db.ExecContext(ctx, e.q(`UPDATE idempotency_keys SET created_at = created_at - ? WHERE key = ?`), (6 * time.Minute).Microseconds(), key); err != nil {
		t.Fatalf("age the key's record: %v", err)
	}
	retry("6 minutes later")
	if got := e.countOn(ctx, e.terms[rawTerm]); got != before+1 {
		t.Errorf("%s, %s: %d purchases on the terminal, want %d: one for the key", e.backend(), label, got-before, 1)
	}
	e.check(ctx, label)
}

// countOn counts the purchases in the store on a terminal.
func (e *crashEnv) countOn(ctx context.Context, terminalID string) int {
	n := 0
	for _, tx := range e.transactions(ctx) {
		if tx.terminalID == terminalID {
			n++
		}
	}
	return n
}

// ackLocked acknowledges a held command while the test holds the row lock
// of the key's Idempotency-Key record (PostgreSQL): the server commits the
// acknowledgement and then blocks storing the 201 on the lock; it is killed
// there, and the store connection it blocked on is ended before the lock is
// released, so that the 201 is never stored.
func (e *crashEnv) ackLocked(ctx context.Context, cmd protocol.Envelope, key string) {
	t := e.t
	lock, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var pid int
	if err := lock.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `SELECT 1 FROM idempotency_keys WHERE key = $1 FOR UPDATE`, key); err != nil {
		t.Fatalf("lock the key's record: %v", err)
	}
	if err := e.raw.ack(cmd); err != nil {
		t.Fatalf("ack: %v", err)
	}
	e.waitAcknowledged(ctx, cmd.Ref)
	// The server's store connection waiting on the lock: the 201 is ready.
	blocked := `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`
	testwait.For(t, "the server to try to store the 201 after the acknowledgement", func() bool {
		var n int
		if err := e.db.QueryRowContext(ctx, `SELECT count(*) FROM (`+blocked+`) b`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	e.srv.kill9()
	if _, err := e.db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM (`+blocked+`) b`, pid); err != nil {
		t.Fatal(err)
	}
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

// waitAcknowledged waits until the store holds the acknowledgement of ref.
func (e *crashEnv) waitAcknowledged(ctx context.Context, ref string) {
	testwait.For(e.t, "the server to store the acknowledgement of "+ref, func() bool {
		var at sql.NullInt64
		err := e.db.QueryRowContext(ctx, e.q(`SELECT acknowledged_at FROM transactions WHERE id = ?`), ref).Scan(&at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			e.t.Fatalf("read the acknowledgement: %v", err)
		}
		return at.Valid
	})
}

// unconfirmedKilled: two sales on the raw terminal ask for ECR confirmation
// within 10 s and are approved; the ECR confirms one. The server is killed
// (SIGKILL) before either window ends and started again only after both
// passed: the unconfirmed sale must still be reversed (REVERSED,
// AUTO_REVERSED, a CONFIRM_TIMEOUT reversal reaches the terminal), the
// confirmed one must stay APPROVED. No timer outlives the process; the
// store's deadline is the record.
func (e *crashEnv) unconfirmedKilled(ctx context.Context) {
	t := e.t
	label := "the kill during the confirmation windows"
	rawTerm := len(e.terms) - 1
	const window = 10 * time.Second
	sale := func(key string) string {
		body, _ := json.Marshal(map[string]any{"terminalId": e.terms[rawTerm], "amount": 4300, "currency": "SEK",
			"confirmWithinSeconds": int(window / time.Second)})
		for start := time.Now(); time.Since(start) < keyBudget; sleep(ctx, retryPause) {
			a := e.ecr.do(ctx, "POST", "/in-store/api/v1/purchase", body, key)
			e.led.answer(key, rawTerm, a)
			if a.err == nil && a.status == http.StatusCreated {
				if st, ok := e.ecr.final(ctx, a.ref); !ok || st != instore.StatusApproved {
					t.Fatalf("%s: sale %s ended %d (%v), want APPROVED", label, a.ref, st, ok)
				}
				return a.ref
			}
			if !a.retry() && a.code != "WP09" {
				t.Fatalf("%s: purchase answered %s %s", label, a, a.body)
			}
		}
		t.Fatalf("%s: no purchase within %s", label, keyBudget)
		return ""
	}
	kept, dropped := sale("confirm-kept"), sale("confirm-dropped")
	if a := e.ecr.do(ctx, "POST", "/in-store/api/v1/transaction/"+kept+"/confirm", nil, "confirm-kept-confirm"); a.status != http.StatusOK {
		t.Fatalf("%s: confirm answered %s %s", label, a, a.body)
	}
	var deadline int64
	if err := e.db.QueryRowContext(ctx, e.q(`SELECT confirm_deadline FROM transactions WHERE id = ? AND confirm_state = 'PENDING'`), dropped).Scan(&deadline); err != nil {
		t.Fatalf("%s: the unconfirmed sale's deadline: %v", label, err)
	}
	e.srv.kill9()
	sleep(ctx, time.Until(time.UnixMicro(deadline))+time.Second)
	if err := e.srv.start(ctx); err != nil {
		t.Fatalf("%s: restart: %v", label, err)
	}
	for start := time.Now(); e.raw.reversal(dropped) == ""; sleep(ctx, 50*time.Millisecond) {
		if time.Since(start) > keyBudget {
			t.Fatalf("%s: the unconfirmed sale %s was never reversed on the terminal", label, dropped)
		}
	}
	if r := e.raw.reversal(dropped); r != instore.ReversalConfirmTimeout {
		t.Errorf("%s: reversal reason %q, want %s", label, r, instore.ReversalConfirmTimeout)
	}
	state := func(ref string) (status instore.TransactionStatus, confirm instore.ConfirmState) {
		if err := e.db.QueryRowContext(ctx, e.q(`SELECT status_id, confirm_state FROM transactions WHERE id = ?`), ref).Scan(&status, &confirm); err != nil {
			t.Fatalf("%s: %s: %v", label, ref, err)
		}
		return status, confirm
	}
	if st, c := state(dropped); st != instore.StatusReversed || c != instore.ConfirmAutoReversed {
		t.Errorf("%s: the unconfirmed sale is %d %s, want REVERSED AUTO_REVERSED", label, st, c)
	}
	if st, c := state(kept); st != instore.StatusApproved || c != instore.ConfirmConfirmed || e.raw.reversal(kept) != "" {
		t.Errorf("%s: the confirmed sale is %d %s (reversal %q), want APPROVED CONFIRMED and no reversal", label, st, c, e.raw.reversal(kept))
	}
	e.check(ctx, label)
}

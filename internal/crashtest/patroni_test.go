package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testwait"
)

// TestPatroniFailover runs the service on a PostgreSQL pair run by Patroni
// with etcd (patroni_env_test.go): a primary and a synchronous standby,
// reached through a multi-host URL with target_session_attrs=read-write.
// During purchases on every terminal it stops the primary's WAL sender
// for a second, then kills the primary's node with SIGKILL (its Patroni,
// its postmaster and every backend, as a machine dies); Patroni promotes
// the standby. INSTORE_PATRONI_ASYNC=1 runs the pair without synchronous
// replication, a control: the checks must then fail. Then the crash test's checks: no
// purchase acknowledged to the ECR lost, no key with two transactions,
// none PENDING past its deadline, every terminal purchasing again. While
// no primary is reachable the service answers 503 with Retry-After and a
// problem body, never 500 (every answer the ECR got is checked). The time
// from the kill to the promotion, and to the first purchase acknowledged
// through the new primary, is logged (docs/benchmarks.md), not asserted.
//
// It runs twice: one node reaching the primary through a multi-host URL;
// then three nodes behind HAProxy (deploy/haproxy/instore.cfg, as
// TestCluster runs them) reaching it through another HAProxy, whose health
// check asks Patroni (skipped without haproxy). While no primary is
// reachable, every node answers /readyz 503, so the first HAProxy has no
// node to send a request to and answers its own 503, the same problem with
// Retry-After (its http-error).
func TestPatroniFailover(t *testing.T) {
	pgBin := patroniNeeds(t)
	bin := buildInstore(t, t.TempDir())
	t.Run("multihost", func(t *testing.T) { runPatroniFailover(t, bin, pgBin, "") })
	t.Run("cluster-haproxy", func(t *testing.T) {
		haproxy, err := exec.LookPath("haproxy")
		if err != nil {
			t.Skip("haproxy is not installed (apt-get install haproxy)")
		}
		runPatroniFailover(t, bin, pgBin, haproxy)
	})
}

// runPatroniFailover is one run of TestPatroniFailover with the instore
// binary bin: one node on a multi-host URL, or, when haproxy is not "",
// three nodes behind it on the database through it.
func runPatroniFailover(t *testing.T, bin, pgBin, haproxy string) {
	set := loadSettings(t)
	t.Logf("seed %d (INSTORE_CRASH_SEED=%d repeats the kill moment), %d terminals", set.seed, set.seed, set.terminals)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	ha := startPatroni(t, ctx, pgBin)
	standby := "synchronous standby"
	if patroniAsync() {
		standby = "asynchronous standby: INSTORE_PATRONI_ASYNC=1, a control the checks must fail"
	}
	t.Logf("Patroni pair up (leader and %s) in %s", standby, time.Since(start).Round(100*time.Millisecond))
	dbURL := ha.url
	if haproxy != "" {
		dbURL = ha.viaHAProxy(ctx, haproxy)
	}

	e := &crashEnv{t: t, set: set, bin: bin, dir: t.TempDir(), dbURL: dbURL, led: newLedger(), reported: map[string]bool{}}
	seen := &answers{}
	if haproxy == "" {
		e.setup(ctx)
	} else {
		e.startCluster(ctx, haproxy)
	}
	// A key is retried across the whole failover (Patroni's ttl and more).
	e.ecr.budget = 90 * time.Second
	e.ecr.seen = seen.add
	var standbys, syncCommit string
	if err := e.db.QueryRowContext(ctx, "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')").Scan(&standbys, &syncCommit); err != nil ||
		(standbys == "" || syncCommit != "on") && !patroniAsync() {
		t.Fatalf("the primary has no synchronous standby, or commits do not wait for it (synchronous_standby_names %q, synchronous_commit %q, %v)", standbys, syncCommit, err)
	}

	rng := mrand.New(mrand.NewPCG(set.seed, 4))
	phase, stop := context.WithCancel(ctx)
	wg, counts := e.startWorkers(rng, func(i int, rng *mrand.Rand, counts map[string]int) {
		e.work(ctx, phase, 1, i, rng, counts)
	})
	run := 2*time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
	sleep(ctx, run)
	old := ha.primary(ctx)
	if old == nil {
		stop()
		t.Fatal("no member is primary before the kill")
	}
	// The worst moment for what was acknowledged: the standby has
	// received nothing for a second (the primary's WAL sender stopped).
	// With synchronous replication the commits of that second wait and are
	// never acknowledged; without it they are, and are lost.
	ha.freezeSender(old)
	sleep(ctx, time.Second)
	ha.killNode(old)
	// Taken once every process of the node is dead: a purchase created
	// after it was created on the new primary.
	killedAt := time.Now()
	var promoted time.Duration
	var notReady string // what /readyz said while no primary was reachable
	if !testwait.Until(60*time.Second, func() bool {
		if st, detail := readyz(ctx, e.srv); st == http.StatusServiceUnavailable && notReady == "" {
			notReady = detail
		}
		if p := ha.primary(ctx); p != nil && p != old {
			promoted = time.Since(killedAt)
			return true
		}
		return ctx.Err() != nil
	}) || promoted == 0 {
		stop()
		t.Fatalf("no standby promoted within 60 s of the kill:\n%s", ha.members[1].patroni.logTail(30))
	}
	first := e.firstAckAfter(ctx, killedAt, 60*time.Second)
	if !strings.Contains(notReady, "database: no primary reachable") {
		t.Errorf("/readyz while no primary was reachable: %q, want 503 saying database: no primary reachable", notReady)
	}
	if !testwait.Until(10*time.Second, func() bool { st, _ := readyz(ctx, e.srv); return st == http.StatusOK }) {
		t.Errorf("/readyz is not 200 again 10 s after the first purchase through the new primary")
	}
	// Purchases go on a moment through the new primary, then stop.
	sleep(ctx, 3*time.Second)
	stop()
	wg.Wait()
	seen.mu.Lock()
	seen.afterStop = len(seen.all)
	seen.mu.Unlock()

	e.check(ctx, "after the failover")
	// Each acknowledged purchase's timeline whole (a progress stage,
	// written with synchronous_commit off, may be lost: its version is
	// taken by the next change).
	(&cluster{e: e}).checkTimelines(ctx)
	seen.check(t)
	if first == 0 {
		t.Errorf("no purchase acknowledged through the new primary within 60 s of the kill")
	}
	named, acked := e.led.known()
	t.Logf("failover: %s of purchases, SIGKILL of the primary's node (%s); the standby promoted %s after the kill, the first purchase through it acknowledged %s after the kill (goal under 30 s)",
		run.Round(time.Millisecond), old.name, promoted.Round(100*time.Millisecond), first.Round(100*time.Millisecond))
	t.Logf("purchases: %v; %d transactions named to the ECR, %d acknowledged (201); answers: %s; whole test %s",
		sumCounts(counts), len(named), len(acked), seen.summary(), time.Since(start).Round(time.Second))
	t.Logf("the server's warnings and errors, by message: %s", logSummary(e.srv.warnings(1<<20)))
}

// logSummary counts JSON log lines by level and message.
func logSummary(lines string) string {
	n := map[string]int{}
	for _, l := range strings.Split(lines, "\n") {
		var v struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &v) == nil && v.Msg != "" {
			n[v.Level+" "+strconv.Quote(v.Msg)]++
		}
	}
	return countsString(n)
}

// countsString writes counts as "name: count" in name order.
func countsString(n map[string]int) string {
	var parts []string
	for k, c := range n {
		parts = append(parts, fmt.Sprintf("%s: %d", k, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// readyz is the server's readiness: the status and the problem's detail.
func readyz(ctx context.Context, s *server) (int, string) {
	st, b := httpGet(ctx, s.ops()+"/readyz")
	var p struct{ Detail string }
	json.Unmarshal(b, &p)
	return st, p.Detail
}

// firstAckAfter waits for the first purchase created after since and
// acknowledged by its terminal, and returns how long after since it was
// acknowledged (0: none within limit).
func (e *crashEnv) firstAckAfter(ctx context.Context, since time.Time, limit time.Duration) time.Duration {
	var first sql.NullInt64
	testwait.Until(limit, func() bool {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		e.db.QueryRowContext(qctx, `SELECT MIN(acknowledged_at) FROM transactions WHERE type = 'PURCHASE' AND created_at > $1`,
			since.UnixMicro()).Scan(&first)
		return first.Valid || ctx.Err() != nil
	})
	if !first.Valid {
		return 0
	}
	return time.UnixMicro(first.Int64).Sub(since)
}

// answers are every answer the ECR got: while no primary is reachable, a
// 503 problem with Retry-After, never a 500 or a 503 without them.
type answers struct {
	mu        sync.Mutex
	all       []answer
	afterStop int
}

func (s *answers) add(a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, a)
}

// check fails t for each kind of wrong answer (the first of each shown).
func (s *answers) check(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bad := map[string]answer{}
	for _, a := range s.all {
		switch {
		case a.err != nil:
		case a.status == http.StatusInternalServerError:
			bad["500"] = a
		case a.status == http.StatusServiceUnavailable && (a.retryAfter == "" || !a.problem):
			bad["503 without Retry-After or a problem body"] = a
		case a.status >= 500 && a.status != http.StatusServiceUnavailable && a.code != "WP25":
			bad[fmt.Sprint(a.status)] = a
		}
	}
	for what, a := range bad {
		t.Errorf("the ECR was answered %s during the failover: %s %s", what, a, a.body)
	}
}

// summary counts the answers by status ("network error" for none).
func (s *answers) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, a := range s.all[:s.afterStop] {
		k := fmt.Sprint(a.status)
		switch {
		case a.err != nil:
			k = "network error"
		case a.status == http.StatusServiceUnavailable && strings.Contains(a.detail, "No instore node is ready"):
			k += " (HAProxy's)"
		}
		n[k]++
	}
	return countsString(n)
}

package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestCluster runs three real `instore serve` nodes on one PostgreSQL
// database behind a real HAProxy (deploy/haproxy/instore.cfg, unchanged),
// with terminals as processes connected through the load balancer and ECRs
// that retry with their Idempotency-Keys. During the purchases it kills a
// node with SIGKILL (odd rounds) or stops it with SIGTERM as a rolling
// upgrade does (even rounds), round after round, and starts it again; then it checks
// the promises: no purchase acknowledged to the ECR lost, no key with two
// transactions, none PENDING past its deadline, every terminal taking a
// purchase again, no sale answered TERMINAL_IS_BUSY by a terminal the
// service counted idle (checkBusy: it still ran a sale the service had
// ended), and the timeline of every acknowledged purchase whole.
func TestCluster(t *testing.T) {
	u, haproxy := clusterNeeds(t, "cluster test", "kills nodes under load for about a minute")
	set := loadSettings(t)
	set.terminals = 6
	t.Logf("seed %d (INSTORE_CRASH_SEED=%d repeats the kill moments), %d rounds, %d terminals, 3 nodes", set.seed, set.seed, set.rounds, set.terminals)
	ctx, cancel := context.WithTimeout(context.Background(), set.limit)
	defer cancel()
	e := newCrashEnv(t, set, buildInstore(t, t.TempDir()), u)
	c := e.startCluster(ctx, haproxy)

	rng := mrand.New(mrand.NewPCG(set.seed, 3))
	start := time.Now()
	for round := 1; round <= set.rounds; round++ {
		c.round(ctx, round, rng)
		e.check(ctx, fmt.Sprintf("round %d", round))
	}
	c.checkTimelines(ctx)
	if c.moved == 0 {
		t.Errorf("no node killed held a terminal's session: the test proved no failover (INSTORE_CRASH_SEED=%d)", set.seed)
	}
	// Measured, not asserted (the machine is shared): docs/benchmarks.md.
	slices.Sort(c.failover)
	if n := len(c.failover); n > 0 {
		t.Logf("failover (a node's death to its terminals' next acknowledged purchase on another node), %d terminals: p50 %s, p99 %s, max %s",
			n, c.failover[n/2].Round(time.Millisecond), c.failover[(n*99)/100].Round(time.Millisecond), c.failover[n-1].Round(time.Millisecond))
	}
	named, acked := e.led.known()
	busy := len(e.busySales(ctx)) // each one failed its round's check
	t.Logf("cluster: %d rounds in %s; %d transactions named to the ECR, %d acknowledged (201); %d node kills; %d sales answered TERMINAL_IS_BUSY by a terminal the service counted idle",
		set.rounds, time.Since(start).Round(time.Second), len(named), len(acked), c.kills, busy)
}

// cluster is three nodes behind HAProxy.
type cluster struct {
	e     *crashEnv
	nodes []*server
	lb    *proc
	kills int
	// moved counts the terminal sessions the killed nodes held: each had
	// to fail over to another node; failover holds, for each, the time
	// from the kill to its first purchase created after it and
	// acknowledged by the terminal (through another node).
	moved    int
	failover []time.Duration
}

// startCluster provisions the database, starts three nodes and HAProxy in
// front of them, the terminals through the load balancer, and links them.
func (e *crashEnv) startCluster(ctx context.Context, haproxy string) *cluster {
	t := e.t
	acc := e.provision(e.set.terminals)
	c := &cluster{e: e}
	for i := range 3 {
		ports, err := freePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		n := &server{bin: e.bin, dir: filepath.Join(e.dir, fmt.Sprintf("node%d", i+1)), ports: ports, env: e.storeEnv(), args: []string{
			"--node-id", fmt.Sprintf("node%d", i+1),
			"--ack-timeout", ackTimeout.String(), "--transaction-deadline", txDeadline.String(),
			"--idempotency-wait", idemWait.String(), "--rate-limit", "0", "--log-format", "json",
			"--cluster-heartbeat", "200ms", "--cluster-dead-after", "1s", "--cluster-rescan", "1s",
			"--database-max-conns", "20",
		}}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if n.p != nil {
				n.p.kill()
			}
		})
		if err := n.start(ctx); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		c.nodes = append(c.nodes, n)
	}
	e.srv = c.nodes[0] // the checks wait for the last node started
	lbPorts, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"INSTORE_LB_ONLINE=127.0.0.1:" + strconv.Itoa(lbPorts[0]),
		"INSTORE_LB_GATEWAY=127.0.0.1:" + strconv.Itoa(lbPorts[1]),
	}
	for i, n := range c.nodes {
		p := fmt.Sprintf("INSTORE_NODE%d_", i+1)
		env = append(env, p+"ONLINE=127.0.0.1:"+strconv.Itoa(n.ports[0]), p+"GATEWAY=127.0.0.1:"+strconv.Itoa(n.ports[2]),
			p+"OPS_HOST=127.0.0.1", p+"OPS_PORT="+strconv.Itoa(n.ports[3]))
	}
	cfg, err := filepath.Abs(filepath.Join("..", "..", "deploy", "haproxy", "instore.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	// The deployed configuration unchanged, and a second file that gives
	// the test HAProxy's stats socket, to see its health checks mark the
	// nodes up.
	stats, sock := statsSocket(t)
	if c.lb, err = startProc("haproxy", haproxy, []string{"-db", "-f", cfg, "-f", stats}, env, filepath.Join(e.dir, "haproxy.log"), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.lb.kill)
	lbOnline := fmt.Sprintf("http://127.0.0.1:%d", lbPorts[0])
	waitListening(t, lbPorts, c.lb)
	waitServersUp(t, sock, 2*len(c.nodes), c.lb)

	tok, err := token(ctx, lbOnline, acc.clientID, acc.clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	e.ecr = newECR(lbOnline, acc.key, tok, e.led)
	e.db = e.openDB()
	gw := fmt.Sprintf("ws://127.0.0.1:%d/terminal/v1/connect", lbPorts[1])
	e.startTerminals(t, ctx, gw, acc.secrets, e.set.terminals)
	return c
}

// waitListening waits until the load balancer accepts on its ports.
func waitListening(t *testing.T, ports []int, lb *proc) {
	t.Helper()
	for _, port := range ports {
		testwait.For(t, fmt.Sprintf("haproxy to listen on %d", port), func() bool {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				conn.Close()
				return true
			}
			if lb.exited() {
				t.Fatalf("haproxy does not listen on %d:\n%s", port, lb.logTail(20))
			}
			return false
		})
	}
}

// waitServersUp waits until HAProxy's health checks (rise 2, every 500
// ms) mark n servers up.
func waitServersUp(t *testing.T, sock string, n int, lb *proc) {
	t.Helper()
	waitServers(t, sock, lb, fmt.Sprintf("haproxy's health checks to mark %d servers up", n), func(up, _ int) bool { return up >= n })
}

// waitServers waits until the servers' states HAProxy's stats socket tells
// ("show stat": a CSV line per server, its status the 18th field) satisfy
// ok, given how many are up and how many down.
func waitServers(t *testing.T, sock string, lb *proc, what string, ok func(up, down int) bool) {
	t.Helper()
	testwait.For(t, what, func() bool {
		if lb.exited() {
			t.Fatalf("haproxy exited:\n%s", lb.logTail(20))
		}
		conn, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("show stat\n")); err != nil {
			return false
		}
		out, _ := io.ReadAll(conn)
		up, down := 0, 0
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Split(line, ",")
			if len(f) <= 17 || f[1] == "FRONTEND" || f[1] == "BACKEND" || f[0] == "# pxname" {
				continue
			}
			switch {
			case strings.HasPrefix(f[17], "UP"):
				up++
			case strings.HasPrefix(f[17], "DOWN"):
				down++
			}
		}
		return ok(up, down)
	})
}

// statsSocket writes a second HAProxy configuration file that gives the
// test the stats socket (a short path: a socket's is at most 107 bytes),
// and returns the file and the socket.
func statsSocket(t *testing.T) (cfg, sock string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "hap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, cfg = filepath.Join(dir, "s"), filepath.Join(dir, "stats.cfg")
	if err := os.WriteFile(cfg, []byte("global\n    stats socket "+sock+" mode 600 level user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, sock
}

// failoverBound is how long after a node's death its terminals may take
// to purchase again on the others.
const failoverBound = 30 * time.Second

// round runs a worker per terminal, kills one node with SIGKILL at a random
// moment and starts it again after a random pause while they go on, then
// stops them.
func (c *cluster) round(ctx context.Context, round int, rng *mrand.Rand) {
	e := c.e
	phase, stop := context.WithCancel(ctx)
	wg, counts := e.startWorkers(rng, func(i int, rng *mrand.Rand, counts map[string]int) {
		e.work(ctx, phase, round, i, rng, counts)
	})
	victim := c.nodes[rng.IntN(len(c.nodes))]
	run := e.set.runMin + time.Duration(rng.Int64N(int64(e.set.runMax-e.set.runMin)))
	down := 200*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
	sleep(ctx, run)
	var serials []string
	rows, err := e.db.QueryContext(ctx, `SELECT serial_number FROM terminal_sessions WHERE node_id = $1`, filepath.Base(victim.dir))
	if err != nil {
		e.t.Fatalf("sessions of %s: %v", filepath.Base(victim.dir), err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		serials = append(serials, s)
	}
	rows.Close()
	held := len(serials)
	killedAt := time.Now()
	// Odd rounds kill the node; even rounds stop it as a rolling upgrade
	// does (SIGTERM: /readyz 503, its sessions closed with 1012, what is in
	// flight answered), which must lose nothing either.
	how := "SIGKILL"
	if round%2 == 0 {
		how = "SIGTERM"
		if err := victim.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			e.t.Fatal(err)
		}
		select {
		case <-victim.p.done:
		case <-time.After(60 * time.Second):
			e.t.Fatalf("round %d: %s did not stop within 60 s of SIGTERM", round, filepath.Base(victim.dir))
		}
		if code := victim.p.cmd.ProcessState.ExitCode(); code != 0 {
			e.t.Errorf("round %d: %s exited %d after SIGTERM, want 0", round, filepath.Base(victim.dir), code)
		}
	} else {
		victim.kill9()
	}
	c.kills++
	c.moved += held
	sleep(ctx, down)
	if err := victim.start(ctx); err != nil {
		stop()
		e.t.Fatalf("round %d: restart: %v", round, err)
	}
	e.srv = victim
	// Purchases go on a moment with the node back, and until every
	// terminal of the killed node acknowledged one after the kill (within
	// failoverBound: its reconnect's backoff is random, and the node's
	// restart may take a while on a loaded machine), then stop.
	sleep(ctx, 500*time.Millisecond)
	firstAcks := func() (map[int]time.Duration, error) {
		acks := map[int]time.Duration{}
		for _, s := range serials {
			var i int
			for i = 0; i < len(e.terms) && serial(i, len(e.terms)) != s; i++ {
			}
			var first sql.NullInt64
			if err := e.db.QueryRowContext(ctx, `SELECT MIN(acknowledged_at) FROM transactions WHERE terminal_id = $1 AND created_at > $2`,
				e.terms[i], killedAt.UnixMicro()).Scan(&first); err != nil {
				return nil, err
			}
			if first.Valid {
				acks[i] = time.UnixMicro(first.Int64).Sub(killedAt)
			} else {
				acks[i] = -1
			}
		}
		return acks, nil
	}
	var acks map[int]time.Duration
	testwait.Until(failoverBound, func() bool {
		var err error
		if acks, err = firstAcks(); err != nil {
			return false
		}
		for _, d := range acks {
			if d < 0 {
				return false
			}
		}
		return true
	})
	stop()
	wg.Wait()
	if acks == nil {
		e.t.Fatalf("round %d: the killed node's terminals' purchases could not be read", round)
	}
	for i, d := range acks {
		if d < 0 {
			e.t.Errorf("round %d: terminal %d (on the killed node) acknowledged no purchase within %s of the kill", round, i, failoverBound)
			continue
		}
		c.failover = append(c.failover, d)
	}
	e.t.Logf("cluster round %d: %s of %s (holding %d terminal sessions) after %s of purchases, %s down; purchases: %v", round,
		how, filepath.Base(victim.dir), held, run.Round(time.Millisecond), down.Round(time.Millisecond), sumCounts(counts))
}

// checkTimelines reads the timeline of every purchase acknowledged to the
// ECR: it starts with CREATED, has one entry per version, and its last
// entry leaves the transaction in the status the API shows.
func (c *cluster) checkTimelines(ctx context.Context) {
	e := c.e
	_, acked := e.led.known()
	for _, ref := range acked {
		a := e.ecr.do(ctx, "GET", "/in-store/api/v1/transaction/"+ref+"/events", nil, "")
		if a.err != nil || a.status != http.StatusOK {
			e.t.Errorf("timeline of %s: %s", ref, a)
			continue
		}
		var tl struct {
			Events []struct {
				Version     int64                `json:"version"`
				Kind        instore.TimelineKind `json:"kind"`
				StatusAfter string               `json:"statusAfter"`
			} `json:"events"`
		}
		if err := json.Unmarshal(a.body, &tl); err != nil || len(tl.Events) == 0 {
			e.t.Errorf("timeline of %s: %v %s", ref, err, a.body)
			continue
		}
		tx := e.ecr.do(ctx, "GET", "/in-store/api/v1/transaction/"+ref, nil, "")
		var st struct {
			Status  string `json:"status"`
			Version int64  `json:"version"`
		}
		if err := json.Unmarshal(tx.body, &st); err != nil {
			e.t.Errorf("transaction %s: %v", ref, err)
			continue
		}
		evs := tl.Events
		last := evs[len(evs)-1]
		switch {
		case evs[0].Kind != instore.EventCreated:
			e.t.Errorf("timeline of %s starts with %s, not CREATED", ref, evs[0].Kind)
		case last.StatusAfter != st.Status:
			e.t.Errorf("timeline of %s ends in %s, the transaction is %s", ref, last.StatusAfter, st.Status)
		case st.Status == "PENDING":
			e.t.Errorf("transaction %s is still PENDING at the end", ref)
		}
		for i, ev := range evs {
			// Progress stages are written without waiting for the disk: a
			// node killed may lose one, and the next change takes its
			// version. Every other change has its entry.
			if ev.Version < int64(i+1) {
				e.t.Errorf("timeline of %s: entry %d has version %d", ref, i, ev.Version)
				break
			}
		}
		if last.Version != st.Version && e.first("timeline-version", ref) {
			e.t.Errorf("timeline of %s ends at version %d, the transaction is at %d", ref, last.Version, st.Version)
		}
	}
}

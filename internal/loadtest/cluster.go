package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/instore-dev/instore/deploy/haproxy"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// ClusterScenario is `instore loadtest cluster` (PostgreSQL and HAProxy
// only, so not part of "all").
const ClusterScenario = "cluster"

// clusterNodes are the sizes compared, in the order they take turns: one
// node, three nodes, one, three (each on a fresh schema of the database,
// behind the same HAProxy configuration, deploy/haproxy/instore.cfg).
var clusterNodes = []int{1, 3, 1, 3}

// runCluster measures purchase lives of three nodes on one PostgreSQL
// against one node on the same database, in one run: each size runs the
// purchase scenario (with its interleaved commit baseline) through HAProxy,
// ECRs round-robin over the nodes, terminals spread by leastconn, twice,
// taking turns. Ours is three nodes, the baseline one node; Ratio is
// three over one (the cluster's coordination cost is 1 - Ratio). The
// failover time of a node's death is measured by the cluster test
// (internal/crashtest, TestCluster), which kills nodes.
func runCluster(ctx context.Context, o *Options) (*Result, error) {
	if o.DatabaseURL == "" || o.Target != nil || o.InProcess {
		return nil, errors.New("cluster starts its own nodes on PostgreSQL: give --database-url, and no --target or --in-process")
	}
	hp, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("cluster needs haproxy on the PATH (Debian: apt-get install haproxy)")
	}
	r := &Result{Scenario: ClusterScenario, Backend: "postgres", Server: "child", StartedAt: time.Now().UTC(),
		Terminals: o.Terminals, ECRs: o.ECRs}
	var one, three []*Result
	for i, n := range clusterNodes {
		fmt.Fprintf(o.Log, "loadtest: cluster: phase %d of %d, %d node(s)\n", i+1, len(clusterNodes), n)
		pr, err := clusterPhase(ctx, o, hp, n)
		if err != nil {
			return nil, fmt.Errorf("%d node(s): %w", n, err)
		}
		if n == 1 {
			one = append(one, pr)
		} else {
			three = append(three, pr)
		}
	}
	r.Ours = mergeSides(fmt.Sprintf("3 nodes (%d runs)", len(three)), three)
	r.Baseline = mergeSides(fmt.Sprintf("1 node (%d runs)", len(one)), one)
	if r.Baseline.Rate > 0 {
		r.Ratio = r.Ours.Rate / r.Baseline.Rate
	}
	r.BaselineRate = r.Baseline.Rate
	for _, p := range append(append([]*Result{}, one...), three...) {
		r.Parts = append(r.Parts, p.Ours)
		r.RoundRatios = append(r.RoundRatios, p.Ratio)
	}
	return r, nil
}

// mergeSides sums the runs' counts and takes the mean of their rates and
// percentiles (the runs are of equal length).
func mergeSides(name string, rs []*Result) Side {
	s := Side{Name: name, Unit: "lives/s"}
	if len(rs) == 0 {
		return s
	}
	for _, r := range rs {
		o := r.Ours
		s.Count += o.Count
		s.Seconds += o.Seconds
		s.Errors += o.Errors
		s.Rate += o.Rate / float64(len(rs))
		s.P50Ms += o.P50Ms / float64(len(rs))
		s.P90Ms += o.P90Ms / float64(len(rs))
		s.P99Ms += o.P99Ms / float64(len(rs))
		s.P999Ms += o.P999Ms / float64(len(rs))
		s.ServerCPU += o.ServerCPU / float64(len(rs))
	}
	return s
}

// nodeConns is each node's --database-max-conns in a phase of n nodes
// (Options.ClusterConns): three nodes and the load tool's own stay within
// max_connections (100) either way.
func nodeConns(total, n int) int {
	if total <= 0 {
		return 20
	}
	return max(total/n, sqlstore.MinMaxConns)
}

// clusterPhase starts n nodes on a fresh schema and HAProxy in front of
// them, runs the purchase scenario through it, and stops them.
func clusterPhase(ctx context.Context, o *Options, hp string, n int) (*Result, error) {
	e, err := newEnv(ctx, &Options{DatabaseURL: o.DatabaseURL, Log: o.Log})
	if err != nil {
		return nil, err
	}
	defer e.close()
	type node struct {
		c     *child
		ports []int
	}
	var nodes []node
	defer func() {
		for _, nd := range nodes {
			nd.c.stop(20 * time.Second)
		}
	}()
	for i := range n {
		ports, err := freePorts(4)
		if err != nil {
			return nil, err
		}
		addr := func(j int) string { return "127.0.0.1:" + strconv.Itoa(ports[j]) }
		args := append(append([]string{}, o.ServeArgs...),
			"--listen-online", addr(0), "--listen-access", addr(1), "--listen-terminal", addr(2), "--listen-ops", addr(3),
			"--log-format", "json", "--rate-limit", "0", "--node-id", fmt.Sprintf("node%d", i+1),
			"--database-max-conns", strconv.Itoa(nodeConns(o.ClusterConns, n)))
		args = append(args, o.ServerArgs...)
		c, err := startChild(o.Exe, args, []string{"INSTORE_DATABASE_URL=" + e.dbURL}, filepath.Join(e.dir, fmt.Sprintf("node%d.log", i+1)))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, node{c, ports})
		if err := c.waitReady(ctx, "http://"+addr(3)+"/readyz", 60*time.Second); err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	lb, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	env := []string{"INSTORE_LB_ONLINE=127.0.0.1:" + strconv.Itoa(lb[0]), "INSTORE_LB_GATEWAY=127.0.0.1:" + strconv.Itoa(lb[1])}
	for i := range 3 {
		nd := nodes[i%len(nodes)] // one node: the three server lines name it
		p := fmt.Sprintf("INSTORE_NODE%d_", i+1)
		env = append(env, p+"ONLINE=127.0.0.1:"+strconv.Itoa(nd.ports[0]), p+"GATEWAY=127.0.0.1:"+strconv.Itoa(nd.ports[2]),
			p+"OPS_HOST=127.0.0.1", p+"OPS_PORT="+strconv.Itoa(nd.ports[3]))
	}
	cfg := filepath.Join(e.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, haproxy.Config, 0o600); err != nil {
		return nil, err
	}
	h, err := startChild(hp, []string{"-db", "-f", cfg}, env, filepath.Join(e.dir, "haproxy.log"))
	if err != nil {
		return nil, err
	}
	defer h.stop(5 * time.Second)
	// Ready once the health checks (rise 2, every 500 ms) let requests
	// through to a node: any answer but HAProxy's own 503.
	if err := lbReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/in-store/api/v1/metadata", lb[0]), h); err != nil {
		return nil, err
	}
	sub := *o
	sub.DatabaseURL = e.dbURL
	sub.Target = map[string]string{
		"online":   fmt.Sprintf("http://127.0.0.1:%d", lb[0]),
		"terminal": fmt.Sprintf("ws://127.0.0.1:%d", lb[1]),
		"ops":      fmt.Sprintf("http://127.0.0.1:%d", nodes[0].ports[3]),
	}
	return Run(ctx, "purchase", sub)
}

// lbReady waits (30 s at most) until the load balancer passes a request to
// a node.
func lbReady(ctx context.Context, u string, h *child) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return nil
			}
		}
		select {
		case <-h.done:
			return fmt.Errorf("haproxy exited:\n%s", h.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("haproxy passes no request to a node within 30 s:\n%s", h.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

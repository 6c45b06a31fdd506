package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/sim"
)

// FailoverScenario is `instore loadtest failover` (PostgreSQL only, not
// part of "all"): --sessions virtual terminals on three nodes, one node
// killed with SIGKILL, and the time from the kill to each of its
// terminals' first purchase acknowledged through another node.
const FailoverScenario = "failover"

// failoverNodes is how many nodes the failover scenario starts.
const failoverNodes = 3

// failoverBound is how long after the kill a terminal may take to purchase
// again before it counts as an error.
const failoverBound = 60 * time.Second

// runFailover starts three nodes on a fresh schema, connects one virtual
// terminal per device (terminal i to node i mod 3 first, then the next
// ones: the order a device with the nodes' addresses tries them in),
// waits until all are online and linked, kills node 1 (SIGKILL), and has
// one ECR per terminal of node 1 try a purchase through the other nodes
// until one is acknowledged (201), each retrying every 250-500 ms. Ours is
// the time from the kill to that answer, per terminal (its rate: terminals
// back per second of the slowest one's time). There is no baseline.
func runFailover(ctx context.Context, o *Options) (*Result, error) {
	if o.DatabaseURL == "" || o.Target != nil || o.InProcess {
		return nil, errors.New("failover starts its own nodes on PostgreSQL: give --database-url, and no --target or --in-process")
	}
	e, r, err := seededEnv(ctx, o, FailoverScenario, o.Sessions)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r.Terminals = o.Sessions
	nodes, err := e.startNodes(ctx, failoverNodes)
	defer func() {
		for _, n := range nodes {
			n.c.stop(20 * time.Second)
		}
	}()
	if err != nil {
		return nil, err
	}
	e.srv = &serverProc{kind: "target", online: nodes[1].online, ops: nodes[1].ops}
	if err := e.getToken(ctx); err != nil {
		return nil, err
	}
	e.logf("failover: %d virtual terminals on %d nodes", len(e.devices), len(nodes))
	// Terminal i tries node i mod n first, then the next ones.
	stop, err := e.startFleet(ctx, func(i int) []string {
		urls := make([]string, len(nodes))
		for j := range nodes {
			urls[j] = nodes[(i+j)%len(nodes)].terminal + protocol.Path
		}
		return urls
	}, 100*time.Millisecond, 2*time.Second, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	defer stop()
	var before float64
	if m, err := scrapeMetrics(ctx, nodes[0].ops); err == nil {
		before = m["instore_terminals_online"]
	}
	var victims []int // the terminals of node 1
	for i := range e.devices {
		if i%len(nodes) == 0 {
			victims = append(victims, i)
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("node 1 held %.0f terminal sessions when killed; %d terminals were given it first", before, len(victims)))
	e.logf("failover: killing node 1 (SIGKILL) with %.0f sessions", before)
	// With --profile, node 2's CPU over the 10 s from the kill (started
	// first: its start-up is not in the figures) and its goroutines 1 s
	// after it.
	profiled := e.profileCPU(ctx, 10)
	c0, _ := readProc(0)
	killed := time.Now()
	if err := nodes[0].c.cmd.Process.Kill(); err != nil {
		return nil, err
	}
	back := e.watchReconnects(ctx, victims, killed)
	dumped := make(chan struct{})
	go func() {
		defer close(dumped)
		if e.o.ProfileDir != "" {
			time.Sleep(time.Second)
			e.saveProfile(ctx, "goroutine", 0)
		}
	}()
	s, tries := e.purchaseAgain(ctx, victims, []string{nodes[1].online, nodes[2].online}, killed)
	r.Notes = append(r.Notes, back(), tries)
	profiled()
	<-dumped
	c1, _ := readProc(0)
	s.ClientCPU = 100 * (c1.CPU - c0.CPU).Seconds() / s.Seconds
	r.Ours = s
	return r, nil
}

// clusterNode is a node the failover scenario started.
type clusterNode struct {
	c                     *child
	online, terminal, ops string
}

// startNodes starts n nodes of one cluster on the run's schema and waits
// until each is ready.
func (e *env) startNodes(ctx context.Context, n int) ([]clusterNode, error) {
	var nodes []clusterNode
	for i := range n {
		ports, err := freePorts(4)
		if err != nil {
			return nodes, err
		}
		var a [4]string
		for j, p := range ports {
			a[j] = "127.0.0.1:" + strconv.Itoa(p)
		}
		args := append(append([]string{}, e.o.ServeArgs...),
			"--listen-online", a[0], "--listen-access", a[1], "--listen-terminal", a[2], "--listen-ops", a[3],
			"--log-format", "json", "--log-level", "warn", "--rate-limit", "0", "--node-id", fmt.Sprintf("node%d", i+1),
			"--database-max-conns", "20")
		if e.o.ProfileDir != "" {
			args = append(args, "--pprof")
		}
		args = append(args, e.o.ServerArgs...)
		c, err := startChild(e.o.Exe, args, []string{"INSTORE_DATABASE_URL=" + e.dbURL}, filepath.Join(e.dir, fmt.Sprintf("node%d.log", i+1)))
		if err != nil {
			return nodes, err
		}
		nd := clusterNode{c: c, online: "http://" + a[0], terminal: "ws://" + a[2], ops: "http://" + a[3]}
		nodes = append(nodes, nd)
		if err := c.waitReady(ctx, nd.ops+"/readyz", 60*time.Second); err != nil {
			return nodes, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	return nodes, nil
}

// startFleet runs a virtual terminal per device, terminal i dialling
// urls(i) in turn with the backoff from min to max, and waits (within) until
// all are online and linked.
func (e *env) startFleet(ctx context.Context, urls func(i int) []string, bmin, bmax, within time.Duration) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	vts := make([]*sim.Terminal, len(e.devices))
	fl := newFleetLog()
	logger := slog.New(fl)
	for i, d := range e.devices {
		vt, err := sim.New(sim.Config{
			GatewayURLs: urls(i), SerialNumber: d.serial, Secret: d.secret,
			Model: instore.ModelCountertop, SoftwareVersion: sim.DefaultSoftwareVersion, Logger: logger,
			BackoffMin: bmin, BackoffMax: bmax,
		})
		if err != nil {
			stop()
			return nil, err
		}
		vts[i] = vt
		wg.Add(1)
		go func() { defer wg.Done(); vt.Run(ctx) }()
	}
	start := time.Now()
	deadline, report := start.Add(within), start.Add(15*time.Second)
	online := 0
	for online < len(vts) {
		if s := vts[online].State(); s.Online && s.TerminalID != "" {
			online++
			continue
		}
		if now := time.Now(); now.After(report) {
			e.logf("fleet: %d of %d virtual terminals online and linked after %s; their session ends so far:%s",
				countOnline(vts), len(vts), now.Sub(start).Round(time.Second), fl.top(5))
			report = now.Add(15 * time.Second)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			n := countOnline(vts)
			stop()
			return nil, fmt.Errorf("%d of %d virtual terminals online and linked within %s; their session ends:%s", n, len(vts), within, fl.top(8))
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.logf("fleet: %d virtual terminals online and linked in %s", len(vts), time.Since(start).Round(time.Millisecond))
	e.fleet = vts
	return stop, nil
}

// countOnline counts the virtual terminals online and linked.
func countOnline(vts []*sim.Terminal) int {
	n := 0
	for _, vt := range vts {
		if s := vt.State(); s.Online && s.TerminalID != "" {
			n++
		}
	}
	return n
}

// purchaseAgain has one ECR per terminal of victims try a purchase through
// the nodes onlines (in turn) until one is acknowledged, and returns the
// times from killed to those answers. A terminal not purchasing within
// failoverBound counts as an error.
func (e *env) purchaseAgain(ctx context.Context, victims []int, onlines []string, killed time.Time) (Side, string) {
	tr := &http.Transport{MaxIdleConnsPerHost: len(victims), MaxIdleConns: 2 * len(victims)}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var counts lifeCounts
	var mu sync.Mutex
	var h hist
	var failed int64
	var firstErr string
	answers := newAnswerTally()
	var wg sync.WaitGroup
	for k, i := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.newECRCaller(client, &counts)
			body := []byte(`{"terminalId":"` + e.devices[i].terminalID + `","amount":1000,"currency":"SEK"}`)
			var last error
			for try := 0; time.Since(killed) < failoverBound && ctx.Err() == nil; try++ {
				u := onlines[(k+try)%len(onlines)] + "/in-store/api/v1/purchase"
				t0 := time.Now()
				_, err := c.call(ctx, "POST", u, body, 201)
				answers.add(err, time.Since(t0))
				if err == nil {
					d := time.Since(killed)
					mu.Lock()
					h.record(d)
					mu.Unlock()
					return
				} else {
					last = err
				}
				time.Sleep(250*time.Millisecond + rand.N(250*time.Millisecond))
			}
			mu.Lock()
			failed++
			if firstErr == "" && last != nil {
				firstErr = last.Error()
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := h.max
	if elapsed <= 0 {
		elapsed = time.Since(killed)
	}
	o := openFigures{ok: int64(h.n), failed: failed, firstErr: firstErr, elapsed: elapsed, h: h}
	s := o.side("failover: kill to purchasing", 0)
	s.Unit = "terminals/s"
	return s, answers.String()
}

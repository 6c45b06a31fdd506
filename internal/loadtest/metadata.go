package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

const metadataPath = "/in-store/api/v1/metadata"

// requestTimeout bounds one request of the load generator.
const requestTimeout = 30 * time.Second

func runMetadata(ctx context.Context, o *Options) (*Result, error) {
	e, r, err := seededEnv(ctx, o, "metadata", 0)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r.Clients = o.Clients
	if err := e.startServer(ctx); err != nil {
		return nil, err
	}
	body, err := e.fetchMetadata(ctx)
	if err != nil {
		return nil, err
	}

	// The baseline: a bare handler writing the same bytes, in a child.
	file := filepath.Join(e.dir, "metadata.json")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		return nil, err
	}
	b, err := e.startBaseline("http", "--body", file)
	if err != nil {
		return nil, err
	}
	defer b.child.stop(5 * time.Second)
	host, err := hostOf(e.srv.online)
	if err != nil {
		return nil, err
	}

	// Both servers run throughout; the baseline and ours take turns, in
	// alternating windows (see interleave), each side with its own clients
	// whose connections stay open across the rounds.
	il := e.interleave(
		ilSide{op: e.metadataOp("bare net/http", b.addr, o.Clients), stats: b.stats, dbCPU: e.dbCPU()},
		ilSide{op: e.metadataOp("instore", host, o.Clients), stats: e.srv.stats, dbCPU: e.dbCPU(), onStart: e.profileHook()})
	e.logf("metadata: a bare net/http handler writing the same %d bytes against instore, %d clients each, %s per side in %d interleaved rounds",
		len(body), o.Clients, o.Duration, o.Rounds)
	res := il.run(ctx)
	r.Baseline, r.Ours = res.sides[0], res.sides[1]
	r.Rounds, r.RoundRatios = o.Rounds, res.roundRatios
	if r.Baseline.Rate > 0 {
		r.BaselineRate = r.Baseline.Rate
		r.Ratio = r.Ours.Rate / r.Baseline.Rate
	}
	return r, nil
}

// interleave is the interleaved measurement of the options: baseline
// (side 0) and ours (side 1) in Rounds alternating rounds.
func (e *env) interleave(baseline, ours ilSide) *interleave {
	return &interleave{
		warmup: e.o.Warmup, ramp: min(e.o.Warmup, interleaveRamp), duration: e.o.Duration,
		rounds: e.o.Rounds, max: e.o.MaxRequests, sides: [2]ilSide{baseline, ours}, logf: e.logf,
	}
}

func (e *env) metadataOp(name, host string, clients int) op {
	req := rawRequest(host, metadataPath, e.authHeaders()...)
	conns := make([]*rawClient, clients)
	for i := range conns {
		conns[i] = newRawClient(host)
	}
	return op{name: name, unit: "req/s", workers: clients, fn: func(ctx context.Context, w int) error {
		st, err := conns[w].do(req, requestTimeout)
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("metadata: HTTP %d", st)
		}
		return nil
	}}
}

// profileHook is, with --profile, what saves the server's profiles: a CPU
// profile of d from when it is called (rounded up to whole seconds: the
// profile ends with the window or a little after, never before), then a
// heap profile. Without --profile, nil.
func (e *env) profileHook() func(ctx context.Context, d time.Duration) {
	if e.o.ProfileDir == "" {
		return nil
	}
	return func(ctx context.Context, d time.Duration) {
		e.saveProfile(ctx, "cpu", int((d+time.Second-1)/time.Second))
		e.saveProfile(ctx, "heap", 0)
	}
}

// fetchMetadata gets the metadata once: the bytes the baseline writes.
func (e *env) fetchMetadata(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.online+metadataPath, nil)
	if err != nil {
		return nil, err
	}
	e.authorize(req.Header)
	return roundTrip(http.DefaultClient, req, 200)
}

// seededEnv is the environment of scenario with n devices provisioned
// (seed) and the scenario's result, started before they are; the caller
// closes the environment.
func seededEnv(ctx context.Context, o *Options, scenario string, n int) (*env, *Result, error) {
	e, err := newEnv(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	r := e.newResult(scenario)
	if err := e.seed(ctx, n); err != nil {
		e.close()
		return nil, nil, err
	}
	return e, r, nil
}

func (e *env) newResult(scenario string) *Result {
	e.scenario = scenario
	r := &Result{Scenario: scenario, Backend: e.backend, StartedAt: time.Now().UTC()}
	if e.backend == "sqlite" {
		r.Synchronous = e.o.Synchronous
	}
	switch {
	case e.o.Target != nil:
		r.Server = "target"
	case e.o.InProcess:
		r.Server = "in-process"
	default:
		r.Server = "child"
	}
	return r
}

// Package loadtest is `instore loadtest`: it starts (or targets) an instore
// server, runs a bounded scenario against it over loopback, runs the
// scenario's baseline (the limit of this machine for the same work) in the
// same invocation, and reports rates, latency percentiles, errors, and the
// server's memory and CPU, with the ratio of ours to the baseline (1.0 = as
// good as the baseline, higher is better).
//
// The server runs as a child process of the same binary (`instore serve`),
// so the load generator and the virtual terminals, which stay in this
// process, are not measured with it: the server's RSS and CPU come from
// /proc/PID. The baselines that are servers (a bare net/http handler, a
// bare gorilla WebSocket server) run as child processes too.
//
// Scenarios:
//   - metadata: C clients with keep-alive GET the authenticated metadata;
//     baseline: a bare net/http handler writing the same bytes, measured
//     interleaved with ours (both servers up, alternating windows) so that
//     a change in the machine's load falls on both alike.
//   - purchase: N virtual terminals (in this process) and M ECR clients;
//     each purchase is followed to its final status with the ?wait
//     long-poll; baseline: the store's raw rate of single-row commits
//     (same backend and durability) divided by the commits a purchase life
//     makes, counted in the store after the run. The commits and the
//     lives are measured interleaved, as in metadata (the server up but
//     idle, its ECRs parked, in the commits' windows).
//   - sessions: N provisioned devices hold idle terminal sessions (raw
//     WebSocket clients that say hello); the server's RSS increase per
//     session against a bare gorilla WebSocket server holding as many.
//   - mixed: purchases, metadata and status reads at once; the purchase
//     lives are compared with the purchase baseline.
//   - purchase with Webhooks and/or Streams: the lives with the consumers
//     of events (webhook endpoints at a verifying receiver in this
//     process, followers of the event stream) against the same lives
//     without them, in alternating windows (consumers.go).
//   - webhooks: the deliveries per second one node sends, draining a
//     backlog, against a bare signing sender (not in "all").
//   - preauth: purchase with each life a pre-authorisation, an increment
//     and a capture with a tip (preauth.go; not in "all").
//
// Linux only (it reads /proc).
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// Scenarios are the scenario names, in the order "all" runs them.
var Scenarios = []string{"metadata", "purchase", "sessions", "mixed"}

// Bounds of the options: a run stays bounded in time, connections and
// requests whatever it is asked.
const (
	MaxDuration  = 10 * time.Minute
	MaxClients   = 1024
	MaxTerminals = 2000
	MaxSessions  = 18000 // the open-file limit here is 20,000
	MaxRounds    = 100
	// MinRoundWindow is the shortest window of an interleaved round.
	MinRoundWindow = 50 * time.Millisecond
)

// Options configure a run. Zero values take the scenario's defaults.
type Options struct {
	// Duration is the measured time of each side (ours, the baseline):
	// the sum of its Rounds windows (metadata, purchase, mixed), or one
	// window.
	Duration time.Duration
	// Warmup runs before each measured window and is not counted
	// (default: a fifth of Duration, at most 1 s). In the interleaved
	// scenarios it runs before each side's first window; later windows
	// get a ramp of at most 100 ms (purchase and mixed: 300 ms).
	Warmup time.Duration
	// MaxRequests ends a measured window early once that many requests
	// (or purchase lives) completed; 0: no limit but Duration. In the
	// interleaved scenarios it bounds each side's total (mixed: all its
	// requests): each of its windows ends once it completed its share
	// (MaxRequests/Rounds, at least 1).
	MaxRequests int64
	// Rounds is how many rounds metadata, purchase and mixed measure the
	// baseline and ours in, alternately: each round one window of Duration/Rounds per side,
	// the baseline first in rounds 1, 3, 5... and ours first in rounds 2,
	// 4, 6... (A B, B A, A B, ...). Default: one round per 2 s of Duration (5 for 10 s), from
	// 1 to 30. 1: one window per side, the baseline's first.
	Rounds int

	// Clients is the number of concurrent metadata clients (metadata
	// default 64, mixed 8).
	Clients int
	// Terminals is the number of virtual terminals (purchase and mixed,
	// default 100); ECRs the number of concurrent ECR clients (default
	// Terminals), each driving its share of the terminals.
	Terminals, ECRs int
	// Progress makes the ECRs follow each purchase at every change
	// (afterVersion), as a till that shows the terminal's progress does,
	// instead of waiting for its final status.
	Progress bool
	// Keyed makes the ECRs send a fresh Idempotency-Key with every
	// purchase, as the Go SDK does by default.
	Keyed bool
	// Webhooks and Streams add consumers of events to purchase: that many
	// webhook endpoints at a receiver in this process (verifying every
	// signature) and followers of the event stream; the purchase lives with
	// them are then compared with the lives without them, in alternating
	// windows (instead of the raw commits). Webhooks is also the endpoints
	// of the webhooks scenario (default 8).
	Webhooks, Streams int
	// WebhookTypes are the event types of the first half (rounded up) of
	// purchase's Webhooks endpoints; the others (and all without it) want
	// every event. The lags are reported per half.
	WebhookTypes []string
	// WebhookConcurrency is the endpoints' concurrency (0: the service's
	// default, 1): above 1, that many deliveries of an endpoint in flight
	// at once, in order per terminal, which the receiver checks.
	WebhookConcurrency int
	// Readers is the number of status readers in mixed (default 8).
	Readers int
	// Sessions is the number of idle terminal sessions (default 10,000, the
	// count issue 8 sets its memory target at).
	Sessions int

	// DatabaseURL selects PostgreSQL; the run creates a fresh schema in it
	// and drops it at the end (unless Target is set: then it is the
	// target's store, used as it is). Empty: SQLite in a temporary
	// directory.
	DatabaseURL string
	// Synchronous is SQLite's durability: FULL (default) or NORMAL.
	Synchronous string
	// DataDir is the SQLite data directory of a Target server.
	DataDir string

	// Target names a running server instead of starting one: base URLs by
	// listener name ("online", "terminal", "ops"). Loopback only.
	// Scenarios that provision devices need the target's store
	// (DataDir or DatabaseURL); metadata alone can do with Credentials.
	Target map[string]string
	// Credentials of the Online API for a Target without store access.
	SubscriptionKey, AccessToken, ClientID, ClientSecret string

	// InProcess runs the server in this process instead of a child (its
	// RSS and CPU then include the load generator's).
	InProcess bool
	// ProfileDir, when set, starts the server with --pprof and saves a CPU
	// profile of each measured window and a heap profile after it there.
	ProfileDir string

	// ClusterConns, for the cluster scenario, are the PostgreSQL
	// connections a phase's nodes hold together (--database-max-conns of
	// each node: ClusterConns / nodes, at least sqlstore.MinMaxConns), so
	// that one node and three compare at the database's same connections;
	// 0 gives every node 20 instead.
	ClusterConns int

	// ServerArgs are extra flags for the server child (`instore serve`),
	// for experiments such as --log-level warn.
	ServerArgs []string

	// Exe is the instore binary the children run (default os.Executable).
	Exe string
	// ServeArgs start the server (default: serve); BaselineArgs the
	// baseline servers (default: loadtest baseline), followed by "http" or
	// "ws" and their flags.
	ServeArgs, BaselineArgs []string

	// Log receives progress lines (default: discarded).
	Log io.Writer

	// preauth makes each purchase life a pre-auth life (PreAuthScenario).
	preauth bool
}

// Side is one measured window: ours, a baseline, or a part of mixed.
type Side struct {
	Name           string  `json:"name"`
	Unit           string  `json:"unit"`
	Count          int64   `json:"count"`
	Seconds        float64 `json:"seconds"`
	Rate           float64 `json:"rate"`
	P50Ms          float64 `json:"p50Ms"`
	P90Ms          float64 `json:"p90Ms"`
	P99Ms          float64 `json:"p99Ms"`
	P999Ms         float64 `json:"p999Ms"`
	MeanMs         float64 `json:"meanMs"`
	MaxMs          float64 `json:"maxMs"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"firstError,omitempty"`
	ServerRSSBytes int64   `json:"serverRssBytes,omitempty"`
	ServerCPU      float64 `json:"serverCpuPercent"`
	ClientCPU      float64 `json:"clientCpuPercent"`
	// DBCPU is the CPU of the PostgreSQL processes of this machine.
	DBCPU float64 `json:"dbCpuPercent,omitempty"`
	// RoundRates are the side's rates in each interleaved round
	// (metadata, purchase, mixed).
	RoundRates []float64 `json:"roundRates,omitempty"`
}

// Result is one scenario's outcome; --json prints it as one line.
type Result struct {
	Scenario    string `json:"scenario"`
	Backend     string `json:"backend"`
	Synchronous string `json:"synchronous,omitempty"`
	// Server is "child", "in-process" or "target".
	Server    string    `json:"server"`
	StartedAt time.Time `json:"startedAt"`

	// Ours, at the top level: rate in Unit per second.
	Unit             string  `json:"unit"`
	Count            int64   `json:"count"`
	Rate             float64 `json:"rate"`
	BaselineRate     float64 `json:"baselineRate"`
	Ratio            float64 `json:"ratio"`
	Target           float64 `json:"target,omitempty"`
	Met              *bool   `json:"met,omitempty"`
	P50Ms            float64 `json:"p50Ms"`
	P90Ms            float64 `json:"p90Ms"`
	P99Ms            float64 `json:"p99Ms"`
	P999Ms           float64 `json:"p999Ms"`
	Errors           int64   `json:"errors"`
	ServerRSSBytes   int64   `json:"serverRssBytes"`
	ServerCPUPercent float64 `json:"serverCpuPercent"`

	Ours     Side   `json:"ours"`
	Baseline Side   `json:"baseline"`
	Parts    []Side `json:"parts,omitempty"`

	// Rounds is the number of interleaved rounds (metadata, purchase,
	// mixed), RoundRatios ours over the baseline in each (Ratio is of the
	// totals).
	Rounds      int       `json:"rounds,omitempty"`
	RoundRatios []float64 `json:"roundRatios,omitempty"`

	Clients   int `json:"clients,omitempty"`
	Terminals int `json:"terminals,omitempty"`
	ECRs      int `json:"ecrs,omitempty"`
	Readers   int `json:"readers,omitempty"`
	// CommitsPerLife is the mean number of commits of a completed purchase
	// (counted in the store: its row's version); RawCommitRate the store's
	// single-row commits per second with CommitWriters concurrent writers
	// (over the baseline's windows; the baseline's roundRates are lives/s,
	// its rates per round divided by CommitsPerLife).
	CommitsPerLife float64 `json:"commitsPerLife,omitempty"`
	RawCommitRate  float64 `json:"rawCommitRate,omitempty"`
	CommitWriters  int     `json:"commitWriters,omitempty"`
	// PreAuthsChecked is the completed pre-auths of a preauth run whose
	// end the store was read for (checkPreAuths): those that did not end
	// CAPTURED with their life's amounts count in Errors.
	PreAuthsChecked int64 `json:"preAuthsChecked,omitempty"`
	// RequestsPerLife is the ECR's HTTP requests per completed purchase:
	// the POST and the long-polls (each progress stage it sees answers one).
	RequestsPerLife float64 `json:"requestsPerLife,omitempty"`
	// DurableCommitsPerLife and RelaxedCommitsPerLife are the write
	// transactions the store committed per completed life, answered once on
	// disk and before (the server's instore_store_durable_commits_total and
	// instore_store_relaxed_commits_total over the run, divided by the
	// lives completed; everything the server wrote meanwhile counts).
	DurableCommitsPerLife float64 `json:"durableCommitsPerLife,omitempty"`
	RelaxedCommitsPerLife float64 `json:"relaxedCommitsPerLife,omitempty"`

	Sessions                int     `json:"sessions,omitempty"`
	HoldSeconds             float64 `json:"holdSeconds,omitempty"`
	BytesPerSession         float64 `json:"bytesPerSession,omitempty"`
	BaselineBytesPerSession float64 `json:"baselineBytesPerSession,omitempty"`
	// SessionHeapBytes, SessionStackBytes and SessionGoroutines are ours
	// per session from the server's /metrics (Go heap in use, goroutine
	// stacks, goroutines), to tell where the RSS goes.
	SessionHeapBytes  float64 `json:"sessionHeapBytes,omitempty"`
	SessionStackBytes float64 `json:"sessionStackBytes,omitempty"`
	SessionGoroutines float64 `json:"sessionGoroutines,omitempty"`
	// SessionFDs is ours: the server's open file descriptors per session.
	SessionFDs float64 `json:"sessionFds,omitempty"`
	// SessionTargetBytes is the absolute bound (8 KiB at 10,000).
	SessionTargetBytes float64 `json:"sessionTargetBytes,omitempty"`
	// Storm is the sessions scenario's reconnect storm: every session
	// dropped at once and opened again through the whole hello, ours
	// against the bare server's.
	Storm *stormFigures `json:"storm,omitempty"`

	// Consumers are the figures of purchase --webhooks/--streams and of
	// the webhooks scenario; ConsumerErrors what they saw wrong (bad
	// signatures, deliveries or stream events out of order, broken
	// streams), counted in Errors too.
	Consumers      *consumerFigures `json:"consumers,omitempty"`
	ConsumerErrors int64            `json:"consumerErrors,omitempty"`

	Notes []string `json:"notes,omitempty"`
}

// WebhooksScenario measures the deliveries per second of one node (not in
// "all").
const WebhooksScenario = "webhooks"

// consumersTarget is the least ratio of the lives with consumers of events
// to those without.
const consumersTarget = 0.9

// Targets of issue 8: the minimum ratio of each scenario.
var targets = map[string]float64{"metadata": 0.8, "purchase": 0.5, "sessions": 0.5}

func (o *Options) defaults(scenario string) error {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Duration > MaxDuration {
		return fmt.Errorf("duration %s is over the bound of %s", o.Duration, MaxDuration)
	}
	if o.Warmup <= 0 {
		o.Warmup = min(time.Second, o.Duration/5)
	}
	if o.Warmup > time.Minute {
		return fmt.Errorf("warm-up %s is over the bound of 1m", o.Warmup)
	}
	if o.MaxRequests < 0 {
		return errors.New("max requests must not be negative")
	}
	switch {
	case o.Rounds < 0:
		return errors.New("rounds must not be negative")
	case o.Rounds == 0:
		o.Rounds = min(max(int(o.Duration/(2*time.Second)), 1), 30)
	case o.Rounds > MaxRounds:
		return fmt.Errorf("rounds: at most %d", MaxRounds)
	case o.Rounds > 1 && o.Duration/time.Duration(o.Rounds) < MinRoundWindow:
		return fmt.Errorf("%d rounds of %s: each window would be under %s (fewer rounds or a longer duration)", o.Rounds, o.Duration, MinRoundWindow)
	}
	if o.Clients <= 0 {
		o.Clients = 64
		if scenario == "mixed" {
			o.Clients = 8
		}
	}
	if o.Terminals <= 0 {
		o.Terminals = 100
	}
	if o.ECRs <= 0 || o.ECRs > o.Terminals {
		o.ECRs = o.Terminals
	}
	switch {
	case o.Webhooks < 0 || o.Streams < 0:
		return errors.New("webhooks and streams must not be negative")
	case o.Webhooks > 16:
		return errors.New("webhooks: at most 16 (the endpoints of a merchant)")
	case o.WebhookConcurrency < 0 || o.WebhookConcurrency > instore.MaxWebhookConcurrency:
		return fmt.Errorf("webhook concurrency: 1 to %d (0: the service's default)", instore.MaxWebhookConcurrency)
	case o.WebhookConcurrency > 0 && o.Webhooks == 0 && scenario != WebhooksScenario:
		return errors.New("--webhook-concurrency goes with --webhooks N or the webhooks scenario")
	case len(o.WebhookTypes) > 0 && (o.Webhooks == 0 || scenario != "purchase"):
		return errors.New("--webhook-types goes with purchase --webhooks N")
	case o.Streams > MaxClients:
		return fmt.Errorf("streams: at most %d", MaxClients)
	case (o.Webhooks > 0 || o.Streams > 0) && scenario == "mixed":
		return errors.New("--webhooks and --streams go with purchase (and webhooks), not mixed")
	case (o.Webhooks > 0 || scenario == WebhooksScenario) && o.Target != nil:
		return errors.New("webhooks need a server this run starts (it must trust the receiver's certificate): no --target")
	case o.Streams > 0 && scenario == WebhooksScenario:
		return errors.New("--streams goes with purchase")
	}
	if o.Readers <= 0 {
		o.Readers = 8
	}
	if o.Sessions <= 0 {
		o.Sessions = 10000
	}
	switch {
	case o.Clients > MaxClients:
		return fmt.Errorf("clients: at most %d", MaxClients)
	case o.Readers > MaxClients:
		return fmt.Errorf("readers: at most %d", MaxClients)
	case o.Terminals > MaxTerminals:
		return fmt.Errorf("terminals: at most %d", MaxTerminals)
	case o.Sessions > MaxSessions:
		return fmt.Errorf("sessions: at most %d (the open-file limit)", MaxSessions)
	}
	o.Synchronous = strings.ToUpper(o.Synchronous)
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
	}
	if o.Synchronous != "FULL" && o.Synchronous != "NORMAL" {
		return fmt.Errorf("sqlite synchronous must be FULL or NORMAL, not %q", o.Synchronous)
	}
	if o.DatabaseURL != "" && !strings.HasPrefix(o.DatabaseURL, "postgres://") && !strings.HasPrefix(o.DatabaseURL, "postgresql://") {
		return errors.New("the database URL must start with postgres:// or postgresql://")
	}
	for name, u := range o.Target {
		if err := loopbackURL(u); err != nil {
			return fmt.Errorf("target %s: %w", name, err)
		}
	}
	if o.Target != nil && o.Target["online"] == "" {
		return errors.New("a target needs at least the online URL")
	}
	if len(o.Target) > 0 && o.InProcess {
		return errors.New("a target and an in-process server exclude each other")
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Exe = exe
	}
	if o.ServeArgs == nil {
		o.ServeArgs = []string{"serve"}
	}
	if o.BaselineArgs == nil {
		o.BaselineArgs = []string{"loadtest", "baseline"}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// loopbackURL refuses a URL whose host is not a loopback address: the load
// tool does not load other machines.
func loopbackURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address (the load tool only loads this machine)", s)
	}
	return nil
}

// Run runs one scenario with its baseline and returns the result.
func Run(ctx context.Context, scenario string, o Options) (*Result, error) {
	if err := o.defaults(scenario); err != nil {
		return nil, err
	}
	raiseOpenFiles()
	var r *Result
	var err error
	switch scenario {
	case "metadata":
		r, err = runMetadata(ctx, &o)
	case "purchase":
		r, err = runPurchase(ctx, &o, false)
	case PreAuthScenario:
		o.preauth = true
		r, err = runPurchase(ctx, &o, false)
	case "mixed":
		r, err = runPurchase(ctx, &o, true)
	case "sessions":
		r, err = runSessions(ctx, &o)
	case ClusterScenario:
		r, err = runCluster(ctx, &o)
	case FailoverScenario:
		r, err = runFailover(ctx, &o)
	case WebhooksScenario:
		r, err = runWebhooks(ctx, &o)
	default:
		return nil, fmt.Errorf("unknown scenario %q (want one of %s, or all)", scenario, strings.Join(Scenarios, ", "))
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // interrupted: the figures are not whole
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", scenario, err)
	}
	r.finish()
	return r, nil
}

// finish copies ours to the top level and computes the verdict.
func (r *Result) finish() {
	o := r.Ours
	r.Unit, r.Count, r.Rate = o.Unit, o.Count, o.Rate
	r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms = o.P50Ms, o.P90Ms, o.P99Ms, o.P999Ms
	r.Errors, r.ServerRSSBytes, r.ServerCPUPercent = o.Errors, o.ServerRSSBytes, o.ServerCPU
	for _, p := range r.Parts {
		r.Errors += p.Errors
	}
	r.Errors += r.ConsumerErrors
	t, ok := targets[r.Scenario]
	switch {
	case r.Scenario == WebhooksScenario:
		ok = false
	case r.Consumers != nil:
		// Issue: the consumers cost the purchases at most 10 %.
		t, ok = consumersTarget, true
	}
	if ok {
		r.Target = t
		met := r.Ratio >= t
		if r.Scenario == "sessions" && r.Sessions >= 10000 {
			r.SessionTargetBytes = 8 << 10
			met = met && r.BytesPerSession <= r.SessionTargetBytes
		}
		if r.Storm != nil {
			met = met && r.Storm.Ratio >= r.Storm.Target
		}
		r.Met = &met
	}
}

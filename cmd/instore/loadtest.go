package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/loadtest"
	"github.com/instore-dev/instore/internal/logging"
)

func newLoadtestCmd() *cobra.Command {
	var (
		o        loadtest.Options
		asJSON   bool
		targets  []string
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "loadtest SCENARIO...",
		Short: "Measure the service against this machine's limits: metadata, purchase, sessions, mixed (or all), preauth, cluster, webhooks",
		Long: `Run a bounded load scenario against an instore server over loopback, and its
baseline in the same invocation, and print rates, latency percentiles, errors
and the server's RSS and CPU, with the ratio of ours to the baseline (1.0: as
good as the baseline; higher is better).

By default the server is a child process of this binary (instore serve) on
SQLite in a temporary directory (--sqlite-synchronous FULL or NORMAL), or on a
fresh schema of the PostgreSQL database of --database-url, dropped at the
end; the load generator and the virtual terminals stay in this process, so
the server's figures (from /proc/PID) are its own.

Scenarios and baselines:
  metadata  C clients with keep-alive GET the authenticated metadata;
            baseline: a bare net/http handler (a child process) writing
            the same bytes. Both servers run throughout and take turns in
            --rounds alternating windows (baseline first, then instore
            first, ...), so that a change in the machine's load falls on
            both alike; the ratio per round is printed too.
  purchase  N virtual terminals (here) and M ECR clients; each purchase is
            followed to its final status with the ?wait long-poll;
            baseline: the store's raw single-row commits per second (same
            backend and durability) divided by the commits a purchase life
            makes, counted in the store after the run. The commits and the
            lives take turns in --rounds alternating windows as in
            metadata; in the commits' windows the server is up but idle
            (its ECR clients parked, its virtual terminals idle).
  sessions  N idle terminal sessions (raw WebSocket clients that say
            hello); the server's RSS increase per session against a bare
            gorilla WebSocket server (a child process) holding as many.
            Then a reconnect storm: every session dropped at once and
            opened again (256 at a time) through the whole hello, the
            sessions re-established per second against the bare
            server's (target: at least 0.5).
            With --webhooks N and/or --streams M: N webhook endpoints
            at a receiver in this process that verifies every signature
            (Standard Webhooks reference library) and M followers of the
            event stream; the lives with them are compared with the
            lives without them, in alternating windows on the same
            server (the consumers on only in theirs), instead of the
            raw commits. Target: at least 0.9.
  mixed     purchases, metadata and status reads together; the lives
            compared with the purchase baseline.
  all       every scenario above in turn.
  preauth   purchase with a pre-authorisation life instead: a pre-auth
            (100.00 SEK), an increment of it (25.00) and its capture
            (130.00 with a tip of 5.00), one after the other on the same
            terminal, each followed to its approval; the same raw-commit
            baseline (divided by the commits of the three). After the run
            every pre-auth is checked in the store: CAPTURED with those
            amounts (any other counts as an error).
  webhooks  the deliveries per second of one node: --webhooks endpoints
            (default 8) of every event type; purchases run while the
            receiver holds the requests until the backlog holds
            --max-requests deliveries (default 5000), then the receiver
            answers and the node drains it; baseline: a bare sender in
            this process (as many workers as the dispatcher, signing
            each delivery) sending as many to the same receiver.
  cluster   PostgreSQL and HAProxy: purchase lives of three nodes (instore
            serve children on one database) behind HAProxy
            (deploy/haproxy/instore.cfg) against one node behind it, in
            one run: 1, 3, 1, 3 nodes, each a purchase run on a fresh
            schema with its commit baseline. Ours is three nodes, the
            baseline one; the ratio is three over one.
  failover  PostgreSQL: --sessions virtual terminals on three nodes
            (terminal i tries node i mod 3 first, then the next), node 1
            killed with SIGKILL, and the time from the kill to each of
            its terminals' first purchase acknowledged through another
            node (one ECR per terminal, retrying every 250-500 ms);
            p50 and p99 in the table, 60 s at most per terminal.

--target online=URL,terminal=URL,ops=URL runs against a server already
running on this machine (loopback only; its RSS and CPU then come from its
/metrics). Scenarios that provision devices then need its store (--data or
--database-url, used as it is), to which they add a customer, a merchant
and devices; metadata can do with the Online API credentials of the
environment (INSTORE_SUBSCRIPTION_KEY and INSTORE_ACCESS_TOKEN, or
INSTORE_CLIENT_ID and INSTORE_CLIENT_SECRET). The target's own settings
apply: start it with --rate-limit 0, or its per-key limit answers 429.

Linux only: it reads /proc.`,
		Example: `  instore loadtest metadata --duration 10s
  instore loadtest purchase --terminals 100 --sqlite-synchronous NORMAL --json
  instore loadtest sessions --sessions 5000
  instore loadtest preauth --duration 10s --json
  instore loadtest all --database-url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var scenarios []string
			for _, a := range args {
				switch {
				case a == "all":
					scenarios = append(scenarios, loadtest.Scenarios...)
				case slices.Contains(loadtest.Scenarios, a) || a == loadtest.ClusterScenario || a == loadtest.WebhooksScenario || a == loadtest.PreAuthScenario || a == loadtest.FailoverScenario:
					scenarios = append(scenarios, a)
				default:
					return usageError{fmt.Errorf("unknown scenario %q: want %s, all, %s, %s, %s or %s", a, strings.Join(loadtest.Scenarios, ", "), loadtest.PreAuthScenario, loadtest.ClusterScenario, loadtest.FailoverScenario, loadtest.WebhooksScenario)}
				}
			}
			o.Duration = duration
			if len(targets) > 0 {
				o.Target = map[string]string{}
				for _, t := range targets {
					name, u, ok := strings.Cut(t, "=")
					if !ok {
						name, u = "online", t
					}
					if name != "online" && name != "terminal" && name != "ops" {
						return usageError{fmt.Errorf("--target %s: the listener is online, terminal or ops", t)}
					}
					o.Target[name] = strings.TrimRight(u, "/")
				}
				o.SubscriptionKey = os.Getenv(client.EnvSubscriptionKey)
				o.AccessToken = os.Getenv(client.EnvAccessToken)
				o.ClientID = os.Getenv(client.EnvClientID)
				o.ClientSecret = os.Getenv(client.EnvClientSecret)
			} else if o.DataDir != "" {
				return usageError{errors.New("--data names a target's store: give --target too")}
			}
			o.Log = cmd.ErrOrStderr()
			out := cmd.OutOrStdout()
			for _, s := range scenarios {
				r, err := loadtest.Run(cmd.Context(), s, o)
				if err != nil {
					return err
				}
				if asJSON {
					err = r.WriteJSON(out)
				} else {
					err = r.WriteTable(out)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&duration, "duration", 10*time.Second, "measured time of each side (ours, the baseline); for sessions, how long they are held (at most 10m)")
	fs.DurationVar(&o.Warmup, "warmup", 0, "unmeasured warm-up before each measured window (default: a fifth of --duration, at most 1s)")
	fs.Int64Var(&o.MaxRequests, "max-requests", 0, "end a measured window once this many requests (or purchase lives) completed (0: only --duration); metadata, purchase, mixed: per side, each round's window ending at its share; webhooks: the deliveries queued before the drain (default 5000)")
	fs.IntVar(&o.Rounds, "rounds", 0, fmt.Sprintf("metadata, purchase, mixed: measure the baseline and instore in this many alternating rounds of --duration/rounds per side (default: one per 2s of --duration, 5 for 10s; 1: one window each; at most %d)", loadtest.MaxRounds))
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per scenario instead of the table")
	fs.IntVar(&o.Clients, "clients", 0, "concurrent metadata clients (default 64; mixed 8)")
	fs.IntVar(&o.Terminals, "terminals", 100, "virtual terminals (purchase, preauth, mixed)")
	fs.BoolVar(&o.Keyed, "keyed", false, "purchase, preauth, mixed: the ECRs send a fresh Idempotency-Key with every purchase, as the Go SDK does (an idempotency record is claimed, tied to the transaction and completed with the answer)")
	fs.BoolVar(&o.Progress, "progress", false, "purchase, preauth, mixed: the ECRs follow every change of a purchase (afterVersion), as a till showing the terminal's progress does, instead of only its final status")
	fs.IntVar(&o.ECRs, "ecrs", 0, "concurrent ECR clients, each driving its share of the terminals (default: one per terminal)")
	fs.IntVar(&o.Webhooks, "webhooks", 0, "purchase: webhook endpoints at a verifying receiver in this process, compared with the lives without them; webhooks: the endpoints (default 8)")
	fs.IntVar(&o.WebhookConcurrency, "webhook-concurrency", 0, "with --webhooks N or the webhooks scenario: the endpoints' concurrency, 1 to 16 (0: the service's default, 1): above 1, that many deliveries of an endpoint in flight at once, in order per terminal (the receiver checks that order)")
	fs.StringSliceVar(&o.WebhookTypes, "webhook-types", nil, "purchase --webhooks N: the event types (comma-separated, e.g. transaction.final) of the first half of the endpoints, rounded up; the others want every event; the deliveries' lags behind their events are reported per half")
	fs.IntVar(&o.Streams, "streams", 0, "purchase: followers of the event stream, compared with the lives without them")
	fs.IntVar(&o.Readers, "readers", 8, "concurrent status readers (mixed)")
	fs.IntVar(&o.Sessions, "sessions", 10000, fmt.Sprintf("idle terminal sessions (sessions; at most %d)", loadtest.MaxSessions))
	fs.StringVar(&o.DatabaseURL, "database-url", "", "PostgreSQL instead of SQLite: a fresh schema is created in it and dropped at the end")
	fs.StringVar(&o.Synchronous, "sqlite-synchronous", "FULL", "SQLite durability: FULL or NORMAL")
	fs.StringSliceVar(&targets, "target", nil, "run against a running server: online=URL,terminal=URL,ops=URL (loopback only)")
	fs.StringVar(&o.DataDir, "data", "", "the SQLite data directory of the --target server")
	fs.StringArrayVar(&o.ServerArgs, "server-arg", nil, "an extra flag for the server child, e.g. --server-arg=--log-level=warn (repeatable; for experiments)")
	fs.IntVar(&o.ClusterConns, "cluster-conns", 0, "cluster: the PostgreSQL connections of a phase's nodes together, each node taking its share (at least 5), so that one node and three hold the same; 0: 20 a node")
	fs.BoolVar(&o.InProcess, "in-process", false, "run the server in this process instead of a child (its figures then include the load generator)")
	fs.StringVar(&o.ProfileDir, "profile", "", "start the server with --pprof and save CPU and heap profiles of each measured window in this directory (metadata, purchase, mixed: the CPU profile runs from the start of instore's first window to the end of its last; failover: node 2's CPU over the 10 s after the kill, and its goroutines 1 s after it)")

	cmd.AddCommand(newLoadtestBaselineCmd())
	return cmd
}

// newLoadtestBaselineCmd runs the baseline servers as child processes of
// `instore loadtest`; not for people.
func newLoadtestBaselineCmd() *cobra.Command {
	var listen, bodyFile string
	cmd := &cobra.Command{
		Use:    "baseline http|ws",
		Short:  "A baseline server of the load test (run by instore loadtest)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log := logging.New(cmd.ErrOrStderr(), logging.Options{Format: logging.FormatJSON})
			switch args[0] {
			case "http":
				body, err := os.ReadFile(bodyFile)
				if err != nil {
					return usageError{fmt.Errorf("--body: %w", err)}
				}
				return loadtest.ServeBaselineHTTP(cmd.Context(), listen, body, log)
			case "ws":
				return loadtest.ServeBaselineWS(cmd.Context(), listen, log)
			}
			return usageError{fmt.Errorf("unknown baseline %q: want http or ws", args[0])}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().StringVar(&bodyFile, "body", "", "file holding the bytes the http baseline writes")
	return cmd
}

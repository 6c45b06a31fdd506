package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/cluster"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/onlineapi"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/tlsfiles"
)

// secretFlags may also be given as INSTORE_<NAME>_FILE (a file holding the
// value), the form secret managers and container orchestrators provide.
var secretFlags = map[string]bool{
	"token-signing-key":   true,
	"database-url":        true,
	"log-fingerprint-key": true,
}

// envName is the environment variable of a flag: INSTORE_ and the flag name
// in upper case with - as _.
func envName(flag string) string {
	return "INSTORE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv gives every flag that was not set on the command line its value
// from the environment. Flags win over the environment; a secret's
// INSTORE_X_FILE is read when INSTORE_X is unset.
func bindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Name == "json" || f.Name == "env" {
			return
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok && secretFlags[f.Name] {
			if path, fok := os.LookupEnv(name + "_FILE"); fok {
				b, rerr := os.ReadFile(path)
				if rerr != nil {
					err = usageError{fmt.Errorf("%s_FILE: %w", name, rerr)}
					return
				}
				v, ok = strings.TrimRight(string(b), "\r\n"), true
			}
		}
		if !ok {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = usageError{fmt.Errorf("%s: invalid value for --%s: %w", name, f.Name, serr)}
			return
		}
		f.Changed = true
	})
	return err
}

// logFlags configure the log.
type logFlags struct {
	format, level, fingerprintKey string
	// accessFlush is the access log's flush interval (serve and demo).
	accessFlush time.Duration
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), json or text")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.fingerprintKey, "log-fingerprint-key", "", "key for the fingerprints that replace identifiers in logs (default: serve generates one at first start and keeps it in the store; other commands draw one per process); secret")
}

// check validates the format and level flags.
func (l *logFlags) check() (format string, level slog.Level, err error) {
	format, err = logging.ParseFormat(l.format)
	if err != nil {
		return "", 0, usageError{fmt.Errorf("--log-format: %w", err)}
	}
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return "", 0, usageError{fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", l.level)}
	}
	return format, level, nil
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	format, level, err := l.check()
	if err != nil {
		return nil, err
	}
	var key []byte
	if l.fingerprintKey != "" {
		key = []byte(l.fingerprintKey)
	}
	return logging.New(w, logging.Options{Format: format, Level: level, FingerprintKey: key}), nil
}

// registerAccess adds the access log's flag (serve and demo).
func (l *logFlags) registerAccess(fs *pflag.FlagSet) {
	fs.DurationVar(&l.accessFlush, "access-log-flush", 100*time.Millisecond,
		"the access log (one line per HTTP request) is written in batches at this interval, one write instead of one per line; a crash loses at most this much of it (0: every line at once; at most 10s)")
}

// loggers returns the service logger and the access logger, which share
// the output and the fingerprint key; the access logger is buffered
// (--access-log-flush). stop writes out the buffered lines: call it last.
func (l *logFlags) loggers(w io.Writer) (logger, access *slog.Logger, stop func() error, err error) {
	if l.accessFlush < 0 || l.accessFlush > logging.MaxFlushInterval {
		return nil, nil, nil, usageError{fmt.Errorf("--access-log-flush must be between 0 and %s, got %s", logging.MaxFlushInterval, l.accessFlush)}
	}
	cp := *l
	// The access logger writes through a wrapper: it takes w's format.
	cp.format = logging.FormatFor(l.format, w)
	if l.fingerprintKey == "" {
		// One random key for both loggers, so that their fingerprints of
		// the same identifier match.
		key := make([]byte, 32)
		rand.Read(key)
		cp.fingerprintKey = string(key)
	}
	l = &cp
	if logger, err = l.logger(w); err != nil {
		return nil, nil, nil, err
	}
	bw, stop := logging.Buffered(w, l.accessFlush)
	if access, err = l.logger(bw); err != nil {
		return nil, nil, nil, err
	}
	return logger, access, stop, nil
}

// serviceFlags are the flags of serve and demo.
type serviceFlags struct {
	listenOnline, listenAccess, listenTerminal, listenOps string

	data, databaseURL, synchronous string

	signingKey         string
	tokenTTL, cacheTTL time.Duration
	paymentMethodsFile string

	rateLimit float64
	rateBurst int

	streamsPerClient, streamsPerNode int
	streamWriteTimeout               time.Duration

	shutdownTimeout time.Duration
	log             logFlags

	sandbox                                        bool
	ackTimeout, txDeadline, printTimeout, simDelay time.Duration
	captureTolerance                               float64
	preAuthValidity                                time.Duration
	nodeID                                         string
	dbMaxConns                                     int
	heartbeat, dead, rescan                        time.Duration
	idempotencyWait                                time.Duration
	pprof                                          bool
	webhookAllowPrivate                            bool

	// tlsCert and tlsKey are the PEM files of serve's TLS certificate,
	// tlsWatch how often they are looked at (registerTLS).
	tlsCert, tlsKey string
	tlsWatch        time.Duration
}

// registerTLS adds the TLS flags (serve).
func (s *serviceFlags) registerTLS(fs *pflag.FlagSet) {
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate file (with its chain): serve the Online API, the Access API and the gateway (wss://) over TLS; needs --tls-key; reloaded on SIGHUP and when the files change")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.DurationVar(&s.tlsWatch, "tls-watch-interval", tlsfiles.DefaultWatchInterval, "how often the TLS files' size and modification time are checked for a change (0: only on SIGHUP)")
}

func (s *serviceFlags) register(fs *pflag.FlagSet, host string) {
	fs.StringVar(&s.listenOnline, "listen-online", host+":8080", "address of the Online API (and /oauth2/token)")
	fs.StringVar(&s.listenAccess, "listen-access", host+":8081", "address of Access API 2.0")
	fs.StringVar(&s.listenTerminal, "listen-terminal", host+":8082", "address of the terminal gateway")
	fs.StringVar(&s.listenOps, "listen-ops", "127.0.0.1:9090", "address of /healthz, /readyz and /metrics; never expose it publicly")
	fs.StringVar(&s.data, "data", "", "data directory holding the SQLite database")
	fs.StringVar(&s.databaseURL, "database-url", "", "PostgreSQL URL (postgres://...) instead of SQLite; secret")
	fs.StringVar(&s.synchronous, "sqlite-synchronous", "FULL", "SQLite durability: FULL (an acknowledged result survives a power cut) or NORMAL (survives a process crash; faster)")
	fs.StringVar(&s.signingKey, "token-signing-key", "", "HMAC key (at least 32 bytes) that signs access tokens; default: generated at first start and kept in the store; secret")
	fs.DurationVar(&s.tokenTTL, "token-ttl", time.Hour, "lifetime of issued access tokens (1m to 24h)")
	fs.DurationVar(&s.cacheTTL, "auth-cache-ttl", time.Second, "how long a verified token and key pair is trusted before the store is asked again; revocations take effect within it (0 to 1m)")
	fs.StringVar(&s.paymentMethodsFile, "payment-methods-file", "", "JSON file replacing the paymentMethods list (three entries, ids 0, 1, 2)")
	fs.Float64Var(&s.rateLimit, "rate-limit", 100, "requests per second allowed per API client, taken before the store is read (0: no limit)")
	fs.IntVar(&s.rateBurst, "rate-burst", 200, "burst allowed above --rate-limit")
	fs.IntVar(&s.streamsPerClient, "streams-per-client", onlineapi.DefaultStreamsPerClient, "event streams (GET /events, text/event-stream) one API client may hold open on this node at once; one more is answered 429")
	fs.IntVar(&s.streamsPerNode, "streams-per-node", onlineapi.DefaultStreamsPerNode, "event streams this node holds open at once, of all clients; one more is answered 429")
	fs.DurationVar(&s.streamWriteTimeout, "stream-write-timeout", onlineapi.DefaultStreamWriteTimeout, "how long a write to an event stream may wait for its client to read before the stream is dropped (1s to 10m)")
	fs.DurationVar(&s.shutdownTimeout, "shutdown-timeout", 0, "how long operations in flight may take to finish on SIGINT/SIGTERM; longer than the longest wait for a terminal (--ack-timeout + 1s, --print-timeout) by at least 1s (default: that wait plus 10s, 40s with the other defaults)")
	fs.DurationVar(&s.ackTimeout, "ack-timeout", 10*time.Second, "how long a purchase waits for the terminal's acknowledgement (then WP25)")
	fs.DurationVar(&s.txDeadline, "transaction-deadline", 120*time.Second, "how long an acknowledged transaction may wait for its result (then WP36)")
	fs.DurationVar(&s.printTimeout, "print-timeout", 30*time.Second, "how long a print job waits for the terminal (then TIMEOUT)")
	fs.Float64Var(&s.captureTolerance, "capture-tolerance", instore.DefaultCaptureTolerance, "how far past its authorised amount a pre-authorisation's capture may go, as a fraction (0.20: 20 %, room for a tip; 0: none)")
	fs.DurationVar(&s.preAuthValidity, "preauth-validity", instore.DefaultPreAuthValidity, "how long an approved pre-authorisation stays OPEN (1m to 744h; from 1s with --sandbox); then the service voids it on its terminal and it ends EXPIRED")
	fs.DurationVar(&s.idempotencyWait, "idempotency-wait", httpapi.DefaultIdempotencyWait, "how long a retry with an Idempotency-Key on the Online API waits for the first request with its key (then 409 conflict)")
	fs.IntVar(&s.dbMaxConns, "database-max-conns", sqlstore.DefaultMaxConns, fmt.Sprintf("at most this many PostgreSQL connections on this node (at least %d): two fifths for writes, two for reads, the rest for progress stages; nodes times this stays below max_connections", sqlstore.MinMaxConns))
	fs.StringVar(&s.nodeID, "node-id", "", "this node's name in a cluster on PostgreSQL (default: a random one at each start); shown in logs")
	fs.DurationVar(&s.heartbeat, "cluster-heartbeat", cluster.DefaultHeartbeat, "how often a node on PostgreSQL records that it is alive")
	fs.DurationVar(&s.dead, "cluster-dead-after", cluster.DefaultDead, "after how long without a heartbeat a node is gone and its terminals' sessions with it (at least twice --cluster-heartbeat)")
	fs.DurationVar(&s.rescan, "cluster-rescan", cluster.DefaultRescan, "how often a node redoes from the database what a lost wake-up from another node would have done")
	fs.DurationVar(&s.simDelay, "sim-delay", 1500*time.Millisecond, "how long the built-in virtual terminals take to \"read a card\" (sandbox)")
	s.log.register(fs)
}

func checkAddr(flag, addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, usageError{fmt.Errorf("--%s: %q is not host:port", flag, addr)}
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return 0, usageError{fmt.Errorf("--%s: %q has no valid port", flag, addr)}
	}
	return p, nil
}

// config validates the flags and returns the service configuration.
func (s *serviceFlags) config(logger *slog.Logger) (server.Config, error) {
	cfg := server.Config{
		ListenOnline: s.listenOnline, ListenAccess: s.listenAccess,
		ListenTerminal: s.listenTerminal, ListenOps: s.listenOps,
		DataDir: s.data, DatabaseURL: s.databaseURL,
		SQLiteSynchronous: strings.ToUpper(s.synchronous),
		TokenTTL:          s.tokenTTL, AuthCacheTTL: s.cacheTTL,
		RateLimit: s.rateLimit, RateBurst: s.rateBurst,
		StreamsPerClient: s.streamsPerClient, StreamsPerNode: s.streamsPerNode, StreamWriteTimeout: s.streamWriteTimeout,
		ShutdownTimeout: s.shutdownTimeout, Logger: logger,
	}
	b := currentBuild()
	cfg.Version, cfg.Commit = b.Version, b.Commit
	ports := map[int]string{}
	for _, f := range []struct{ name, addr string }{
		{"listen-online", s.listenOnline}, {"listen-access", s.listenAccess},
		{"listen-terminal", s.listenTerminal}, {"listen-ops", s.listenOps},
	} {
		p, err := checkAddr(f.name, f.addr)
		if err != nil {
			return cfg, err
		}
		if other, dup := ports[p]; dup && p != 0 {
			return cfg, usageError{fmt.Errorf("--%s and --%s use the same port %d", other, f.name, p)}
		}
		ports[p] = f.name
	}
	if cfg.SQLiteSynchronous != "FULL" && cfg.SQLiteSynchronous != "NORMAL" {
		return cfg, usageError{fmt.Errorf("--sqlite-synchronous: %q is not FULL or NORMAL", s.synchronous)}
	}
	if s.databaseURL != "" && !strings.HasPrefix(s.databaseURL, "postgres://") && !strings.HasPrefix(s.databaseURL, "postgresql://") {
		return cfg, usageError{fmt.Errorf("--database-url must start with postgres:// or postgresql://")}
	}
	if s.signingKey != "" {
		if len(s.signingKey) < auth.MinSigningKeyBytes {
			return cfg, usageError{fmt.Errorf("--token-signing-key must be at least %d bytes", auth.MinSigningKeyBytes)}
		}
		cfg.TokenSigningKey = []byte(s.signingKey)
	}
	if s.tokenTTL < time.Minute || s.tokenTTL > 24*time.Hour {
		return cfg, usageError{fmt.Errorf("--token-ttl must be between 1m and 24h, got %s", s.tokenTTL)}
	}
	if s.cacheTTL < 0 || s.cacheTTL > time.Minute {
		return cfg, usageError{fmt.Errorf("--auth-cache-ttl must be between 0 and 1m, got %s", s.cacheTTL)}
	}
	if s.rateLimit < 0 || s.rateBurst < 0 {
		return cfg, usageError{fmt.Errorf("--rate-limit and --rate-burst must not be negative")}
	}
	if s.streamsPerClient < 1 || s.streamsPerNode < s.streamsPerClient || s.streamsPerNode > 1000000 {
		return cfg, usageError{fmt.Errorf("--streams-per-client must be at least 1 and --streams-per-node from --streams-per-client to 1000000, got %d and %d", s.streamsPerClient, s.streamsPerNode)}
	}
	if s.streamWriteTimeout < time.Second || s.streamWriteTimeout > 10*time.Minute {
		return cfg, usageError{fmt.Errorf("--stream-write-timeout must be between 1s and 10m, got %s", s.streamWriteTimeout)}
	}
	if s.shutdownTimeout < 0 {
		return cfg, usageError{fmt.Errorf("--shutdown-timeout must not be negative")}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"ack-timeout", s.ackTimeout}, {"transaction-deadline", s.txDeadline}, {"print-timeout", s.printTimeout}, {"idempotency-wait", s.idempotencyWait}} {
		if d.v < 100*time.Millisecond || d.v > time.Hour {
			return cfg, usageError{fmt.Errorf("--%s must be between 100ms and 1h, got %s", d.flag, d.v)}
		}
	}
	if s.captureTolerance < 0 || s.captureTolerance > 1 {
		return cfg, usageError{fmt.Errorf("--capture-tolerance must be between 0 and 1, got %g", s.captureTolerance)}
	}
	// The sandbox takes a validity of seconds, for tests of the expiry
	// (internal/crashtest); a real pre-auth is held for a minute at least.
	minValidity, minWord := time.Minute, "1m"
	if s.sandbox {
		minValidity, minWord = time.Second, "1s (--sandbox)"
	}
	if s.preAuthValidity < minValidity || s.preAuthValidity > 31*24*time.Hour {
		return cfg, usageError{fmt.Errorf("--preauth-validity must be between %s and 744h (31 days), got %s", minWord, s.preAuthValidity)}
	}
	// The service reads 0 as the default: no tolerance is negative there.
	cfg.CaptureTolerance, cfg.PreAuthValidity = s.captureTolerance, s.preAuthValidity
	if cfg.CaptureTolerance == 0 {
		cfg.CaptureTolerance = -1
	}
	if s.simDelay < 0 || s.simDelay > time.Minute {
		return cfg, usageError{fmt.Errorf("--sim-delay must be between 0 and 1m, got %s", s.simDelay)}
	}
	cfg.Sandbox, cfg.Pprof, cfg.WebhookAllowPrivate = s.sandbox, s.pprof, s.webhookAllowPrivate
	cfg.AckTimeout, cfg.TransactionDeadline, cfg.PrintTimeout, cfg.SimDelay = s.ackTimeout, s.txDeadline, s.printTimeout, s.simDelay
	if s.heartbeat <= 0 || s.dead < 2*s.heartbeat || s.rescan <= 0 {
		return cfg, usageError{fmt.Errorf("--cluster-heartbeat and --cluster-rescan must be positive and --cluster-dead-after at least twice --cluster-heartbeat")}
	}
	if len(s.nodeID) > 64 || strings.ContainsFunc(s.nodeID, func(r rune) bool { return r < 0x21 || r > 0x7e || r == '@' }) {
		return cfg, usageError{fmt.Errorf("--node-id must be at most 64 printable ASCII characters, without spaces or @")}
	}
	cfg.NodeID, cfg.ClusterHeartbeat, cfg.ClusterDead, cfg.ClusterRescan = s.nodeID, s.heartbeat, s.dead, s.rescan
	if s.dbMaxConns < sqlstore.MinMaxConns || s.dbMaxConns > 10000 {
		return cfg, usageError{fmt.Errorf("--database-max-conns must be between %d and 10000, got %d", sqlstore.MinMaxConns, s.dbMaxConns)}
	}
	cfg.DatabaseMaxConns = s.dbMaxConns
	cfg.IdempotencyWait = s.idempotencyWait
	if err := checkShutdownTimeout(cfg); err != nil {
		return cfg, err
	}
	if s.tlsCert != "" || s.tlsKey != "" {
		if s.tlsCert == "" || s.tlsKey == "" {
			return cfg, usageError{errors.New("--tls-cert and --tls-key go together: set both or neither")}
		}
		if s.tlsWatch < 0 || s.tlsWatch > time.Hour {
			return cfg, usageError{fmt.Errorf("--tls-watch-interval must be between 0 and 1h, got %s", s.tlsWatch)}
		}
		h, err := tlsfiles.Load(s.tlsCert, s.tlsKey, logger)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.TLS = h
	}
	if s.paymentMethodsFile != "" {
		f, err := os.Open(s.paymentMethodsFile)
		if err != nil {
			return cfg, usageError{fmt.Errorf("--payment-methods-file: %w", err)}
		}
		defer f.Close()
		pm, err := instore.ReadPaymentMethods(f)
		if err != nil {
			return cfg, usageError{fmt.Errorf("--payment-methods-file: %w", err)}
		}
		cfg.PaymentMethods = pm
	}
	return cfg, nil
}

// checkShutdownTimeout refuses a shutdown time-out that an operation in
// flight can outlast: its answer would be lost at shutdown, and its
// Idempotency-Key record left running. (The Online API's write time-out
// needs no check: it is derived from the waits, see server.Config.)
func checkShutdownTimeout(cfg server.Config) error {
	if cfg.ShutdownTimeout == 0 {
		return nil
	}
	wait, flag := cfg.PostWait(), "--print-timeout"
	if wait == cfg.AckTimeout+time.Second {
		flag = "--ack-timeout + 1s"
	}
	if least := wait + time.Second; cfg.ShutdownTimeout < least {
		return usageError{fmt.Errorf("--shutdown-timeout %s is too short: an operation in flight at shutdown may still wait %s for its terminal (%s), and its answer would be lost; set at least %s, or leave it unset (%s)",
			cfg.ShutdownTimeout, wait, flag, least, cfg.DefaultShutdownTimeout())}
	}
	return nil
}

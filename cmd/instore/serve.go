package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/tlsfiles"
)

func newServeCmd() *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service (production): Online API, Access API, terminal gateway, ops",
		Long: `Run the service. Every flag can also be set by the environment variable
INSTORE_<FLAG> (upper case, - as _), e.g. INSTORE_DATABASE_URL; secrets also
by INSTORE_<FLAG>_FILE naming a file that holds the value. Flags win.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return bindEnv(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := f.log.check(); err != nil {
				return err
			}
			cfg, err := f.config(nil)
			if err != nil {
				return err
			}
			if cfg.DataDir == "" && cfg.DatabaseURL == "" {
				return usageError{errors.New("no store: set --data DIR (SQLite) or --database-url postgres://... (or INSTORE_DATA / INSTORE_DATABASE_URL)")}
			}
			release, err := lockDataDir(cfg)
			if err != nil {
				return err
			}
			// Last of all: the store is closed by then.
			defer release()
			st, err := server.OpenStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			// The loggers fingerprint with the key kept in the store (unless
			// one is configured): the same on every node and across restarts,
			// as `instore admin fingerprint` computes it.
			key, err := logging.LoadFingerprintKey(cmd.Context(), st, []byte(f.log.fingerprintKey))
			if err != nil {
				st.Close()
				return err
			}
			f.log.fingerprintKey = string(key)
			logger, accessLog, stopLog, err := f.log.loggers(cmd.ErrOrStderr())
			if err != nil {
				st.Close()
				return err
			}
			// Last, after the server stopped: the buffered access lines.
			defer stopLog()
			cfg.Logger, cfg.AccessLogger = logger, accessLog
			if cfg.TLS != nil {
				cfg.TLS.SetLogger(logger)
			}
			// SIGHUP reloads the TLS files (systemctl reload); without
			// TLS it is logged and ignored rather than ending the process.
			stopReload := watchReload(cmd.Context(), cfg.TLS, f.tlsWatch, logger)
			defer stopReload()
			srv, err := server.NewWithStore(cmd.Context(), cfg, st)
			if err != nil {
				st.Close()
				return err
			}
			if err := srv.Start(); err != nil {
				return err
			}
			logger.Info("instore serving", "version", versionString())
			select {
			case <-cmd.Context().Done():
				logger.Info("shutting down")
			case err = <-srv.Err():
				err = fmt.Errorf("stopping: %w", err)
			}
			if cerr := srv.Close(); cerr != nil && err == nil {
				err = cerr
			}
			return err
		},
	}
	f.log.registerAccess(cmd.Flags())
	f.register(cmd.Flags(), "")
	f.registerTLS(cmd.Flags())
	cmd.Flags().BoolVar(&f.pprof, "pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the ops listener")
	cmd.Flags().BoolVar(&f.webhookAllowPrivate, "webhook-allow-private", false, "let webhook endpoints be, and deliveries reach, addresses that are not public: loopback, private, link-local, special-purpose (on with --sandbox)")
	cmd.Flags().BoolVar(&f.sandbox, "sandbox", false, "sandbox mode: run three virtual terminals in-process and serve the sandbox control API (/sandbox/v1)")
	return cmd
}

// lockDataDir takes the lock of the SQLite data directory that serve and
// demo run on (none on PostgreSQL, which serves several nodes): a second
// process on the same directory is refused with exit status 2, the lock
// being released when this one ends, however it ends (kill -9 too).
// `instore admin` takes no lock; it shares the store with the server.
func lockDataDir(cfg server.Config) (release func(), err error) {
	if cfg.DatabaseURL != "" || cfg.DataDir == "" {
		return func() {}, nil
	}
	l, err := server.LockDataDir(cfg.DataDir)
	if errors.Is(err, server.ErrDataDirLocked) {
		return nil, exitError{code: 2, err: err}
	}
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release() }, nil
}

// watchReload reloads the TLS certificate on SIGHUP and, every interval
// (0: never), when its files changed, until the returned function is
// called. Without TLS a SIGHUP is logged and ignored.
func watchReload(ctx context.Context, h *tlsfiles.Holder, interval time.Duration, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if h == nil {
					logger.Info("SIGHUP: nothing to reload (no --tls-cert)")
					continue
				}
				logger.Info("SIGHUP: reloading the TLS certificate")
				h.Reload() // a failure is logged, the old certificate stays
			}
		}
	})
	if h != nil {
		wg.Go(func() { h.Watch(ctx, interval) })
	}
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}

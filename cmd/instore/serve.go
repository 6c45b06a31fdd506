package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/internal/server"
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
			logger, accessLog, stopLog, err := f.log.loggers(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// Last, after the server stopped: the buffered access lines.
			defer stopLog()
			cfg, err := f.config(logger)
			if err != nil {
				return err
			}
			cfg.AccessLogger = accessLog
			if cfg.DataDir == "" && cfg.DatabaseURL == "" {
				return usageError{errors.New("no store: set --data DIR (SQLite) or --database-url postgres://... (or INSTORE_DATA / INSTORE_DATABASE_URL)")}
			}
			srv, err := server.New(cmd.Context(), cfg)
			if err != nil {
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
	cmd.Flags().BoolVar(&f.pprof, "pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the ops listener")
	cmd.Flags().BoolVar(&f.sandbox, "sandbox", false, "sandbox mode: run three virtual terminals in-process and serve the sandbox control API (/sandbox/v1)")
	return cmd
}

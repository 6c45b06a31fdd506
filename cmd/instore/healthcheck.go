package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd is the probe of a container image that has no curl
// (FROM scratch): it asks the ops listener of the service on this host.
func newHealthcheckCmd() *cobra.Command {
	var (
		ops     string
		live    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Ask the local service's ops listener whether it is ready (exit 0) or not (exit 1)",
		Long: `Ask the ops listener of the service on this host: GET /readyz (or /healthz
with --live). Exit 0 on 200, 1 otherwise, with the reason on stderr. It is the
container image's HEALTHCHECK, which has no curl.

--listen-ops is the serve flag of the same name, also read from
INSTORE_LISTEN_OPS, so the probe follows the service's setting; an unspecified
host (0.0.0.0, [::] or none) is asked on 127.0.0.1.`,
		Example: `  instore healthcheck
  INSTORE_LISTEN_OPS=0.0.0.0:9090 instore healthcheck --live`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return bindEnv(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := checkAddr("listen-ops", ops); err != nil {
				return err
			}
			if timeout <= 0 || timeout > time.Minute {
				return usageError{fmt.Errorf("--timeout must be between 0 and 1m, got %s", timeout)}
			}
			host, port, _ := net.SplitHostPort(ops)
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			path := "/readyz"
			if live {
				path = "/healthz"
			}
			u := "http://" + net.JoinHostPort(host, port) + path
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return usageError{err}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("GET %s: %w", u, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s %s", u, resp.Status, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", body)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&ops, "listen-ops", "127.0.0.1:9090", "the service's ops listener address (as serve --listen-ops)")
	fs.BoolVar(&live, "live", false, "ask /healthz (the process answers) instead of /readyz (ready for traffic)")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/server"
)

func newDemoCmd() *cobra.Command {
	var (
		f           serviceFlags
		asJSON      bool
		asEnv       bool
		interactive bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run everything with no setup: seeded merchant and credentials, sandbox on",
		Long: `Run the whole service on this machine with no configuration: SQLite in --data DIR
(or a temporary directory removed at exit), or the PostgreSQL database of
--database-url; one customer, one active merchant, three linked virtual
terminals, Online API and Access API credentials and bearer tokens valid for
24 h. Started again on the same --data DIR or database it keeps everything and
prints the same credentials (kept in clear: a demo's, never production's).`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return bindEnv(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && asEnv {
				return usageError{errors.New("--json and --env exclude each other")}
			}
			if f.data != "" && f.databaseURL != "" {
				return usageError{errors.New("--data (SQLite) and --database-url (PostgreSQL) exclude each other")}
			}
			logger, accessLog, stopLog, err := f.log.loggers(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// Last, after the server stopped: the buffered access lines.
			defer stopLog()
			f.sandbox = true // the demo is a sandbox (a short --preauth-validity, ...)
			cfg, err := f.config(logger)
			if err != nil {
				return err
			}
			cfg.AccessLogger = accessLog
			cfg.Sandbox, cfg.InteractiveFirst = true, interactive
			// --data: one process per directory, as serve (a temporary
			// directory is the demo's own).
			release, err := lockDataDir(cfg)
			if err != nil {
				return err
			}
			defer release()
			if demoConfigHook != nil {
				demoConfigHook(&cfg)
			}
			d, err := demo.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			info := d.Info()
			out := cmd.OutOrStdout()
			// demo.Start returned once every virtual terminal was ready: a
			// purchase sent as soon as this prints finds its terminal.
			if asJSON {
				b, _ := json.Marshal(info)
				fmt.Fprintf(out, "%s\n", b)
			} else if asEnv {
				printEnv(out, d, info)
			} else {
				printBanner(out, d, info, interactive)
			}
			select {
			case <-cmd.Context().Done():
			case err = <-d.Server.Err():
			}
			if cerr := d.Close(); cerr != nil && err == nil {
				err = cerr
			}
			return err
		},
	}
	f.log.registerAccess(cmd.Flags())
	f.register(cmd.Flags(), "127.0.0.1")
	cmd.Flags().BoolVar(&interactive, "interactive", false, "the first virtual terminal waits for a person: its outcome is decided by a click in the console")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object on one line instead of the banner: every value --env prints, and more (keys: docs/sandbox.md)")
	cmd.Flags().BoolVar(&asEnv, "env", false, "print export INSTORE_...=... lines (for eval, or to paste into another shell) instead of the banner")
	return cmd
}

// demoConfigHook, when set (by tests), changes the demo's server
// configuration before it starts.
var demoConfigHook func(*server.Config)

// printBanner prints what the demo runs and its credentials for people;
// with interactive, it says which terminal waits for a click.
func printBanner(w io.Writer, d *demo.Demo, info demo.Info, interactive bool) {
	c := d.Credentials
	var b strings.Builder
	fmt.Fprintf(&b, "instore demo is running (sandbox; data in %s)\n\n", d.Storage())
	fmt.Fprintf(&b, "  Online API        %s/in-store/api/v1\n", info.OnlineAPIBaseURL)
	fmt.Fprintf(&b, "  OAuth token       %s/oauth2/token\n", info.OnlineAPIBaseURL)
	fmt.Fprintf(&b, "  Access API 2.0    %s\n", info.AccessAPIBaseURL)
	fmt.Fprintf(&b, "  Terminal gateway  %s\n", info.TerminalGatewayURL)
	fmt.Fprintf(&b, "  Console           %s\n", info.ConsoleURL)
	fmt.Fprintf(&b, "  Ops (metrics)     %s/metrics\n\n", d.Server.URL("ops"))
	fmt.Fprintf(&b, "Online API (merchant %s)\n", info.MerchantID)
	fmt.Fprintf(&b, "  Subscription key  %s\n", info.SubscriptionKey)
	fmt.Fprintf(&b, "  Access token      %s\n", info.AccessToken)
	fmt.Fprintf(&b, "                    (valid until %s)\n", c.AccessTokenExpires.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "  Client id         %s\n", info.ClientID)
	fmt.Fprintf(&b, "  Client secret     %s\n\n", info.ClientSecret)
	fmt.Fprintf(&b, "Access API 2.0 (customer %s)\n", info.CustomerID)
	fmt.Fprintf(&b, "  Subscription key  %s\n", info.AccessSubscriptionKey)
	fmt.Fprintf(&b, "  Access token      %s\n", info.AccessAccessToken)
	fmt.Fprintf(&b, "  Client id         %s\n", c.AccessClientID)
	fmt.Fprintf(&b, "  Client secret     %s\n\n", c.AccessClientSecret)
	if len(info.Terminals) == 0 {
		fmt.Fprintf(&b, "Terminals: none yet.\n\n")
	} else {
		fmt.Fprintf(&b, "Virtual terminals (linked):\n")
		for i, t := range info.Terminals {
			fmt.Fprintf(&b, "  %s  %-10s  %s", t.TerminalID, t.Model, t.SerialNumber)
			if interactive && i == 0 {
				b.WriteString("  <- interactive: waits for your click in the console")
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		if interactive {
			fmt.Fprintf(&b, "Interactive: terminal %s shows each transaction and waits until you click Approve,\nDecline, ... on its card at %s; the others follow the amount rules.\n\n",
				info.Terminals[0].TerminalID, info.ConsoleURL)
		}
	}
	fmt.Fprintf(&b, "Try it:\n  curl -s %s/in-store/api/v1/metadata -H 'accept: application/json' -H 'Ocp-Apim-Subscription-Key: %s' -H 'Authorization: Bearer %s'\n\n",
		info.OnlineAPIBaseURL, info.SubscriptionKey, info.AccessToken)
	b.WriteString("Press Ctrl-C to stop.\n")
	io.WriteString(w, b.String())
}

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/sim"
)

// Environment variables of the device secret. The generic INSTORE_SECRET
// that bindEnv would derive from --secret is not used: the device secret
// has its own, unmistakable names.
const (
	envDeviceSecret     = "INSTORE_DEVICE_SECRET"
	envDeviceSecretFile = envDeviceSecret + "_FILE"
)

func newTerminalCmd() *cobra.Command {
	var (
		cfg    sim.Config
		lf     logFlags
		caFile string
	)
	cmd := &cobra.Command{
		Use:   "terminal",
		Short: "Run one virtual terminal against a terminal gateway",
		Long: `Run one virtual payment terminal, a genuine client of the terminal gateway:
it connects with its serial number and device secret, shows a link code while
unlinked and answers purchases and refunds by the sandbox outcome rules (the
last two digits of the amount). Its screen is printed to stdout whenever it
changes; it runs until SIGINT or SIGTERM.

--gateway may be given several times, one URL per node of the service: the
terminal connects to the first, and when a session ends or a connection fails
it tries the next at once (after the last, the first again). It waits before
reconnecting only after every URL failed in a row, from 500ms doubling up to
--reconnect-max; a session that got as far as hello starts the wait over. A
node that closes the session for a restart (1012) or shutdown (1001) sends it
to the next URL at once. INSTORE_GATEWAY may list several URLs separated by
spaces.

The secret is best given as INSTORE_DEVICE_SECRET or INSTORE_DEVICE_SECRET_FILE
(a file holding it) rather than --secret, which other users of the machine can
see in the process list. Other flags may be given as INSTORE_<FLAG>.`,
		Example: `  instore terminal --gateway ws://127.0.0.1:8082/terminal/v1/connect --serial VT-0001 --delay 1.5s
  instore terminal --gateway ws://node-a:8082/terminal/v1/connect --gateway ws://node-b:8082/terminal/v1/connect --serial VT-0001
  instore terminal --gateway wss://pos.example:8082/terminal/v1/connect --ca-file ca.pem --serial VT-0001`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			fromFlag := cmd.Flags().Changed("secret")
			if err := bindEnv(cmd); err != nil {
				return err
			}
			if !fromFlag {
				s, err := deviceSecretFromEnv()
				if err != nil {
					return err
				}
				cfg.Secret = s
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Several URLs in one value (INSTORE_GATEWAY): a URL has no
			// spaces.
			var urls []string
			for _, v := range cfg.GatewayURLs {
				urls = append(urls, strings.Fields(v)...)
			}
			cfg.GatewayURLs = urls
			switch {
			case len(cfg.GatewayURLs) == 0:
				return usageError{errors.New("--gateway is required (the gateway's ws:// or wss:// URL)")}
			case cfg.SerialNumber == "":
				return usageError{errors.New("--serial is required")}
			case cfg.Secret == "":
				return usageError{fmt.Errorf("the device secret is required: --secret, %s or %s", envDeviceSecret, envDeviceSecretFile)}
			}
			logger, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.Logger = logger
			if cfg.BackoffMax < 0 {
				return usageError{errors.New("--reconnect-max must not be negative")}
			}
			cfg.BackoffMin = min(sim.DefaultBackoffMin, cfg.BackoffMax)
			if caFile != "" {
				tc, err := client.TLSConfigTrusting(caFile)
				if err != nil {
					return usageError{fmt.Errorf("--ca-file: %w", err)}
				}
				d := *websocket.DefaultDialer
				d.TLSClientConfig = tc
				cfg.Dialer = &d
			}
			t, err := sim.New(cfg)
			if err != nil {
				return usageError{err}
			}
			t.PrintScreens(cmd.OutOrStdout())
			return t.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&cfg.GatewayURLs, "gateway", nil, "terminal gateway URL, e.g. ws://127.0.0.1:8082/terminal/v1/connect; repeat it for each node, tried in order")
	fs.StringVar(&cfg.SerialNumber, "serial", "", "the device's serial number")
	fs.StringVar(&cfg.Secret, "secret", "", "the device secret (prefer "+envDeviceSecret+" or "+envDeviceSecretFile+"); secret")
	fs.StringVar(&cfg.Model, "model", instore.ModelCountertop, "device model: "+strings.Join(instore.Models, ", "))
	fs.StringVar(&cfg.SoftwareVersion, "software-version", sim.DefaultSoftwareVersion, "software version reported to the gateway")
	fs.DurationVar(&cfg.Delay, "delay", 1500*time.Millisecond, "how long reading a card takes")
	fs.StringVar(&caFile, "ca-file", "", "PEM file of CA certificates to trust for a wss:// gateway, besides the system's (a gateway whose certificate a private CA issued)")
	fs.DurationVar(&cfg.BackoffMax, "reconnect-max", sim.DefaultBackoffMax, "the longest wait before reconnecting; the terminal waits only after every --gateway failed in a row, from 500ms (or this, if shorter) doubling up to this, and starts over after a session that got as far as hello")
	lf.register(fs)
	return cmd
}

// deviceSecretFromEnv reads INSTORE_DEVICE_SECRET, or the file that
// INSTORE_DEVICE_SECRET_FILE names.
func deviceSecretFromEnv() (string, error) {
	if v, ok := os.LookupEnv(envDeviceSecret); ok {
		return v, nil
	}
	path, ok := os.LookupEnv(envDeviceSecretFile)
	if !ok {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError{fmt.Errorf("%s: %w", envDeviceSecretFile, err)}
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

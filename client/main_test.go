package client_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testserver"
)

// TestMain starts one demo for the examples and sets the environment they
// read with client.FromEnv, as the export lines of `instore demo --env` do
// for a person: the examples are exactly what an integrator writes.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "instore-client-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := testserver.Config(dir)
	cfg.TokenTTL, cfg.AckTimeout, cfg.TransactionDeadline, cfg.PrintTimeout = time.Hour, 2*time.Second, 30*time.Second, 5*time.Second
	d, err := demo.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	info := d.Info()
	for k, v := range map[string]string{
		client.EnvOnlineAPIURL: info.OnlineAPIBaseURL, client.EnvSubscriptionKey: info.SubscriptionKey,
		client.EnvClientID: info.ClientID, client.EnvClientSecret: info.ClientSecret,
		client.EnvAccessAPIURL: info.AccessAPIBaseURL, client.EnvAccessAPISubscriptionKey: info.AccessSubscriptionKey,
		client.EnvAccessAPIToken: info.AccessAccessToken,
		"INSTORE_TERMINAL_ID":    info.Terminals[0].TerminalID,
	} {
		os.Setenv(k, v)
	}
	// demo.Start returned once the virtual terminals were ready.
	code := m.Run()
	d.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

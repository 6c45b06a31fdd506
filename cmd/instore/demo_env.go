package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
)

// waitTerminalsOnline waits, up to a few seconds, until the demo's virtual
// terminals hold their gateway sessions, so that a purchase sent right
// after the export lines appear finds its terminal online.
func waitTerminalsOnline(ctx context.Context, d *demo.Demo, info demo.Info) {
	deadline := time.Now().Add(5 * time.Second)
	for _, t := range info.Terminals {
		for !d.Server.Gateway.Online(t.SerialNumber) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// printEnv prints the demo's URLs and credentials as shell export lines,
// the variables `instore ecr` and client.FromEnv read: pasted into a shell,
// or redirected to a file and sourced, they point that shell at the demo.
// The last line is a comment, so the output stays valid shell and a script
// can wait for it.
func printEnv(w io.Writer, d *demo.Demo, info demo.Info) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "export %s=%s\n", name, quote(value))
		}
	}
	line(client.EnvOnlineAPIURL, info.OnlineAPIBaseURL)
	line(client.EnvSubscriptionKey, info.SubscriptionKey)
	line(client.EnvAccessToken, info.AccessToken)
	line(client.EnvClientID, info.ClientID)
	line(client.EnvClientSecret, info.ClientSecret)
	if len(info.Terminals) > 0 {
		line(envTerminalID, info.Terminals[0].TerminalID)
	}
	line(envCurrency, "SEK")
	line(client.EnvAccessAPIURL, info.AccessAPIBaseURL)
	line(client.EnvAccessAPISubscriptionKey, info.AccessSubscriptionKey)
	line(client.EnvAccessAPIToken, info.AccessAccessToken)
	if c := d.Credentials; c != nil {
		line(client.EnvAccessAPIClientID, c.AccessClientID)
		line(client.EnvAccessAPIClientSecret, c.AccessClientSecret)
	}
	line("INSTORE_CUSTOMER_ID", info.CustomerID)
	fmt.Fprintf(&b, "# instore demo is running (data in %s); Ctrl-C stops it.\n", d.Storage())
	io.WriteString(w, b.String())
}

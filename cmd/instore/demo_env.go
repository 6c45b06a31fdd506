package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
)

// demoVar is one export line of `instore demo --env`: the variable, the
// key of `instore demo --json` that holds the same value, and the value.
type demoVar struct {
	name, key string
	value     func(demo.Info) string
}

// demoVars are the export lines of --env, in order. Every one is also in
// --json (the key; terminals[0] is the first terminal), so that a script
// reading either learns the same (docs/sandbox.md).
var demoVars = []demoVar{
	{client.EnvOnlineAPIURL, "onlineApiBaseUrl", func(i demo.Info) string { return i.OnlineAPIBaseURL }},
	{client.EnvSubscriptionKey, "subscriptionKey", func(i demo.Info) string { return i.SubscriptionKey }},
	{client.EnvAccessToken, "accessToken", func(i demo.Info) string { return i.AccessToken }},
	{client.EnvClientID, "clientId", func(i demo.Info) string { return i.ClientID }},
	{client.EnvClientSecret, "clientSecret", func(i demo.Info) string { return i.ClientSecret }},
	{envTerminalID, "terminals[0].terminalId", func(i demo.Info) string {
		if len(i.Terminals) == 0 {
			return ""
		}
		return i.Terminals[0].TerminalID
	}},
	{envCurrency, "currency", func(i demo.Info) string { return i.Currency }},
	{client.EnvAccessAPIURL, "accessApiBaseUrl", func(i demo.Info) string { return i.AccessAPIBaseURL }},
	{client.EnvAccessAPISubscriptionKey, "accessSubscriptionKey", func(i demo.Info) string { return i.AccessSubscriptionKey }},
	{client.EnvAccessAPIToken, "accessAccessToken", func(i demo.Info) string { return i.AccessAccessToken }},
	{client.EnvAccessAPIClientID, "accessClientId", func(i demo.Info) string { return i.AccessClientID }},
	{client.EnvAccessAPIClientSecret, "accessClientSecret", func(i demo.Info) string { return i.AccessClientSecret }},
	{"INSTORE_CUSTOMER_ID", "customerId", func(i demo.Info) string { return i.CustomerID }},
	{"INSTORE_MERCHANT_ID", "merchantId", func(i demo.Info) string { return i.MerchantID }},
}

// printEnv prints the demo's URLs and credentials as shell export lines,
// the variables `instore ecr` and client.FromEnv read: pasted into a shell,
// or redirected to a file and sourced, they point that shell at the demo.
// The last line is a comment, so the output stays valid shell and a script
// can wait for it.
func printEnv(w io.Writer, d *demo.Demo, info demo.Info) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	for _, v := range demoVars {
		if value := v.value(info); value != "" {
			fmt.Fprintf(&b, "export %s=%s\n", v.name, quote(value))
		}
	}
	fmt.Fprintf(&b, "# instore demo is running (data in %s); Ctrl-C stops it.\n", d.Storage())
	io.WriteString(w, b.String())
}

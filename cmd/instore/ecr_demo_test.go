package main

import (
	"context"
	"os"
	"testing"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testwait"
)

// The set-up of the tests of the ecr commands: a demo, instore ecr pointed
// at it, and a runner of instore ecr.

// ecrDemo runs the demo without simulated delays (--sim-delay 0, then the
// flags extra), points instore ecr at it (ecrOnDemo) and returns it with
// ecrOutErr's runner.
func ecrDemo(t *testing.T, extra ...string) (demo.Info, func(wantCode int, args ...string) (string, string)) {
	t.Helper()
	return ecrOnDemo(t, append([]string{"--sim-delay", "0"}, extra...)...), ecrOutErr(t)
}

// ecrOutErr runs `instore ecr` with args, fails t unless it exits with
// wantCode, and returns its stdout and stderr.
func ecrOutErr(t *testing.T) func(wantCode int, args ...string) (string, string) {
	return func(wantCode int, args ...string) (string, string) {
		t.Helper()
		out, errs, code := runCmd(t, append([]string{"ecr"}, args...)...)
		if code != wantCode {
			t.Fatalf("instore ecr %v = exit %d, want %d; stderr %q", args, code, wantCode, errs)
		}
		return out, errs
	}
}

// ecrRunner is ecrOutErr with the standard output alone.
func ecrRunner(t *testing.T) func(wantCode int, args ...string) string {
	run := ecrOutErr(t)
	return func(wantCode int, args ...string) string {
		t.Helper()
		out, _ := run(wantCode, args...)
		return out
	}
}

// ecrOnDemo runs the demo with the flags extra and points instore ecr at
// it (ecrEnv).
func ecrOnDemo(t *testing.T, extra ...string) demo.Info {
	t.Helper()
	info, _, _ := runDemo(t, extra...)
	ecrEnv(t, info)
	return info
}

// ecrEnv points `instore ecr` at a demo through the environment, as
// `instore demo --env` does.
func ecrEnv(t *testing.T, info demo.Info) {
	t.Helper()
	for _, k := range []string{client.EnvClientID, client.EnvClientSecret} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv(client.EnvOnlineAPIURL, info.OnlineAPIBaseURL)
	t.Setenv(client.EnvSubscriptionKey, info.SubscriptionKey)
	t.Setenv(client.EnvAccessToken, info.AccessToken)
	t.Setenv(envTerminalID, info.Terminals[0].TerminalID)
	t.Setenv(envCurrency, "SEK")
	waitDemoTerminals(t, info)
}

// waitDemoTerminals waits until the demo's virtual terminals have
// connected to its gateway, which they do just after the demo starts.
func waitDemoTerminals(t *testing.T, info demo.Info) {
	t.Helper()
	c, err := client.New(client.Config{OnlineAPIURL: info.OnlineAPIBaseURL, Online: client.Credentials{SubscriptionKey: info.SubscriptionKey, AccessToken: info.AccessToken}})
	must(t, err)
	testwait.For(t, "the demo's terminals to come online", func() bool {
		ts, err := c.Terminals(context.Background())
		must(t, err)
		online := 0
		for _, term := range ts {
			if term.Online {
				online++
			}
		}
		return online == len(ts)
	})
}

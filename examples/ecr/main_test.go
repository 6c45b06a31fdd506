package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// startDemo runs the demo in-process and points the environment at it,
// as `instore demo --env` does for a person.
func startDemo(t *testing.T) demo.Info {
	t.Helper()
	cfg := testserver.Config(t.TempDir())
	cfg.TokenTTL, cfg.AckTimeout, cfg.TransactionDeadline, cfg.PrintTimeout = time.Hour, 2*time.Second, 60*time.Second, 5*time.Second
	cfg.SimDelay = 200 * time.Millisecond
	info := testserver.Demo(t, cfg).Info()
	for k, v := range map[string]string{
		client.EnvOnlineAPIURL: info.OnlineAPIBaseURL, client.EnvSubscriptionKey: info.SubscriptionKey,
		client.EnvClientID: info.ClientID, client.EnvClientSecret: info.ClientSecret,
		"INSTORE_TERMINAL_ID": info.Terminals[0].TerminalID, "INSTORE_CURRENCY": "SEK",
	} {
		t.Setenv(k, v)
	}
	for _, k := range []string{client.EnvAccessToken, client.EnvAccessAPIURL} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	c, err := client.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the demo's terminal to come online", func() bool {
		term, err := c.Terminal(context.Background(), info.Terminals[0].TerminalID)
		return err == nil && term.Online
	})
	return info
}

func TestECR(t *testing.T) {
	startDemo(t)
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // lines of stdout, in order
	}{
		{"approved", []string{"12.50"}, 0, []string{"Purchase txn_", "APPROVED: 12.50 SEK", "CUSTOMER COPY", "SEK 12.50"}},
		{"declined", []string{"-reference", "order-7", "10.11"}, 3, []string{"TRANSACTION_DECLINED: 10.11 SEK", "DECLINED"}},
		{"too many decimals", []string{"12.505"}, 2, nil},
		{"no amount", nil, 2, nil},
		{"refused", []string{"-terminal", "99999999", "5"}, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errs)
			if code != tc.wantCode {
				t.Fatalf("ecr %v = exit %d, want %d; stderr %q", tc.args, code, tc.wantCode, errs.String())
			}
			rest := out.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout lacks %q after the lines before it:\n%s", w, out.String())
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestECRCtrlCCancels presses Ctrl-C while the terminal waits (an amount
// ending in 92 is never answered by the virtual terminal): the ECR
// cancels the purchase and shows it ended ABORTED_BY_CASHIER.
func TestECRCtrlCCancels(t *testing.T) {
	startDemo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	errs := &testlog.Buffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"10.92"}, pw, errs)
		pw.Close()
	}()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Purchase txn_") {
			cancel() // Ctrl-C
		}
	}
	if c := <-code; c != 3 {
		t.Errorf("exit %d, want 3; stderr %q", c, errs.String())
	}
	if !strings.Contains(out.String(), "Cancelling...\n") || !strings.Contains(out.String(), "ABORTED_BY_CASHIER: 10.92 SEK") {
		t.Errorf("stdout:\n%s\nwant the cancel and ABORTED_BY_CASHIER", out.String())
	}
}

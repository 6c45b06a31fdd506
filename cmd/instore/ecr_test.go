package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testwait"
)

// txLine is the part of a transaction JSON line the tests read.
type txLine struct {
	OnlineAPIRefID string                    `json:"onlineAPIRefId"`
	Type           instore.TransactionType   `json:"type"`
	TerminalID     string                    `json:"terminalId"`
	Amount         int64                     `json:"amount"`
	CashbackAmount int64                     `json:"cashbackAmount"`
	TipAmount      int64                     `json:"tipAmount"`
	TotalAmount    int64                     `json:"totalAmount"`
	Currency       string                    `json:"currency"`
	Status         string                    `json:"status"`
	StatusID       instore.TransactionStatus `json:"statusId"`
	ErrorCode      string                    `json:"errorCode"`
	Version        int64                     `json:"version"`
	Result         *struct {
		PaymentMethod *struct {
			Code string `json:"code"`
		} `json:"paymentMethod"`
	} `json:"result"`
}

// jsonLines decodes every line of out as a transaction; the test fails
// if one is not JSON.
func jsonLines(t *testing.T, out string) []txLine {
	t.Helper()
	var txs []txLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var tx txLine
		if err := json.Unmarshal([]byte(l), &tx); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		txs = append(txs, tx)
	}
	return txs
}

func lastTx(t *testing.T, out string) txLine {
	t.Helper()
	txs := jsonLines(t, out)
	return txs[len(txs)-1]
}

func TestEcrPurchase(t *testing.T) {
	info := ecrOnDemo(t, "--sim-delay", "0", "--ack-timeout", "1s")
	t0, t1 := info.Terminals[0].TerminalID, info.Terminals[1].TerminalID
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // in stdout
		wantStderr string // in stderr
		check      func(t *testing.T, out string)
	}{
		{
			name: "approved, for a person", args: []string{"purchase", "12.50", "--wait"},
			wantStdout: "APPROVED  PURCHASE 12.50 SEK on terminal " + t0,
		},
		{
			name: "approved, for a script", args: []string{"purchase", "12.50", "--terminal", t0, "--currency", "SEK", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				txs := jsonLines(t, out)
				last := txs[len(txs)-1]
				if last.Status != "APPROVED" || last.Amount != 1250 || last.Currency != "SEK" || last.TerminalID != t0 {
					t.Errorf("last line = %+v, want APPROVED 1250 SEK on %s", last, t0)
				}
				for i := 1; i < len(txs); i++ {
					if txs[i].Version <= txs[i-1].Version || txs[i].OnlineAPIRefID != last.OnlineAPIRefID {
						t.Errorf("lines %d and %d: versions %d, %d of %s, %s; want one transaction, increasing", i-1, i, txs[i-1].Version, txs[i].Version, txs[i-1].OnlineAPIRefID, txs[i].OnlineAPIRefID)
					}
				}
			},
		},
		{
			name: "declined", args: []string{"purchase", "10.11", "--wait", "--json"}, wantCode: exitNotApproved,
			wantStderr: "TRANSACTION_DECLINED (11)",
			check: func(t *testing.T, out string) {
				if got := lastTx(t, out).Status; got != "TRANSACTION_DECLINED" {
					t.Errorf("last status = %s, want TRANSACTION_DECLINED", got)
				}
			},
		},
		{
			name: "without --wait: acknowledged", args: []string{"purchase", "7", "--terminal", t1, "--json"},
			check: func(t *testing.T, out string) {
				if txs := jsonLines(t, out); len(txs) != 1 || txs[0].Amount != 700 || txs[0].Type != instore.TypePurchase {
					t.Errorf("output = %+v, want one purchase of 700", txs)
				}
			},
		},
		{
			name: "a currency without decimals", args: []string{"purchase", "1200", "--currency", "JPY", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.Amount != 1200 || tx.Currency != "JPY" {
					t.Errorf("purchase = %d %s, want 1200 JPY", tx.Amount, tx.Currency)
				}
			},
		},
		{
			name: "cashback", args: []string{"purchase", "100", "--cashback", "20.00", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.Amount != 10000 || tx.CashbackAmount != 2000 {
					t.Errorf("purchase = %d cashback %d, want 10000 and 2000", tx.Amount, tx.CashbackAmount)
				}
			},
		},
		{
			name: "a payment method by its code", args: []string{"purchase", "30", "--payment-method", "swish", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.Result == nil || tx.Result.PaymentMethod == nil || tx.Result.PaymentMethod.Code != "SWISH" {
					t.Errorf("purchase result = %+v, want paid with SWISH", tx.Result)
				}
			},
		},
		{name: "a tip the till knows", args: []string{"purchase", "10", "--tip", "1.50", "--wait"},
			wantStdout: "tip             1.50 SEK (FIXED)"},
		{name: "a tip prompt", args: []string{"purchase", "20", "--tip-prompt", "10,15,20", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.TipAmount != 200 || tx.TotalAmount != 2200 {
					t.Errorf("purchase = tip %d total %d, want the first suggestion: 200 and 2200", tx.TipAmount, tx.TotalAmount)
				}
			}},
		{name: "the total entered", args: []string{"purchase", "20", "--tip-enter-total", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.TipAmount != 0 || tx.TotalAmount != 2000 {
					t.Errorf("purchase = tip %d total %d, want the sandbox's no tip: 0 and 2000", tx.TipAmount, tx.TotalAmount)
				}
			}},
		{name: "two ways to tip", args: []string{"purchase", "20", "--tip-enter-total", "--tip", "1"}, wantCode: 2, wantStderr: "none of the others can be"},
		{name: "a tip prompt not of percentages", args: []string{"purchase", "20", "--tip-prompt", "ten"}, wantCode: 2, wantStderr: `--tip-prompt: "ten" is not a whole percentage`},
		{name: "a tip above the amount", args: []string{"purchase", "10", "--tip", "10.01"}, wantCode: exitFailed,
			wantStderr: "--tip 10.01 SEK must not exceed amount (10.00 SEK)"},
		{name: "more decimals than the currency has", args: []string{"purchase", "12.505"}, wantCode: 2, wantStderr: `instore: amount: SEK has 2 decimals, got "12.505"`},
		{name: "a cashback not an amount", args: []string{"purchase", "12", "--cashback", "x"}, wantCode: 2, wantStderr: `instore: --cashback: "x" is not an amount such as 12.50`},
		{name: "decimals in JPY", args: []string{"purchase", "12.5", "--currency", "JPY"}, wantCode: 2, wantStderr: "JPY has no decimals"},
		// One rule for the decimal comma: 12,50 is 12.50; 1,250 may mean
		// 1250 and is refused with how to write it.
		{name: "a decimal comma", args: []string{"purchase", "12,50", "--wait", "--json"},
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.Amount != 1250 {
					t.Errorf("purchase 12,50 = amount %d, want 1250", tx.Amount)
				}
			}},
		{name: "a comma before three digits", args: []string{"purchase", "1,250"}, wantCode: 2,
			wantStderr: `instore: amount: "1,250" is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. 1250 or 12.50`},
		{name: "not an amount", args: []string{"purchase", "twelve"}, wantCode: 2, wantStderr: "not an amount"},
		{name: "no amount", args: []string{"purchase"}, wantCode: 2, wantStderr: "takes the amount"},
		{name: "unknown payment method", args: []string{"purchase", "1", "--payment-method", "nope"}, wantCode: 2, wantStderr: "paymentMethods"},
		{name: "another merchant's terminal", args: []string{"purchase", "12.50", "--terminal", "99999999"}, wantCode: exitFailed, wantStderr: "403 WP16 Specified terminal does not belong to the merchant"},
		// The service's range, in the currency's decimals rather than minor units.
		{name: "over the largest amount", args: []string{"purchase", "1000000.00"}, wantCode: exitFailed,
			wantStderr: "purchase: 400 validation Request validation failed: amount 1000000.00 SEK must be from 0.01 SEK to 999999.99 SEK (requestId req_"},
		{name: "over the largest amount, no decimals", args: []string{"purchase", "100000000", "--currency", "JPY"}, wantCode: exitFailed,
			wantStderr: "amount 100000000 JPY must be from 1 JPY to 99999999 JPY"},
		{name: "cashback over the amount", args: []string{"purchase", "10", "--cashback", "20.00"}, wantCode: exitFailed,
			wantStderr: "validation Request validation failed: --cashback 20.00 SEK must not exceed amount"},
		// The terminal never acknowledges: the purchase ends TECHNICAL_ERROR
		// with WP25, shown as any other final status, exit 3.
		{name: "no acknowledgement", args: []string{"purchase", "10.91"}, wantCode: exitNotApproved,
			wantStdout: "TECHNICAL_ERROR  PURCHASE 10.91 SEK on terminal " + t0,
			wantStderr: "ended TECHNICAL_ERROR (8) with WP25 Acknowledgement timed-out from terminal"},
		{name: "no acknowledgement, for a script", args: []string{"purchase", "10.91", "--wait", "--json"}, wantCode: exitNotApproved,
			check: func(t *testing.T, out string) {
				if tx := lastTx(t, out); tx.Status != "TECHNICAL_ERROR" || tx.StatusID != instore.StatusTechnicalError || tx.ErrorCode != instore.WP25 || tx.Amount != 1091 {
					t.Errorf("last line = %+v, want the purchase of 1091 TECHNICAL_ERROR with WP25", tx)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, append([]string{"ecr"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("instore ecr %v = exit %d, want %d; stderr %q", tc.args, code, tc.wantCode, errs)
			}
			if !strings.Contains(out, tc.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", out, tc.wantStdout)
			}
			if !strings.Contains(errs, tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errs, tc.wantStderr)
			}
			for _, doubled := range []string{"amount: amount:", "minor units", "1250 for"} {
				if strings.Contains(errs, doubled) {
					t.Errorf("stderr = %q holds %q", errs, doubled)
				}
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}

func TestEcrWaitShowsProgressStages(t *testing.T) {
	ecrOnDemo(t, "--sim-delay", "600ms")
	out, errs, code := runCmd(t, "ecr", "purchase", "12.50", "--wait")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := regexp.MustCompile(`^txn_\S+  PURCHASE 12.50 SEK on terminal \d{8}$`)
	if !header.MatchString(lines[0]) {
		t.Errorf("first line = %q, want the transaction's summary", lines[0])
	}
	var stages []string
	i := 1
	for ; i < len(lines) && strings.HasPrefix(lines[i], "  "); i++ {
		stages = append(stages, strings.TrimSpace(lines[i]))
	}
	known := []string{"acknowledged by the terminal", "waiting for the card", "waiting for the PIN", "authorizing"}
	if len(stages) == 0 {
		t.Errorf("no progress stage shown:\n%s", out)
	}
	for _, s := range stages {
		if !slices.Contains(known, s) {
			t.Errorf("stage line %q is not one of %q", s, known)
		}
	}
	if i >= len(lines) || !strings.HasPrefix(lines[i], "APPROVED  PURCHASE 12.50 SEK") {
		t.Errorf("after the stages: %q, want the final status\n%s", lines[min(i, len(lines)-1)], out)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\033[") {
		t.Errorf("a spinner was drawn on a non-terminal stdout")
	}
}

// TestEcrCommands runs every subcommand against the demo.
func TestEcrCommands(t *testing.T) {
	info := ecrOnDemo(t, "--sim-delay", "0", "--transaction-deadline", "30s")
	t0, t1, t2 := info.Terminals[0].TerminalID, info.Terminals[1].TerminalID, info.Terminals[2].TerminalID
	ecr := ecrRunner(t)
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output %q lacks %q", out, w)
			}
		}
	}
	c, err := client.New(client.Config{OnlineAPIURL: info.OnlineAPIBaseURL, Online: client.Credentials{SubscriptionKey: info.SubscriptionKey, AccessToken: info.AccessToken}})
	must(t, err)

	contains(ecr(0, "metadata"), "errorCodes", "WP09", "Terminal is busy processing previous transaction", "printStatuses", "OUT_OF_PAPER")
	var meta instore.Metadata
	must(t, json.Unmarshal([]byte(ecr(0, "metadata", "--json")), &meta))
	if len(meta.TransactionStatuses) != 15 {
		t.Errorf("metadata --json: %d transaction statuses", len(meta.TransactionStatuses))
	}
	contains(ecr(0, "terminals"), "TERMINAL ID", t0, t1, t2, "countertop", "pinpad")
	contains(ecr(0, "terminals", t2, "--json"), `"terminalId":"`+t2+`"`, `"model":"pinpad"`)

	sale := lastTx(t, ecr(0, "purchase", "20", "--wait", "--json", "--reference", "order-9"))
	contains(ecr(0, "status", sale.OnlineAPIRefID, "--receipt"), "APPROVED  PURCHASE 20.00 SEK", "ecrReference", "order-9", "CUSTOMER COPY")
	if got := lastTx(t, ecr(0, "status", sale.OnlineAPIRefID, "--wait", "--json")); got.Status != "APPROVED" {
		t.Errorf("status --wait of a final transaction = %s", got.Status)
	}
	contains(ecr(0, "timeline", sale.OnlineAPIRefID), "ECR       CREATED", "TERMINAL  ACKNOWLEDGED", "TERMINAL  RESULT            PENDING -> APPROVED")
	var firstEvent instore.TransactionEvent
	must(t, json.Unmarshal([]byte(strings.SplitN(ecr(0, "timeline", sale.OnlineAPIRefID, "--json"), "\n", 2)[0]), &firstEvent))
	if firstEvent.Kind != instore.EventCreated || firstEvent.Version != 1 {
		t.Errorf("timeline --json first line = %+v", firstEvent)
	}
	ecr(1, "timeline", "txn_unknown")

	contains(ecr(0, "print", "--receipt", sale.OnlineAPIRefID, "--copy", "merchant"), "SUCCESS  print job prt_")
	job := ecr(0, "print", "Hello", "World", "--json")
	var pj struct {
		PrintID string `json:"printId"`
		Status  string `json:"status"`
	}
	must(t, json.Unmarshal([]byte(job), &pj))
	contains(ecr(0, "print", "--job", pj.PrintID), "SUCCESS", pj.PrintID)
	// The PIN pad has no printer: its print ends ERROR, and the command says why.
	out, errs, code := runCmd(t, "ecr", "print", "Hello", "--terminal", t2)
	if code != exitNotApproved || !strings.Contains(out, "ERROR  print job prt_") ||
		!regexp.MustCompile(`^instore: print job prt_\w+ ended ERROR: terminal `+t2+` has no printer \(model pinpad\)\n$`).MatchString(errs) {
		t.Errorf("print on the PIN pad = exit %d, stdout %q, stderr %q; want 3 and the terminal has no printer", code, out, errs)
	}
	// Another print status reads with its description.
	if _, err := c.SandboxNextPrint(context.Background(), t0, instore.PrintOutOfPaper); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCmd(t, "ecr", "print", "Hello"); code != exitNotApproved || !strings.Contains(errs, "ended OUT_OF_PAPER: Printer has no paper") {
		t.Errorf("print out of paper = exit %d, stderr %q", code, errs)
	}
	ecr(2, "print")

	ref := lastTx(t, ecr(0, "refund", "5", "--original", sale.OnlineAPIRefID, "--wait", "--json"))
	if ref.Type != instore.TypeRefund || ref.Amount != 500 || ref.Currency != "SEK" || ref.Status != "APPROVED" {
		t.Errorf("refund = %+v", ref)
	}
	// More than is left of the 20.00 sale: the amounts as typed, in SEK.
	if _, errs, code := runCmd(t, "ecr", "refund", "20.00", "--original", sale.OnlineAPIRefID); code != exitFailed ||
		!strings.Contains(errs, "refund: 400 validation Request validation failed: amount 20.00 SEK exceeds what is left to refund of the original (15.00 SEK) (requestId req_") {
		t.Errorf("refund over the sale = exit %d, stderr %q", code, errs)
	}
	// The same --idempotency-key again: the first answer, said to be replayed.
	key := "ecr-test-" + sale.OnlineAPIRefID
	first := lastTx(t, ecr(0, "purchase", "4", "--terminal", t2, "--idempotency-key", key, "--wait", "--json"))
	out, errs, code = runCmd(t, "ecr", "purchase", "4", "--terminal", t2, "--idempotency-key", key, "--json")
	if again := lastTx(t, out); code != 0 || again.OnlineAPIRefID != first.OnlineAPIRefID ||
		!strings.Contains(errs, "purchase: replayed: the answer to an earlier request with this Idempotency-Key; nothing new was started") {
		t.Errorf("purchase with the same key = exit %d, %s (first %s), stderr %q", code, again.OnlineAPIRefID, first.OnlineAPIRefID, errs)
	}
	latest := lastTx(t, ecr(0, "purchase", "15", "--wait", "--json"))
	rev := lastTx(t, ecr(0, "reversal", latest.OnlineAPIRefID, "--wait", "--json"))
	if rev.Type != instore.TypeReversal || rev.Status != "APPROVED" {
		t.Errorf("reversal = %+v", rev)
	}
	// The reversed purchase is no longer approved: exit 3.
	contains(ecr(exitNotApproved, "status", latest.OnlineAPIRefID), "REVERSED")

	// Cancel a purchase the terminal never answers.
	slow := lastTx(t, ecr(0, "purchase", "10.92", "--terminal", t1, "--json"))
	if got := lastTx(t, ecr(exitNotApproved, "cancel", "--terminal", t1, "--wait", "--json")); got.OnlineAPIRefID != slow.OnlineAPIRefID || got.Status != "ABORTED_BY_CASHIER" || got.ErrorCode != "WP37" {
		t.Errorf("cancel --wait = %+v, want %s ABORTED_BY_CASHIER WP37", got, slow.OnlineAPIRefID)
	}
	contains(ecr(exitNotApproved, "status", slow.OnlineAPIRefID), "ABORTED_BY_CASHIER", "WP37 Transaction cancelled by ECR")
	ecr(exitFailed, "cancel", "--terminal", t1) // WP18: nothing runs

	contains(ecr(0, "list", "--terminal", t0), "ONLINEAPIREFID", sale.OnlineAPIRefID, "REFUND", "REVERSAL", "order-9")
	var page struct {
		Transactions []txLine `json:"transactions"`
		NextCursor   *string  `json:"nextCursor"`
	}
	must(t, json.Unmarshal([]byte(ecr(0, "list", "--json", "--status", "approved", "--limit", "2")), &page))
	if len(page.Transactions) != 2 || page.NextCursor == nil {
		t.Errorf("list --limit 2 = %d transactions, cursor %v; want 2 and a cursor", len(page.Transactions), page.NextCursor)
	}
	for _, tx := range page.Transactions {
		if tx.Status != "APPROVED" {
			t.Errorf("list --status approved shows %s", tx.Status)
		}
	}
	must(t, json.Unmarshal([]byte(ecr(0, "list", "--json", "--all", "--limit", "2", "--from", "1h")), &page))
	if len(page.Transactions) != 6 {
		t.Errorf("list --all = %d transactions, want 6 (sale, refund, purchase with a key, purchase, reversal, cancelled)", len(page.Transactions))
	}
	ecr(exitFailed, "list", "--from", "1000h") // WP26
	ecr(2, "list", "--from", "yesterday")

	// Unlink, then link with the code the device shows.
	contains(ecr(0, "unlink", t1), t1, "no")
	ecr(exitFailed, "unlink", t1) // WP02
	linkCode := ""
	testwait.For(t, "a link code shown", func() bool {
		devs, err := c.SandboxDevices(context.Background())
		must(t, err)
		for _, d := range devs {
			if d.SerialNumber == info.Terminals[1].SerialNumber && d.LinkCode != "" {
				linkCode = d.LinkCode
			}
		}
		return linkCode != ""
	})
	ecr(exitFailed, "link", t1, "000000") // link-code-invalid
	contains(ecr(0, "link", t1, linkCode, "--json"), `"linked":true`)
}

func TestEcrCredentials(t *testing.T) {
	info, _, _ := runDemo(t, "--sim-delay", "0")
	cases := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"nothing set", map[string]string{}, nil, 2, "INSTORE_SUBSCRIPTION_KEY"},
		{"a static token", map[string]string{client.EnvSubscriptionKey: info.SubscriptionKey, client.EnvAccessToken: info.AccessToken}, nil, 0, ""},
		{"client credentials", map[string]string{client.EnvSubscriptionKey: info.SubscriptionKey, client.EnvClientID: info.ClientID, client.EnvClientSecret: info.ClientSecret}, nil, 0, ""},
		{"client credentials win over a stale token", map[string]string{
			client.EnvSubscriptionKey: info.SubscriptionKey, client.EnvAccessToken: "stale",
			client.EnvClientID: info.ClientID, client.EnvClientSecret: info.ClientSecret}, nil, 0, ""},
		{"flags win over the environment", map[string]string{client.EnvSubscriptionKey: "wrong", client.EnvAccessToken: "wrong"},
			[]string{"--subscription-key", info.SubscriptionKey, "--access-token", info.AccessToken}, 0, ""},
		{"a wrong token", map[string]string{client.EnvSubscriptionKey: info.SubscriptionKey, client.EnvAccessToken: "wrong"}, nil, exitFailed, "401 unauthorized"},
		{"a wrong URL", map[string]string{client.EnvSubscriptionKey: "k", client.EnvAccessToken: "t"}, []string{"--url", "ftp://x"}, 2, "not an http"},
	}
	names := []string{client.EnvOnlineAPIURL, client.EnvSubscriptionKey, client.EnvAccessToken, client.EnvClientID, client.EnvClientSecret}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range names {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			t.Setenv(client.EnvOnlineAPIURL, info.OnlineAPIBaseURL)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, errs, code := runCmd(t, append([]string{"ecr", "terminals"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(errs, tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, errs, tc.wantCode, tc.wantStderr)
			}
			for _, s := range []string{info.SubscriptionKey, info.AccessToken, info.ClientSecret} {
				if strings.Contains(errs, s) {
					t.Errorf("stderr shows a credential")
				}
			}
		})
	}
}

// TestEcrInterruptCancels interrupts `purchase --wait` as Ctrl-C does: the
// command cancels the transaction on the terminal and shows how it ended.
func TestEcrInterruptCancels(t *testing.T) {
	ecrOnDemo(t, "--sim-delay", "0", "--transaction-deadline", "60s")
	p := startRun(context.Background(), "ecr", "purchase", "10.92", "--wait", "--json")
	defer p.stop(t)
	sc := bufio.NewScanner(p.out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) == 1 {
			p.cancel() // Ctrl-C once the purchase is acknowledged
		}
	}
	stderr := p.stderr
	if c := p.wait(); c != exitNotApproved {
		t.Errorf("exit %d, want %d; stderr %q", c, exitNotApproved, stderr.String())
	}
	last := lastTx(t, strings.Join(lines, "\n"))
	if last.Status != "ABORTED_BY_CASHIER" || last.ErrorCode != "WP37" {
		t.Errorf("last line = %+v, want ABORTED_BY_CASHIER WP37", last)
	}
	if !strings.Contains(stderr.String(), "interrupted: cancelling "+last.OnlineAPIRefID) {
		t.Errorf("stderr = %q, want the cancel announced", stderr.String())
	}
}

// TestDemoEnv runs `instore demo --env` and uses what it prints as a
// newcomer does: the lines are valid shell, and with them in the
// environment `instore ecr purchase 12.50 --wait` pays.
func TestDemoEnv(t *testing.T) {
	p := startRun(context.Background(), demoArgs("--env", "--sim-delay", "0")...)
	defer func() {
		if c := p.stop(t); c != 0 {
			t.Errorf("demo --env exited %d", c)
		}
	}()
	sc := bufio.NewScanner(p.out)
	var text strings.Builder
	env := map[string]string{}
	export := regexp.MustCompile(`^export (INSTORE_[A-Z_]+)='([^']*)'$`)
	for sc.Scan() {
		l := sc.Text()
		text.WriteString(l + "\n")
		if strings.HasPrefix(l, "#") {
			break
		}
		m := export.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("demo --env line %q is not an export line", l)
		}
		env[m[1]] = m[2]
	}
	p.discardRest()
	for _, k := range []string{client.EnvOnlineAPIURL, client.EnvSubscriptionKey, client.EnvAccessToken, client.EnvClientID, client.EnvClientSecret,
		envTerminalID, envCurrency, client.EnvAccessAPIURL, client.EnvAccessAPISubscriptionKey, client.EnvAccessAPIToken} {
		if env[k] == "" {
			t.Errorf("demo --env sets no %s", k)
		}
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		f := filepath.Join(t.TempDir(), "demo.env")
		must(t, os.WriteFile(f, []byte(text.String()), 0o600))
		out, err := exec.Command(sh, "-c", `eval "$(cat "$1")" && printf %s "$INSTORE_TERMINAL_ID"`, "sh", f).Output()
		if err != nil || string(out) != env[envTerminalID] {
			t.Errorf("eval of the demo --env output: %v, INSTORE_TERMINAL_ID=%q, want %q", err, out, env[envTerminalID])
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	waitDemoTerminals(t, demo.Info{OnlineAPIBaseURL: env[client.EnvOnlineAPIURL], SubscriptionKey: env[client.EnvSubscriptionKey], AccessToken: env[client.EnvAccessToken]})
	out, errs, c := runCmd(t, "ecr", "purchase", "12.50", "--wait")
	if c != 0 || !strings.Contains(out, "APPROVED  PURCHASE 12.50 SEK") {
		t.Errorf("ecr purchase 12.50 --wait with the demo's environment = exit %d\n%s%s", c, out, errs)
	}
	// --env and --json exclude each other.
	if _, errs, c := runCmd(t, "demo", "--env", "--json"); c != 2 || !strings.Contains(errs, "--json and --env") {
		t.Errorf("demo --env --json = exit %d %q, want 2", c, errs)
	}
}

// TestSpinnerOnlyOnATerminal draws the progress line as it is drawn when
// stdout is a terminal, and checks it is cleared before the final status.
func TestSpinnerOnlyOnATerminal(t *testing.T) {
	pending := &client.Transaction{TransactionWire: instore.TransactionWire{OnlineAPIRefID: "txn_1", Type: instore.TypePurchase, TerminalID: "10000001", Amount: 1250, Currency: "SEK",
		StatusID: instore.StatusPending, Status: "PENDING", Progress: instore.ProgressWaitingForCard, Version: 3}}
	final := *pending
	final.StatusID, final.Status, final.Progress, final.Version = instore.StatusApproved, "APPROVED", instore.ProgressFinal, 6
	cases := []struct {
		name    string
		tty     bool
		want    []string
		notWant string
	}{
		{"terminal", true, []string{"txn_1  PURCHASE 12.50 SEK on terminal 10000001\n", "\r\033[K⠋ waiting for the card", "\r\033[KAPPROVED  PURCHASE 12.50 SEK"}, "\n  waiting for the card\n"},
		{"pipe", false, []string{"txn_1  PURCHASE 12.50 SEK on terminal 10000001\n", "  waiting for the card\n", "APPROVED  PURCHASE 12.50 SEK"}, "\r"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			o := newOutput(&buf, false, false)
			o.tty = tc.tty
			o.progress(pending)
			o.progress(pending) // the same version again changes nothing
			o.final(&final)
			got := buf.String()
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output %q lacks %q (in order)", got, w)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(got, tc.notWant) {
				t.Errorf("output %q holds %q", got, tc.notWant)
			}
		})
	}
}

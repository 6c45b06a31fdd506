// Command ecr is a small, complete ECR (cash register) on the instore Go
// SDK: it takes one purchase on a payment terminal, shows what the
// terminal is doing, cancels the purchase when the cashier presses Ctrl-C,
// and prints the customer receipt.
//
// It reads the service's URL and credentials from the environment
// (client.FromEnv), so against the demo:
//
//	go run ./cmd/instore demo --env    # in one shell; paste its export lines into another
//	go run ./examples/ecr 12.50
//
// Exit codes: 0 approved, 1 error, 2 wrong usage, 3 not approved
// (declined, cancelled, failed).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/instore-dev/instore/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stages say what the terminal is doing, for the cashier.
var stages = map[string]string{
	"SENT":             "Sending to the terminal...",
	"ACKNOWLEDGED":     "The terminal has the purchase.",
	"WAITING_FOR_CARD": "Present the card.",
	"WAITING_FOR_PIN":  "Enter the PIN.",
	"AUTHORIZING":      "Authorizing...",
}

// run is the whole program; cancelling ctx is the cashier's Ctrl-C.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ecr", flag.ContinueOnError)
	fs.SetOutput(stderr)
	terminalID := fs.String("terminal", os.Getenv("INSTORE_TERMINAL_ID"), "terminal ID (default $INSTORE_TERMINAL_ID)")
	currency := fs.String("currency", envOr("INSTORE_CURRENCY", "SEK"), "ISO 4217 currency (default $INSTORE_CURRENCY or SEK)")
	reference := fs.String("reference", "", "the sale's own reference (order or receipt number)")
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: ecr [-terminal ID] [-currency SEK] [-reference REF] AMOUNT") }
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || *terminalID == "" {
		fs.Usage()
		return 2
	}
	amount, err := client.ParseAmount(fs.Arg(0), *currency)
	if err != nil {
		fmt.Fprintln(stderr, "ecr: amount:", err)
		return 2
	}
	c, err := client.FromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "ecr:", err)
		return 1
	}
	tx, err := pay(ctx, c, stdout, client.PurchaseParams{TerminalID: *terminalID, Amount: amount, Currency: *currency, ECRReference: *reference})
	if err != nil {
		fmt.Fprintln(stderr, "ecr:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s %s (%s)\n", tx.Status, client.FormatAmount(tx.Amount, tx.Currency), tx.Currency, tx.OnlineAPIRefID)
	if tx.Result != nil {
		fmt.Fprintln(stdout)
		for _, line := range tx.Result.Receipt.Customer {
			fmt.Fprintln(stdout, line)
		}
	}
	if !tx.Approved() {
		return 3
	}
	return 0
}

// pay takes one purchase to its final status. Interrupted, it cancels the
// purchase on the terminal and returns how it ended: the terminal may
// still have approved it first.
func pay(ctx context.Context, c *client.Client, stdout io.Writer, p client.PurchaseParams) (*client.Transaction, error) {
	// The key makes the purchase safe to send again: a real ECR stores it
	// with the sale before the first attempt, so that even a restart
	// repeats this purchase instead of charging twice.
	key := client.NewIdempotencyKey()
	tx, err := c.Purchase(ctx, p, client.IdempotencyKey(key))
	if err != nil && ctx.Err() != nil {
		// Interrupted before the answer: the purchase may exist. The same
		// key gets the first answer back without a second purchase.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		tx, err = c.Purchase(rctx, p, client.IdempotencyKey(key))
	}
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) && e.ErrorCode != "" {
			return nil, fmt.Errorf("the purchase was refused: %s %s", e.ErrorCode, e.Title)
		}
		return nil, err
	}
	fmt.Fprintf(stdout, "Purchase %s of %s %s on terminal %s\n", tx.OnlineAPIRefID, client.FormatAmount(tx.Amount, tx.Currency), tx.Currency, tx.TerminalID)
	shown := ""
	show := func(t *client.Transaction) {
		if msg, ok := stages[string(t.Progress)]; ok && string(t.Progress) != shown && !t.Final() {
			shown = string(t.Progress)
			fmt.Fprintln(stdout, msg)
		}
	}
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, show)
	if err == nil {
		return final, nil
	}
	if ctx.Err() == nil {
		return nil, err
	}
	fmt.Fprintln(stdout, "Cancelling...")
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := c.CancelTransaction(cctx, tx.TerminalID, tx.OnlineAPIRefID); err != nil && !client.IsCode(err, "WP18") {
		return nil, err
	}
	return c.WaitForFinal(cctx, tx.OnlineAPIRefID, nil)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// The day close commands: close closes a terminal's batch and shows how
// it compares with the service's record; batches lists the closes or
// shows one.

func ecrCloseCmd(f *ecrFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "close [TERMINAL_ID]",
		Short: "Close a terminal's batch (the day close) and show its totals and differences",
		Long: `Close the batch of TERMINAL_ID (default: env ` + envTerminalID + `): the terminal answers every
transaction it ended since its previous close, the service compares them with its own
and the command prints both sides' totals of APPROVED transactions and each
transaction whose records differ (MISSING_IN_SERVICE, MISSING_ON_TERMINAL, STATUS,
AMOUNT). The terminal is busy while it closes (a purchase is refused, WP09
BATCH_CLOSE). A terminal that does not answer in time fails the command with WP25;
instore ecr batches BATCH_ID shows the batch once it answers. --json prints the
batch as the API answers it.`,
		Example: `  instore ecr close 10000001
  instore ecr close --json | jq .differences`,
		Args: args(0, 1, "at most one terminal ID"),
		RunE: f.call("close", func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
			id := ""
			if len(a) == 1 {
				id = a[0]
			}
			id, err := envOr(id, envTerminalID)
			if err != nil {
				return nil, nil, err
			}
			if id == "" {
				return nil, nil, usageError{fmt.Errorf("no terminal: give TERMINAL_ID or set %s", envTerminalID)}
			}
			b, err := c.CloseBatch(ctx, id)
			return b, func(w io.Writer) { printBatch(w, b) }, err
		}),
	}
}

func ecrBatchesCmd(f *ecrFlags) *cobra.Command {
	var l listing
	cmd := &cobra.Command{
		Use:   "batches [BATCH_ID]",
		Short: "List the day closes, newest first (default: the last 24 hours), or show one",
		Long: `List the merchant's batches (day closes), newest first by closedAt, with the same
range rules as list: --from and --to take an RFC 3339 time or a duration ago; a
listing covers at most 30 days (WP26) within the past 90 days (WP27). With a
BATCH_ID, show that batch: its totals and differences. --json prints the API's
answer ({"batches": [...], "nextCursor": ...}, or the batch).`,
		Example: `  instore ecr batches --from 7d
  instore ecr batches --terminal 10000001 --all
  instore ecr batches bat_01...`,
		Args: args(0, 1, "at most one batchId"),
		RunE: f.call("batches", func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
			if len(a) == 1 {
				if l != (listing{}) {
					return nil, nil, usageError{errors.New("a batchId shows one batch; it takes no listing flags")}
				}
				b, err := c.Batch(ctx, a[0])
				return b, func(w io.Writer) { printBatch(w, b) }, err
			}
			p := client.BatchListParams{TerminalID: l.terminal, Limit: l.limit, Cursor: l.cursor}
			var err error
			if p.From, p.To, err = l.window(); err != nil {
				return nil, nil, err
			}
			page := &client.BatchPage{Batches: []*client.Batch{}}
			if l.all {
				for b, err := range c.AllBatches(ctx, p) {
					if err != nil {
						return nil, nil, err
					}
					page.Batches = append(page.Batches, b)
				}
			} else if page, err = c.Batches(ctx, p); err != nil {
				return nil, nil, err
			}
			var next *string
			if page.NextCursor != "" {
				next = &page.NextCursor
			}
			return map[string]any{"batches": page.Batches, "nextCursor": next}, func(w io.Writer) { printBatches(w, page) }, nil
		}),
	}
	l.add(cmd.Flags(), "closedAt", "24h")
	return cmd
}

// batchOutcome says in a word how a batch ended.
func batchOutcome(b *client.Batch) string {
	switch {
	case b.State != instore.BatchClosed:
		out := string(b.State)
		if b.ErrorCode != "" {
			out += " " + string(b.ErrorCode)
		}
		return out
	case b.Matched:
		return "MATCHED"
	default:
		return fmt.Sprintf("%d DIFFERENCES", len(b.Differences))
	}
}

// printBatch prints one batch for people: its outcome, window, both
// sides' totals and its differences.
func printBatch(w io.Writer, b *client.Batch) {
	number := "-"
	if b.Number != nil {
		number = fmt.Sprint(*b.Number)
	}
	fmt.Fprintf(w, "%s  batch %s (number %s) of terminal %s\n", batchOutcome(b), b.BatchID, number, b.TerminalID)
	fmt.Fprintf(w, "  window      %s - %s\n", b.OpenedAt.UTC().Format(time.RFC3339), b.ClosedAt.UTC().Format(time.RFC3339))
	if b.State == instore.BatchClosed && b.ErrorCode != "" {
		fmt.Fprintf(w, "  answered late (the close was answered %s)\n", b.ErrorCode)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SIDE\tTYPE\tCOUNT\tAMOUNT")
	for _, side := range []struct {
		name   string
		totals []instore.BatchTotal
	}{{"terminal", b.TerminalTotals}, {"service", b.ServiceTotals}} {
		if len(side.totals) == 0 {
			fmt.Fprintf(tw, "  %s\t-\t0\t-\n", side.name)
		}
		for _, t := range side.totals {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s %s\n", side.name, t.Type, t.Count, client.FormatAmount(t.Amount, t.Currency), t.Currency)
		}
	}
	tw.Flush()
	if len(b.Differences) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DIFFERENCE\tREFERENCE\tTERMINAL\tSERVICE")
	for _, d := range b.Differences {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", d.Kind, d.OnlineAPIRefID, batchSide(d.Terminal), batchSide(d.Service))
	}
	tw.Flush()
}

// batchSide is one side's record of a difference: "-" when it has none.
func batchSide(it *instore.BatchItemWire) string {
	if it == nil {
		return "-"
	}
	out := fmt.Sprintf("%s %s %s %s", it.Type, it.Status, client.FormatAmount(it.Amount, it.Currency), it.Currency)
	if it.Offline {
		out += " offline"
	}
	return out
}

// printBatches prints a page of batches for people.
func printBatches(w io.Writer, page *client.BatchPage) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLOSED\tBATCHID\tTERMINAL\tNUMBER\tOUTCOME")
	for _, b := range page.Batches {
		number := "-"
		if b.Number != nil {
			number = fmt.Sprint(*b.Number)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.ClosedAt.UTC().Format(time.RFC3339), b.BatchID, b.TerminalID, number, batchOutcome(b))
	}
	tw.Flush()
	if len(page.Batches) == 0 {
		fmt.Fprintln(w, "no batches")
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
	}
}

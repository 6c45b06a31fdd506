package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// exitBooksDiffer: `instore ecr reconcile` found a difference between the
// ECR's books and the service's.
const exitBooksDiffer = 3

// booksColumns is the header of the ECR's books that reconcile reads.
var booksColumns = []string{"onlineAPIRefId", "ecrReference", "type", "amount", "currency", "status"}

// windowFlags are --from, --to and --terminal of totals and reconcile.
type windowFlags struct{ from, to, terminal string }

func (w *windowFlags) add(cmd *cobra.Command, required bool) {
	fs := cmd.Flags()
	what := "default: 24 hours before --to"
	if required {
		what = "required"
	}
	fs.StringVar(&w.from, "from", "", "start of the window (inclusive): RFC 3339 time or a duration ago such as 24h; "+what)
	fs.StringVar(&w.to, "to", "", "end of the window (exclusive): RFC 3339 time or a duration ago; default now")
	fs.StringVar(&w.terminal, "terminal", "", "only this terminal ID")
}

// window is the flags' window (a zero time where a flag is absent: the
// service's now for to).
func (w *windowFlags) window(now time.Time) (from, to time.Time, err error) {
	if from, err = whenFlag("--from", w.from, now); err != nil {
		return
	}
	to, err = whenFlag("--to", w.to, now)
	return
}

func ecrTotalsCmd(f *ecrFlags) *cobra.Command {
	var w windowFlags
	cmd := &cobra.Command{
		Use:   "totals",
		Short: "Totals of a window by currency, type and status (default: the last 24 hours)",
		Long: `Sum the merchant's transactions of a window by currency, type and status:
how many and their total amount (what the cards were charged, tips included).
Every status is shown; the money that moved is APPROVED (and REVERSED, given
back by its reversal). A window covers at most 30 days (WP26) within the past
90 days (WP27). --json prints the answer as the API gives it.`,
		Example: `  instore ecr totals --from 24h
  instore ecr totals --from 2026-11-27T00:00:00Z --to 2026-11-28T00:00:00Z --terminal 10000001`,
		Args: args(0, 0, "no arguments"),
		RunE: f.call("totals", func(ctx context.Context, _ []string, c *client.Client) (any, func(io.Writer), error) {
			from, to, err := w.window(time.Now())
			if err != nil {
				return nil, nil, err
			}
			t, err := c.Totals(ctx, client.TotalsParams{From: from, To: to, TerminalID: w.terminal})
			if err != nil {
				return nil, nil, err
			}
			return t, func(out io.Writer) { printTotals(out, t) }, nil
		}),
	}
	w.add(cmd, false)
	return cmd
}

func printTotals(w io.Writer, t *client.Totals) {
	fmt.Fprintf(w, "from %s to %s", t.From.UTC().Format(time.RFC3339), t.To.UTC().Format(time.RFC3339))
	if t.TerminalID != "" {
		fmt.Fprintf(w, ", terminal %s", t.TerminalID)
	}
	fmt.Fprintln(w)
	if len(t.Totals) == 0 {
		fmt.Fprintln(w, "no transactions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CURRENCY\tTYPE\tSTATUS\tCOUNT\tAMOUNT\t")
	for _, g := range t.Totals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t\n", g.Currency, g.Type, g.Status, g.Count, client.FormatAmount(g.Amount, g.Currency))
	}
	tw.Flush()
}

func ecrReconcileCmd(f *ecrFlags) *cobra.Command {
	var w windowFlags
	cmd := &cobra.Command{
		Use:   "reconcile FILE.csv",
		Short: "Compare the ECR's books (a CSV file) with the service's transactions of a window",
		Long: `Compare the ECR's own books of a window with the service's transactions and
show what differs: lines the service has no transaction for, transactions that
moved money (APPROVED, REVERSED) the books lack, and fields that differ (type,
amount, currency, status). FILE.csv (- for stdin) has a header row with the
columns onlineAPIRefId,ecrReference,type,amount,currency,status (in any
order), then one line per transaction, named by its onlineAPIRefId or, left
empty, by its ecrReference. The amount is what the card was charged, tips
included, as an integer in minor units (1250 for 12.50 SEK: the totalAmount
column of list --csv); the status a code such as APPROVED. At most 10,000
lines. --from is required. Exit code 0 when the books agree, 3 when they
differ; --json prints the API's answer.`,
		Example: `  instore ecr reconcile books.csv --from 2026-11-27T00:00:00Z --to 2026-11-28T00:00:00Z
  instore ecr list --csv --all --from 24h | instore ecr reconcile - --from 24h   # the service against itself`,
		Args: args(1, 1, "the CSV file of the ECR's books (- for stdin)"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			if w.from == "" {
				return usageError{errors.New("--from is required: the start of the window the books cover")}
			}
			now := time.Now()
			from, to, err := w.window(now)
			if err != nil {
				return err
			}
			if to.IsZero() {
				to = now
			}
			lines, err := readBooks(cmd.InOrStdin(), a[0])
			if err != nil {
				return err
			}
			res, err := c.Reconcile(ctx, client.ReconcileParams{From: from, To: to, TerminalID: w.terminal, Transactions: lines})
			if err != nil {
				return fail("reconcile", err)
			}
			if f.json {
				err = printJSON(cmd.OutOrStdout(), res)
			} else {
				printReconciliation(cmd.OutOrStdout(), res)
			}
			if err == nil && !res.Matched {
				return exitError{exitBooksDiffer, errors.New("the books differ")}
			}
			return err
		}),
	}
	w.add(cmd, true)
	return cmd
}

// readBooks reads the ECR's books from the CSV file name (- for r): the
// header names the columns (extra columns, such as those of list --csv,
// are ignored); a line's errors name its line number in the file.
func readBooks(r io.Reader, name string) ([]client.ReconcileLine, error) {
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usageError{err}
		}
		defer f.Close()
		r = f
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: no header row (%s): %w", name, strings.Join(booksColumns, ","), err)}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimPrefix(strings.TrimSpace(h), "\ufeff")] = i
	}
	for _, c := range booksColumns[2:] {
		if _, ok := col[c]; !ok {
			return nil, usageError{fmt.Errorf("%s: the header has no column %s (want %s)", name, c, strings.Join(booksColumns, ","))}
		}
	}
	amountCol := "amount"
	if _, ok := col["totalAmount"]; ok {
		amountCol = "totalAmount" // a file of list --csv: what the card was charged
	}
	var lines []client.ReconcileLine
	for n := 2; ; n++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", name, err)}
		}
		cell := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return unguard(strings.TrimSpace(rec[i]))
			}
			return ""
		}
		amount, err := strconv.ParseInt(cell(amountCol), 10, 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s line %d: amount %q is not an integer in minor units (1250 for 12.50 SEK)", name, n, cell(amountCol))}
		}
		lines = append(lines, client.ReconcileLine{OnlineAPIRefID: cell("onlineAPIRefId"), ECRReference: cell("ecrReference"),
			Type: instore.TransactionType(cell("type")), Amount: &amount, Currency: cell("currency"), Status: cell("status")})
	}
}

func printReconciliation(w io.Writer, r *client.Reconciliation) {
	c := r.Counts
	verdict := "the books agree"
	if !r.Matched {
		verdict = "the books differ"
	}
	fmt.Fprintf(w, "%s: %d lines, %d transactions in the service; %d matched, %d mismatched, %d missing in the service, %d missing in the ECR\n",
		verdict, c.ECRLines, c.ServiceTransactions, c.Matched, c.Mismatched, c.MissingInService, c.MissingInECR)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Mismatched) > 0 {
		fmt.Fprintln(tw, "\nMISMATCHED\tLINE\tFIELD\tECR\tSERVICE")
		for _, m := range r.Mismatched {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%v\n", m.OnlineAPIRefID, m.Index, m.Field, m.ECR, m.Service)
		}
	}
	if len(r.MissingInService) > 0 {
		fmt.Fprintln(tw, "\nMISSING IN THE SERVICE\tLINE\tECRREFERENCE\tTYPE\tAMOUNT\tSTATUS")
		for _, m := range r.MissingInService {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s %s\t%s\n", orDash(string(m.OnlineAPIRefID)), m.Index, orDash(string(m.ECRReference)), m.Type,
				client.FormatAmount(m.Amount, m.Currency), m.Currency, m.Status)
		}
	}
	if len(r.MissingInECR) > 0 {
		fmt.Fprintln(tw, "\nMISSING IN THE ECR\tCREATED\tECRREFERENCE\tTYPE\tAMOUNT\tSTATUS")
		for _, e := range r.MissingInECR {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %s\t%s\n", e.OnlineAPIRefID, e.CreatedAt.UTC().Format(time.RFC3339), orDash(string(e.ECRReference)), e.Type,
				client.FormatAmount(e.Amount, e.Currency), e.Currency, e.Status)
		}
	}
	tw.Flush()
}

// unguard undoes list --csv's guard against formulas: the apostrophe
// before a cell that starts with = + - @, a tab or a carriage return.
func unguard(s string) string {
	if len(s) > 1 && s[0] == '\'' && strings.ContainsRune("=+-@\t\r", rune(s[1])) {
		return s[1:]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listCSV prints the listing p selects as CSV, the service's own: one
// page, or with all every page under one header row. Without all, the
// next page's cursor goes to stderr.
func listCSV(ctx context.Context, cmd *cobra.Command, c *client.Client, p client.ListParams, all bool) error {
	for first := true; ; first = false {
		body, next, err := c.TransactionsCSV(ctx, p)
		if err != nil {
			return fail("list", err)
		}
		if !first {
			// The header row again: skip it.
			if i := slices.Index(body, '\n'); i >= 0 {
				body = body[i+1:]
			}
		}
		if _, err := cmd.OutOrStdout().Write(body); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if !all {
			fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", next)
			return nil
		}
		p.Cursor = next
	}
}

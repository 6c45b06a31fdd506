package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// Exit codes of `instore ecr`, beyond 0 (success) and the binary's 2 (the
// command was called wrongly).
const (
	// exitFailed: the request failed (an error answer, the network, a
	// time-out); nothing or not all was done.
	exitFailed = 1
	// exitNotApproved: the transaction ended in a final status other than
	// APPROVED (declined, aborted, technical error, reversed), also when
	// the answer was an error that ended it (504 WP25: the terminal did
	// not acknowledge it), or the print job did not print.
	exitNotApproved = 3
)

// Environment variables of `instore ecr` beyond the SDK's credentials.
const (
	envTerminalID = "INSTORE_TERMINAL_ID"
	envCurrency   = "INSTORE_CURRENCY"
)

// exitError ends the program with its code; run prints the error.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode is the process exit code.
func (e exitError) ExitCode() int { return e.code }

// ecrFlags are the flags every `instore ecr` subcommand shares.
type ecrFlags struct {
	url, key, token, clientID, clientSecret string
	json, verbose                           bool
	timeout                                 time.Duration
	caFile                                  string
}

func newEcrCmd() *cobra.Command {
	f := &ecrFlags{}
	cmd := &cobra.Command{
		Use:   "ecr",
		Short: "A command-line ECR: drive terminals through the Online API (purchase, status, cancel, refund, print, events, webhooks, ...)",
		Long: `A command-line ECR (cash register) on the Online API, built on the Go SDK
(package client). It prints for people by default; --json prints JSON for
scripts (for a transaction, one object per line as it changes, the final one
last).

Base URL and credentials come from flags or the environment (flags win):
  --url              INSTORE_ONLINE_API_URL (default http://127.0.0.1:8080)
  --subscription-key INSTORE_SUBSCRIPTION_KEY
  --access-token     INSTORE_ACCESS_TOKEN, or
  --client-id and --client-secret
                     INSTORE_CLIENT_ID and INSTORE_CLIENT_SECRET (tokens are
                     fetched and renewed; they win over a static token)
  --terminal         INSTORE_TERMINAL_ID (purchase, refund, cancel, print)
  --currency         INSTORE_CURRENCY (purchase, refund)
Prefer the environment for secrets: flags show in the process list. Against
the demo: instore demo --env prints these variables as export lines; paste
them into the shell that runs instore ecr (or redirect them to a file and
source it).

Amounts are typed as a person does, 12.50, in the currency's ISO 4217 decimals
(JPY none, KWD three); more decimals than the currency has are refused.

Exit codes: 0 success (for a transaction: APPROVED, or still PENDING without
--wait); 1 the request failed (error answer, network, time-out); 2 the
command was called wrongly; 3 the transaction ended in another
final status (declined, aborted, cancelled, technical error, reversed), also
when the terminal did not acknowledge it (504 WP25: it ends TECHNICAL_ERROR,
shown like any other), or the print job did not print (the terminal has no
printer, no paper, ...).

Errors about an amount name it as typed, with the amounts they quote in the
currency's decimals (amount 20.00 SEK exceeds what is left to refund of the
original (7.50 SEK)). A transaction answered from an earlier request with the
same --idempotency-key says so on stderr ("replayed").`,
		Example: `  instore demo --env > demo.env &   # then, once it has printed: . ./demo.env
  instore ecr purchase 12.50 --wait
  instore ecr purchase 12.50 --terminal 10000001 --currency SEK --wait --json
  instore ecr status txn_01... --wait
  instore ecr timeline txn_01...
  instore ecr list --from 2h
  instore ecr purchase 12.50 --confirm-within 2m --wait && instore ecr confirm txn_01...
  instore ecr events --follow
  instore ecr close 10000001 && instore ecr batches
  instore ecr webhook listen --register`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "Online API base URL (env "+client.EnvOnlineAPIURL+"; default http://127.0.0.1:8080)")
	pf.StringVar(&f.key, "subscription-key", "", "merchant subscription key (env "+client.EnvSubscriptionKey+"); secret")
	pf.StringVar(&f.token, "access-token", "", "bearer token (env "+client.EnvAccessToken+"); secret")
	pf.StringVar(&f.clientID, "client-id", "", "OAuth client ID (env "+client.EnvClientID+")")
	pf.StringVar(&f.clientSecret, "client-secret", "", "OAuth client secret (env "+client.EnvClientSecret+"); secret")
	pf.BoolVar(&f.json, "json", false, "print JSON for scripts (a transaction: one object per line as it changes, the final one last)")
	pf.BoolVarP(&f.verbose, "verbose", "v", false, "log every HTTP request (method, path, status, duration, request id) to stderr")
	pf.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long")
	pf.StringVar(&f.caFile, "ca-file", "", "PEM file of CA certificates to trust for an https:// URL, besides the system's")
	cmd.AddCommand(
		ecrTerminalsCmd(f),
		ecrPurchaseCmd(f), ecrStatusCmd(f), ecrTimelineCmd(f), ecrCancelCmd(f), ecrRefundCmd(f), ecrReversalCmd(f),
		ecrPreAuthCmd(f), ecrIncrementCmd(f), ecrCaptureCmd(f), ecrVoidCmd(f),
		ecrListCmd(f), ecrPrintCmd(f), ecrEventsCmd(f), ecrWebhookCmd(f), ecrConfirmCmd(f),
		ecrTotalsCmd(f), ecrReconcileCmd(f),
		ecrCloseCmd(f), ecrBatchesCmd(f),
	)
	cmd.AddCommand(f.requestCmds(ecrTerminalRequests...)...)
	return cmd
}

// envOr returns v, or the environment variable name (or the file that
// name_FILE names) when v is empty.
func envOr(v, name string) (string, error) {
	if v != "" {
		return v, nil
	}
	if s, ok := os.LookupEnv(name); ok {
		return strings.TrimSpace(s), nil
	}
	if path, ok := os.LookupEnv(name + "_FILE"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", usageError{fmt.Errorf("%s_FILE: %w", name, err)}
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// client builds the SDK client from flags and environment.
func (f *ecrFlags) client(cmd *cobra.Command) (*client.Client, error) {
	var cr client.Credentials
	var err error
	get := func(v, name string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = envOr(v, name)
		return s
	}
	base := get(f.url, client.EnvOnlineAPIURL)
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	cr.SubscriptionKey = get(f.key, client.EnvSubscriptionKey)
	switch {
	case f.clientID != "" || f.clientSecret != "":
		cr.ClientID, cr.ClientSecret = get(f.clientID, client.EnvClientID), get(f.clientSecret, client.EnvClientSecret)
	case f.token != "":
		cr.AccessToken = f.token
	default:
		cr.ClientID, cr.ClientSecret = get("", client.EnvClientID), get("", client.EnvClientSecret)
		if cr.ClientID == "" || cr.ClientSecret == "" {
			cr.ClientID, cr.ClientSecret = "", ""
			cr.AccessToken = get("", client.EnvAccessToken)
		}
	}
	if err != nil {
		return nil, err
	}
	if cr.SubscriptionKey == "" || cr.AccessToken == "" && cr.ClientID == "" {
		return nil, usageError{fmt.Errorf("no credentials: set %s and %s (or %s and %s), or the flags; for the demo: the export lines of instore demo --env",
			client.EnvSubscriptionKey, client.EnvAccessToken, client.EnvClientID, client.EnvClientSecret)}
	}
	cfg := client.Config{OnlineAPIURL: base, Online: cr, UserAgent: "instore-ecr/" + version}
	if f.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	}
	if f.caFile != "" {
		if err := cfg.TrustCAFile(f.caFile); err != nil {
			return nil, usageError{fmt.Errorf("--ca-file: %w", err)}
		}
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// run is the RunE of an ecr command that calls the service: it builds the
// client from the flags and the environment, bounds the context by
// --timeout and calls fn with both.
func (f *ecrFlags) run(fn func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, a []string) error {
		ctx, c, cancel, err := f.connect(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		return fn(ctx, cmd, a, c)
	}
}

// connect builds the client from the flags and the environment and a
// context bounded by --timeout, to be cancelled when the command is done
// (nothing to cancel after an error).
func (f *ecrFlags) connect(cmd *cobra.Command) (context.Context, *client.Client, context.CancelFunc, error) {
	c, err := f.client(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := f.context(cmd)
	return ctx, c, cancel, nil
}

var errTimeout = errors.New("timed out")

// context bounds the command by --timeout; interrupting (SIGINT) cancels
// the command's own context.
func (f *ecrFlags) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	if f.timeout <= 0 {
		return context.WithCancel(cmd.Context())
	}
	return context.WithTimeoutCause(cmd.Context(), f.timeout, fmt.Errorf("%w after --timeout %s", errTimeout, f.timeout))
}

// fail turns an error of the SDK into the command's error: a problem
// answer reads as its code, title, detail and request id.
func fail(op string, err error) error { return failTyped(op, err, nil) }

// failTyped is fail for a request with amounts the user typed: the
// problem's field errors about them name them as typed and show the
// amounts they quote in the currency's decimals, not in minor units.
func failTyped(op string, err error, typed *typedAmounts) error {
	var e *client.Error
	if errors.As(err, &e) {
		msg := fmt.Sprintf("%s: %d %s", op, e.StatusCode, e.Code())
		if e.Title != "" && e.Title != e.Code() {
			msg += " " + e.Title
		}
		// A validation problem's detail only points at its field errors,
		// which follow.
		if e.Detail != "" && e.Detail != e.Title && len(e.Errors) == 0 {
			msg += ": " + strings.TrimSuffix(e.Detail, ".")
		}
		for i, fe := range e.Errors {
			sep := "; "
			if i == 0 {
				sep = ": "
			}
			msg += sep + typed.fieldError(fe)
		}
		if e.OnlineAPIRefID != "" {
			msg += " (onlineAPIRefId " + e.OnlineAPIRefID + ")"
		}
		if e.RequestID != "" {
			msg += " (requestId " + e.RequestID + ")"
		}
		return exitError{exitFailed, errors.New(msg)}
	}
	var unknownCA *client.UnknownCAError
	if errors.As(err, &unknownCA) {
		// The SDK's hint names its Config; the command's is a flag.
		return exitError{exitFailed, fmt.Errorf("%s: %v: pass the service's CA with --ca-file FILE", op, unknownCA.Err)}
	}
	return exitError{exitFailed, fmt.Errorf("%s: %w", op, err)}
}

// args checks the number of positional arguments as a usage error.
func args(min, max int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < min || len(a) > max {
			return usageError{fmt.Errorf("%s takes %s", cmd.CommandPath(), names)}
		}
		return nil
	}
}

// requestFunc makes the one request of an ecr command with its positional
// arguments and returns what --json prints (nil: nothing) and what prints
// the answer for people otherwise.
type requestFunc func(ctx context.Context, a []string, c *client.Client) (v any, human func(io.Writer), err error)

// call is the RunE of an ecr command of one request: fn makes it. An error
// of fn fails op.
func (f *ecrFlags) call(op string, fn requestFunc) func(*cobra.Command, []string) error {
	return f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
		v, human, err := fn(ctx, a, c)
		switch {
		case err != nil:
			return fail(op, err)
		case !f.json:
			human(cmd.OutOrStdout())
		case v != nil:
			return printJSON(cmd.OutOrStdout(), v)
		}
		return nil
	})
}

// answer is the requestFunc of a request whose answer --json prints as it
// is and human prints for people.
func answer[T any](request func(ctx context.Context, a []string, c *client.Client) (T, error), human func(T) func(io.Writer)) requestFunc {
	return func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
		v, err := request(ctx, a, c)
		return v, human(v), err
	}
}

// request describes an ecr command of one request and no flags of its own.
type request struct {
	use, short string
	args       cobra.PositionalArgs
	// op names the request in its errors.
	op string
	do requestFunc
}

// requestCmds builds the commands rs describe.
func (f *ecrFlags) requestCmds(rs ...request) []*cobra.Command {
	cmds := make([]*cobra.Command, len(rs))
	for i, r := range rs {
		cmds[i] = &cobra.Command{Use: r.use, Short: r.short, Args: r.args, RunE: f.call(r.op, r.do)}
	}
	return cmds
}

// terminalTable prints t for people.
func terminalTable(t *client.Terminal) func(io.Writer) {
	return func(w io.Writer) { printTerminals(w, []*client.Terminal{t}) }
}

// ecrTerminalRequests are the ecr commands of one request about the code
// lists and the terminals.
var ecrTerminalRequests = []request{
	{"metadata", "Show the code lists: error codes, transaction statuses, payment methods, print statuses", args(0, 0, "no arguments"), "metadata",
		answer(func(ctx context.Context, _ []string, c *client.Client) (*client.Metadata, error) {
			return c.Metadata(ctx)
		}, metadataTable)},
	{"link TERMINAL_ID LINK_CODE", "Link the terminal showing LINK_CODE on its screen to TERMINAL_ID",
		args(2, 2, "a terminal ID and the 6-digit link code the terminal shows"), "link",
		answer(func(ctx context.Context, a []string, c *client.Client) (*client.Terminal, error) {
			return c.LinkTerminal(ctx, a[0], a[1])
		}, terminalTable)},
	{"unlink TERMINAL_ID", "Unlink the terminal of TERMINAL_ID (it then shows a new link code)", args(1, 1, "a terminal ID"), "unlink",
		answer(func(ctx context.Context, a []string, c *client.Client) (*client.Terminal, error) {
			return c.UnlinkTerminal(ctx, a[0])
		}, terminalTable)},
}

// metadataTable prints m for people.
func metadataTable(m *client.Metadata) func(io.Writer) {
	return func(w io.Writer) { printMetadata(w, m) }
}

func ecrTerminalsCmd(f *ecrFlags) *cobra.Command {
	one := f.call("terminal", answer(func(ctx context.Context, a []string, c *client.Client) (*client.Terminal, error) {
		return c.Terminal(ctx, a[0])
	}, terminalTable))
	all := f.call("terminals", func(ctx context.Context, _ []string, c *client.Client) (any, func(io.Writer), error) {
		ts, err := c.Terminals(ctx)
		return map[string]any{"terminals": ts}, func(w io.Writer) { printTerminals(w, ts) }, err
	})
	return &cobra.Command{
		Use:   "terminals [TERMINAL_ID]",
		Short: "List the merchant's terminal IDs, or show one",
		Args:  args(0, 1, "at most one terminal ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 {
				return one(cmd, a)
			}
			return all(cmd, a)
		},
	}
}

func ecrListCmd(f *ecrFlags) *cobra.Command {
	var (
		l                  listing
		status, reference  string
		unconfirmed, asCSV bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List transactions, newest first (default: the last 24 hours)",
		Long: `List the merchant's transactions, newest first. --from and --to take an RFC 3339
time (2026-01-31T12:00:00Z) or a duration ago (2h, 30m); a listing covers at
most 30 days (WP26) within the past 90 days (WP27). --json prints the page as
the API answers it ({"transactions": [...], "nextCursor": ...}).`,
		Args: args(0, 0, "no arguments"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, _ []string, c *client.Client) error {
			var err error
			p := client.ListParams{TerminalID: l.terminal, ECRReference: reference, Unconfirmed: unconfirmed, Limit: l.limit, Cursor: l.cursor}
			if p.From, p.To, err = l.window(); err != nil {
				return err
			}
			if status != "" {
				id, err := transactionStatus(ctx, c, status)
				if err != nil {
					return err
				}
				p.StatusID = &id
			}
			if asCSV {
				return listCSV(ctx, cmd, c, p, l.all)
			}
			page := &client.TransactionPage{}
			if l.all {
				for tx, err := range c.AllTransactions(ctx, p) {
					if err != nil {
						return fail("list", err)
					}
					page.Transactions = append(page.Transactions, tx)
				}
			} else if page, err = c.Transactions(ctx, p); err != nil {
				return fail("list", err)
			}
			if f.json {
				return printPage(cmd.OutOrStdout(), page)
			}
			printList(cmd.OutOrStdout(), page)
			return nil
		}),
	}
	fs := cmd.Flags()
	l.add(fs, "createdAt", "2h")
	fs.StringVar(&status, "status", "", "only this transaction status (code such as APPROVED, or id)")
	fs.StringVar(&reference, "reference", "", "only this ecrReference")
	fs.BoolVar(&unconfirmed, "unconfirmed", false, "only the APPROVED sales still awaiting confirmation (see confirm)")
	fs.BoolVar(&asCSV, "csv", false, "print the service's CSV export (RFC 4180, a header row; see reconcile)")
	return cmd
}

func whenFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageError{fmt.Errorf("%s: %q is neither an RFC 3339 time nor a duration such as 2h", name, v)}
}

func transactionStatus(ctx context.Context, c *client.Client, v string) (instore.TransactionStatus, error) {
	if id, err := strconv.Atoi(v); err == nil {
		return instore.TransactionStatus(id), nil
	}
	m, err := c.Metadata(ctx)
	if err != nil {
		return 0, fail("metadata", err)
	}
	for _, s := range m.TransactionStatuses {
		if strings.EqualFold(s.Code, v) {
			return instore.TransactionStatus(s.ID), nil
		}
	}
	return 0, usageError{fmt.Errorf("--status: %q is not a code or id of the transactionStatuses list", v)}
}

func ecrPrintCmd(f *ecrFlags) *cobra.Command {
	var terminal, receipt, copyName, job string
	cmd := &cobra.Command{
		Use:   "print [LINE...]",
		Short: "Print lines, or a transaction's receipt (--receipt REF), on a terminal; --job shows a print job",
		Example: `  instore ecr print "Thank you" "Welcome back"
  instore ecr print --receipt txn_01... --copy merchant
  instore ecr print --job prt_01...`,
		RunE: func(cmd *cobra.Command, lines []string) error {
			switch {
			case job != "" && (len(lines) > 0 || receipt != ""):
				return usageError{errors.New("--job shows a print job; it takes no lines and no --receipt")}
			case job == "" && len(lines) == 0 && receipt == "":
				return usageError{errors.New("give lines to print, --receipt REF, or --job PRINT_ID")}
			case len(lines) > 0 && receipt != "":
				return usageError{errors.New("give lines or --receipt, not both")}
			}
			ctx, c, cancel, err := f.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			var j *client.PrintJob
			if job != "" {
				if j, err = c.PrintJob(ctx, job); err != nil {
					return fail("print job", err)
				}
			} else {
				term, err := (&txFlags{terminal: terminal}).terminalID()
				if err != nil {
					return err
				}
				p := client.PrintParams{TerminalID: term, Lines: lines}
				if receipt != "" {
					p.OnlineAPIRefID, p.Copy = receipt, strings.ToUpper(copyName)
				}
				if j, err = c.Print(ctx, p); err != nil {
					return fail("print", err)
				}
			}
			printJob(cmd.OutOrStdout(), j, f.json)
			if j.StatusID != nil && *j.StatusID != instore.PrintSuccess {
				return exitError{exitNotApproved, printFailure(ctx, c, j)}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&terminal, "terminal", "", "terminal ID (env "+envTerminalID+")")
	fs.StringVar(&receipt, "receipt", "", "print the receipt of this onlineAPIRefId")
	fs.StringVar(&copyName, "copy", instore.CopyCustomer, "receipt copy: CUSTOMER or MERCHANT")
	fs.StringVar(&job, "job", "", "show this print job (printId) instead of printing")
	return cmd
}

// printFailure says why a print job did not print: its print status and
// what that means; for an ERROR on a model without a printer, that the
// terminal has none.
func printFailure(ctx context.Context, c *client.Client, j *client.PrintJob) error {
	msg := fmt.Sprintf("print job %s ended %s", j.PrintID, j.Status)
	if *j.StatusID == instore.PrintError {
		if t, err := c.Terminal(ctx, j.TerminalID); err == nil && t.Model != nil && !instore.ModelHasPrinter(*t.Model) {
			return fmt.Errorf("%s: terminal %s has no printer (model %s)", msg, j.TerminalID, *t.Model)
		}
	}
	if st, ok := ecrCodeLists.PrintStatus(*j.StatusID); ok {
		msg += ": " + st.Description
	}
	return errors.New(msg)
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	return writeJSONLine(w, v)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// txFlags are the flags of the commands that start a transaction.
type txFlags struct {
	terminal, currency, paymentMethod, reference, idempotencyKey string
	wait, receipt                                                bool
}

func (t *txFlags) register(cmd *cobra.Command, withTerminal bool) {
	fs := cmd.Flags()
	if withTerminal {
		fs.StringVar(&t.terminal, "terminal", "", "terminal ID (env "+envTerminalID+")")
	}
	fs.StringVar(&t.reference, "reference", "", "the ECR's own reference (ecrReference), at most 64 characters")
	fs.StringVar(&t.idempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new random one); the same key repeats the first answer")
	fs.BoolVar(&t.wait, "wait", false, "follow the transaction to its final status, showing the terminal's progress")
	fs.BoolVar(&t.receipt, "receipt", false, "show the customer receipt when the transaction is final")
}

// registerPayment registers the flags of a transaction that moves money
// (purchase, refund): those of register, --currency and --payment-method
// with their usages.
func (t *txFlags) registerPayment(cmd *cobra.Command, currencyUsage, paymentMethodUsage string) *pflag.FlagSet {
	t.register(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&t.currency, "currency", "", currencyUsage)
	fs.StringVar(&t.paymentMethod, "payment-method", "", paymentMethodUsage)
	return fs
}

func (t *txFlags) terminalID() (string, error) {
	id, err := envOr(t.terminal, envTerminalID)
	if err == nil && id == "" {
		err = usageError{fmt.Errorf("no terminal: give --terminal or set %s", envTerminalID)}
	}
	return id, err
}

func (t *txFlags) currencyCode() (string, error) {
	cur, err := envOr(t.currency, envCurrency)
	if err == nil && cur == "" {
		err = usageError{fmt.Errorf("no currency: give --currency or set %s", envCurrency)}
	}
	return strings.ToUpper(cur), err
}

// amount parses an amount flag or argument as a usage error.
func amount(name, s, currency string) (int64, error) {
	n, err := client.ParseAmount(s, currency)
	if err != nil {
		return 0, usageError{fmt.Errorf("%s: %w", name, err)}
	}
	return n, nil
}

// typedAmounts are the amounts of a request as the user typed them, so
// that a problem about them reads in the user's words and units: "amount
// 20.00 SEK exceeds what is left to refund of the original (7.50 SEK)",
// not "/amount exceeds ... (750)".
type typedAmounts struct {
	currency string
	// fields maps a body member (a JSON pointer, /amount) to what the user
	// typed for it: the argument or flag name and the text.
	fields map[string]typedAmount
}

type typedAmount struct{ name, text string }

func newTypedAmounts(currency string) *typedAmounts {
	return &typedAmounts{currency: currency, fields: map[string]typedAmount{}}
}

// parse reads the amount the user typed as name (amount, --vat) in the
// currency's minor units and records it as the text for the member pointer.
func (a *typedAmounts) parse(pointer, name, text string) (int64, error) {
	n, err := amount(name, text, a.currency)
	if err != nil {
		return 0, err
	}
	a.fields[pointer] = typedAmount{name, text}
	return n, nil
}

// minorUnits matches the integers (amounts in minor units) a field error
// about an amount quotes.
var minorUnits = regexp.MustCompile(`\b\d+\b`)

// fieldError shows a problem's field error: about an amount the user
// typed, under the name and text typed, with the amounts it quotes in
// the currency's decimals; any other as the service names it.
func (a *typedAmounts) fieldError(fe client.FieldError) string {
	if a == nil {
		return fe.Field + " " + fe.Message
	}
	typed, ok := a.fields[fe.Field]
	if !ok {
		return fe.Field + " " + fe.Message
	}
	// The amount was typed in the currency's decimals: the service's
	// words on minor units (and its example of them) are not for the user.
	msg, _, _ := strings.Cut(fe.Message, ", e.g. ")
	msg = strings.Replace(msg, "an integer in minor units from ", "from ", 1)
	msg = strings.ReplaceAll(msg, " (minor units)", "")
	msg = minorUnits.ReplaceAllStringFunc(msg, func(n string) string {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return n
		}
		return client.FormatAmount(v, a.currency) + " " + a.currency
	})
	return fmt.Sprintf("%s %s %s %s", typed.name, typed.text, a.currency, msg)
}

// paymentMethod resolves --payment-method given as an id or a code of the
// paymentMethods list.
func paymentMethod(ctx context.Context, c *client.Client, v string) (*int, error) {
	if v == "" {
		return nil, nil
	}
	if id, err := strconv.Atoi(v); err == nil {
		return &id, nil
	}
	m, err := c.Metadata(ctx)
	if err != nil {
		return nil, fail("metadata", err)
	}
	for _, pm := range m.PaymentMethods {
		if strings.EqualFold(pm.Code, v) {
			return client.Int(pm.ID), nil
		}
	}
	return nil, usageError{fmt.Errorf("--payment-method: %q is not an id or code of the paymentMethods list", v)}
}

// amountRule is how the amounts of the commands are written
// (client.ParseAmount), for their help.
const amountRule = `Amounts are in the currency's decimals: 12.50 SEK, 1250
JPY, 1.250 KWD. The decimal separator is a dot or a comma (12,50), at most one,
with at most the currency's decimals after it; thousands separators are never
accepted, so a comma before exactly three digits (1,250) is refused as
ambiguous: write 1250, or 1.250 with a dot.`

func ecrPurchaseCmd(f *ecrFlags) *cobra.Command {
	var (
		sf       saleFlags
		cashback string
		confirm  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "purchase AMOUNT",
		Short: "Start a purchase of AMOUNT (such as 12.50) on a terminal; --wait follows it to the end",
		Long: `Start a purchase of AMOUNT on a terminal. The Online API answers once the
terminal acknowledged it (PENDING); --wait then follows it with the long-poll,
showing the terminal's progress (waiting for the card, the PIN, authorizing)
and the final status. Interrupting (Ctrl-C) while waiting cancels the
transaction on the terminal and shows how it ended.

` + amountRule + `

In the sandbox the last two digits of the amount pick the outcome: 10.11
declined, 10.12 wrong PIN, 10.91 no acknowledgement (WP25), 10.92 no answer
(WP36, or cancel it), 10.94 a slow approval; every other amount is approved.

--confirm-within asks for ECR confirmation: the APPROVED sale is reversed on its
terminal unless confirmed (instore ecr confirm REF) within that long of its
approval.

A tip on top of AMOUNT: --tip-prompt 10,15,20 (the terminal offers those
percentages, another amount and no tip), --tip-enter-total (the cardholder
types the total), or --tip 1.50 (a tip the till already knows). The
transaction then shows the tip and the total charged.`,
		Args: args(1, 1, "the amount, such as 12.50"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			p, typed, err := sf.params(ctx, c, a[0])
			if err != nil {
				return err
			}
			if p.ConfirmWithinSeconds, err = confirmWithin(confirm); err != nil {
				return err
			}
			if cashback != "" {
				if p.CashbackAmount, err = typed.parse("/cashbackAmount", "--cashback", cashback); err != nil {
					return err
				}
			}
			return startTransaction(cmd, f, &sf.tf, c, ctx, "purchase", typed, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Purchase(ctx, p, opts...)
			})
		}),
	}
	fs := sf.register(cmd)
	fs.StringVar(&cashback, "cashback", "", "cash paid out, included in AMOUNT")
	fs.DurationVar(&confirm, "confirm-within", 0, "ask for ECR confirmation: unless confirmed (instore ecr confirm) this long after its approval (10s-10m), the sale is reversed")
	return cmd
}

// saleFlags are the flags of a sale read from a card (purchase, preauth).
type saleFlags struct {
	tf           txFlags
	vat          string
	printReceipt bool
	tips         tipFlags
}

// register adds the flags to cmd and returns its flag set.
func (sf *saleFlags) register(cmd *cobra.Command) *pflag.FlagSet {
	fs := sf.tf.registerPayment(cmd, "ISO 4217 currency code such as SEK (env "+envCurrency+")",
		"pay with a payment method (id or code of the metadata's paymentMethods) instead of a card")
	fs.StringVar(&sf.vat, "vat", "", "VAT included in AMOUNT, for the receipt")
	fs.BoolVar(&sf.printReceipt, "print-receipt", false, "the terminal prints the receipt")
	sf.tips.register(cmd)
	return fs
}

// params reads the sale of amount the flags describe (terminal, currency,
// amount, VAT, tip, payment method), and the amounts as typed.
func (sf *saleFlags) params(ctx context.Context, c *client.Client, amount string) (client.PurchaseParams, *typedAmounts, error) {
	var p client.PurchaseParams
	term, err := sf.tf.terminalID()
	if err != nil {
		return p, nil, err
	}
	cur, err := sf.tf.currencyCode()
	if err != nil {
		return p, nil, err
	}
	p = client.PurchaseParams{TerminalID: term, Currency: cur, ECRReference: sf.tf.reference, PrintReceipt: sf.printReceipt}
	typed := newTypedAmounts(cur)
	if p.Amount, err = typed.parse("/amount", "amount", amount); err != nil {
		return p, nil, err
	}
	if sf.vat != "" {
		n, err := typed.parse("/vatAmount", "--vat", sf.vat)
		if err != nil {
			return p, nil, err
		}
		p.VATAmount = &n
	}
	if p.Tip, err = sf.tips.tip(typed); err != nil {
		return p, nil, err
	}
	p.PaymentMethodID, err = paymentMethod(ctx, c, sf.tf.paymentMethod)
	return p, typed, err
}

func ecrRefundCmd(f *ecrFlags) *cobra.Command {
	var (
		tf       txFlags
		original string
	)
	cmd := &cobra.Command{
		Use:   "refund AMOUNT",
		Short: "Refund AMOUNT on a terminal, of an original purchase (--original) or not",
		Long:  "Refund AMOUNT on a terminal, of an original purchase (--original) or not.\n\n" + amountRule,
		Args:  args(1, 1, "the amount, such as 5.00"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			term, err := tf.terminalID()
			if err != nil {
				return err
			}
			cur, _ := envOr(tf.currency, envCurrency)
			if original != "" && tf.currency == "" {
				// A refund is in its original's currency.
				o, err := c.Transaction(ctx, original, 0)
				if err != nil {
					return fail("original", err)
				}
				cur = o.Currency
			}
			if cur == "" {
				return usageError{fmt.Errorf("no currency: give --currency or set %s", envCurrency)}
			}
			cur = strings.ToUpper(cur)
			p := client.RefundParams{TerminalID: term, Currency: cur, OriginalOnlineAPIRefID: original, ECRReference: tf.reference}
			typed := newTypedAmounts(cur)
			if p.Amount, err = typed.parse("/amount", "amount", a[0]); err != nil {
				return err
			}
			if p.PaymentMethodID, err = paymentMethod(ctx, c, tf.paymentMethod); err != nil {
				return err
			}
			return startTransaction(cmd, f, &tf, c, ctx, "refund", typed, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Refund(ctx, p, opts...)
			})
		}),
	}
	fs := tf.registerPayment(cmd, "ISO 4217 currency code (env "+envCurrency+"; default with --original: the original's)",
		"refund through the payment method the original was paid with (id or code)")
	fs.StringVar(&original, "original", "", "onlineAPIRefId of the APPROVED purchase refunded")
	return cmd
}

func ecrReversalCmd(f *ecrFlags) *cobra.Command {
	return f.onRefCmd("reversal ONLINE_API_REF_ID", "Reverse an APPROVED purchase that is the latest transaction of its terminal (no card needed)",
		"the onlineAPIRefId of the purchase", "reversal", func(ctx context.Context, c *client.Client, ref, reference string, opts ...client.CallOption) (*client.Transaction, error) {
			return c.Reversal(ctx, client.ReversalParams{OnlineAPIRefID: ref, ECRReference: reference}, opts...)
		})
}

// onRefCmd builds a command that starts a transaction of no amount on an
// earlier one, its one argument ONLINE_API_REF_ID, on that one's terminal
// (reversal, void): start makes the request with the onlineAPIRefId and
// the --reference.
func (f *ecrFlags) onRefCmd(use, short, argName, op string,
	start func(ctx context.Context, c *client.Client, ref, reference string, opts ...client.CallOption) (*client.Transaction, error)) *cobra.Command {
	var tf txFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args(1, 1, argName),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			return startTransaction(cmd, f, &tf, c, ctx, op, nil, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return start(ctx, c, a[0], tf.reference, opts...)
			})
		}),
	}
	tf.register(cmd, false)
	return cmd
}

// startFunc starts a transaction with the call's options.
type startFunc func(context.Context, ...client.CallOption) (*client.Transaction, error)

// startTransaction runs start (with the --idempotency-key when given),
// shows the transaction and, with --wait, follows it to its end. typed,
// when not nil, names the amounts the user typed, for a problem about
// them.
func startTransaction(cmd *cobra.Command, f *ecrFlags, tf *txFlags, c *client.Client, ctx context.Context, op string, typed *typedAmounts, start startFunc) error {
	var resp client.Response
	opts := []client.CallOption{client.SaveResponse(&resp)}
	if tf.idempotencyKey != "" {
		opts = append(opts, client.IdempotencyKey(tf.idempotencyKey))
	}
	tx, err := start(ctx, opts...)
	out := newOutput(cmd.OutOrStdout(), f.json, tf.receipt)
	if err != nil {
		if ref, ok := endedBy(err); ok {
			// The answer ended the transaction: show it as any other
			// final status; if it cannot be read, say how it ended.
			if tx, terr := c.Transaction(ctx, ref, 0); terr == nil && tx.Final() {
				out.show(tx)
				return outcome(tx)
			}
			return exitError{exitNotApproved, fmt.Errorf("%v; transaction %s ended TECHNICAL_ERROR", failTyped(op, err, typed), ref)}
		}
		return failTyped(op, err, typed)
	}
	if resp.Replayed {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: replayed: the answer to an earlier request with this Idempotency-Key; nothing new was started\n", op)
	}
	if !tf.wait {
		out.show(tx)
		return outcome(tx)
	}
	return follow(cmd, c, ctx, out, tx, true)
}

// follow waits for tx's final status, showing its progress. When the
// command is interrupted and cancelOnInterrupt is set, it cancels the
// transaction on its terminal and shows how it ended.
func follow(cmd *cobra.Command, c *client.Client, ctx context.Context, out *output, tx *client.Transaction, cancelOnInterrupt bool) error {
	out.progress(tx)
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, out.progress)
	if err == nil {
		out.final(final)
		return outcome(final)
	}
	out.stopSpinner()
	if last := final; last != nil {
		tx = last
	}
	if errors.Is(context.Cause(ctx), errTimeout) {
		return exitError{exitFailed, fmt.Errorf("%w; %s is still %s: instore ecr status %s --wait", context.Cause(ctx), tx.OnlineAPIRefID, tx.Status, tx.OnlineAPIRefID)}
	}
	if cmd.Context().Err() == nil {
		return fail("wait", err)
	}
	if !cancelOnInterrupt {
		return exitError{exitFailed, fmt.Errorf("interrupted; %s goes on at the terminal (%s)", tx.OnlineAPIRefID, tx.Status)}
	}
	// Interrupted: the cashier gave up. Cancel on the terminal, so that
	// no card is charged for a sale the ECR no longer waits for.
	fmt.Fprintf(cmd.ErrOrStderr(), "interrupted: cancelling %s on terminal %s\n", tx.OnlineAPIRefID, tx.TerminalID)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := c.CancelTransaction(cctx, tx.TerminalID, tx.OnlineAPIRefID); err != nil && !client.IsCode(err, instore.WP18) {
		return fail("cancel", err)
	}
	final, err = c.WaitForFinal(cctx, tx.OnlineAPIRefID, out.progress)
	if err != nil {
		return fail("wait after cancel", err)
	}
	out.final(final)
	return outcome(final)
}

// endedBy returns the transaction an error answer ended: a 504 WP25 (the
// terminal did not acknowledge it) or a 409 WP23 naming a transaction (the
// terminal went offline before the request reached it) stores it
// TECHNICAL_ERROR. Other answers naming a transaction (WP09, WP30) are
// about another one, still running.
func endedBy(err error) (string, bool) {
	var e *client.Error
	if !errors.As(err, &e) || e.OnlineAPIRefID == "" || e.ErrorCode != instore.WP25 && e.ErrorCode != instore.WP23 {
		return "", false
	}
	return e.OnlineAPIRefID, true
}

// outcome is the command's result for a transaction shown: nil while it
// is PENDING or APPROVED, exit code 3 for any other final status.
func outcome(tx *client.Transaction) error {
	if !tx.Final() || tx.Approved() {
		return nil
	}
	msg := fmt.Sprintf("transaction %s ended %s (%d)", tx.OnlineAPIRefID, tx.Status, tx.StatusID)
	if string(tx.ErrorCode) != "" {
		msg += " with " + string(tx.ErrorCode)
		if c, ok := ecrCodeLists.ErrorCode(string(tx.ErrorCode)); ok {
			msg += " " + c.Description
		}
	}
	return exitError{exitNotApproved, errors.New(msg)}
}

func ecrStatusCmd(f *ecrFlags) *cobra.Command {
	var wait, receipt bool
	cmd := &cobra.Command{
		Use:   "status ONLINE_API_REF_ID",
		Short: "Show a transaction; --wait follows it to its final status",
		Args:  args(1, 1, "an onlineAPIRefId"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			tx, err := c.Transaction(ctx, a[0], 0)
			if err != nil {
				return fail("status", err)
			}
			out := newOutput(cmd.OutOrStdout(), f.json, receipt)
			if !wait || tx.Final() {
				out.show(tx)
				return outcome(tx)
			}
			return follow(cmd, c, ctx, out, tx, false)
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the transaction to its final status")
	cmd.Flags().BoolVar(&receipt, "receipt", false, "show the customer receipt")
	return cmd
}

func ecrTimelineCmd(f *ecrFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "timeline ONLINE_API_REF_ID",
		Short: "Show what happened to a transaction: every change, when, and who caused it",
		Args:  args(1, 1, "an onlineAPIRefId"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			es, err := c.TransactionEvents(ctx, a[0])
			if err != nil {
				return fail("timeline", err)
			}
			w := cmd.OutOrStdout()
			for _, e := range es {
				if f.json {
					b, _ := json.Marshal(e)
					fmt.Fprintf(w, "%s\n", b)
					continue
				}
				change := e.StatusAfter
				if e.StatusBefore != "" && e.StatusBefore != e.StatusAfter {
					change = e.StatusBefore + " -> " + e.StatusAfter
				}
				line := fmt.Sprintf("%s  %-8s  %-16s  %s", e.At.Local().Format("2006-01-02 15:04:05.000"), e.Actor, e.Kind, change)
				if e.Detail != "" {
					line += "  (" + e.Detail + ")"
				}
				fmt.Fprintln(w, line)
			}
			return nil
		}),
	}
}

func ecrCancelCmd(f *ecrFlags) *cobra.Command {
	var tf txFlags
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "Cancel the transaction running on a terminal; --wait shows how it ended",
		Args:  args(0, 0, "no arguments (the terminal is --terminal or "+envTerminalID+")"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, _ []string, c *client.Client) error {
			term, err := tf.terminalID()
			if err != nil {
				return err
			}
			return startTransaction(cmd, f, &tf, c, ctx, "cancel", nil, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Cancel(ctx, term, opts...)
			})
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&tf.terminal, "terminal", "", "terminal ID (env "+envTerminalID+")")
	fs.BoolVar(&tf.wait, "wait", false, "follow the cancelled transaction to its final status")
	return cmd
}

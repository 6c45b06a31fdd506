package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/client"
)

// The pre-authorisation commands: preauth holds money on a card; increment,
// capture and void act on it on its terminal, without the card.

func ecrPreAuthCmd(f *ecrFlags) *cobra.Command {
	var sf saleFlags
	cmd := &cobra.Command{
		Use:   "preauth AMOUNT",
		Short: "Pre-authorise AMOUNT on a card (a hotel's check-in); --wait follows it to the end",
		Long: `Pre-authorise AMOUNT on a terminal: the card holds it until the pre-authorisation
is captured (instore ecr capture REF TOTAL), voided (instore ecr void REF) or
expires (the service voids it). Increase it with instore ecr increment REF AMOUNT.
Followed like a purchase, with the purchase's flags but --cashback and
--confirm-within.

` + amountRule,
		Args: args(1, 1, "the amount, such as 500.00"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			s, typed, err := sf.params(ctx, c, a[0])
			if err != nil {
				return err
			}
			p := client.PreAuthParams{TerminalID: s.TerminalID, Amount: s.Amount, Currency: s.Currency, VATAmount: s.VATAmount,
				PaymentMethodID: s.PaymentMethodID, ECRReference: s.ECRReference, PrintReceipt: s.PrintReceipt, Tip: s.Tip}
			return startTransaction(cmd, f, &sf.tf, c, ctx, "preauth", typed, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Preauthorize(ctx, p, opts...)
			})
		}),
	}
	sf.register(cmd)
	return cmd
}

// preAuthAmount reads the amount a[1], typed as name, in the currency of
// the pre-authorisation a[0]: that of an increment or a capture.
func preAuthAmount(ctx context.Context, c *client.Client, a []string, name string) (*typedAmounts, int64, error) {
	pre, err := c.Transaction(ctx, a[0], 0)
	if err != nil {
		return nil, 0, fail("pre-authorisation", err)
	}
	typed := newTypedAmounts(pre.Currency)
	n, err := typed.parse("/amount", name, a[1])
	return typed, n, err
}

func ecrIncrementCmd(f *ecrFlags) *cobra.Command {
	return f.preAuthOpCmd("increment ONLINE_API_REF_ID AMOUNT", "Raise an OPEN pre-authorisation by AMOUNT, on its terminal (no card needed)",
		"Raise an OPEN pre-authorisation by AMOUNT, in its currency, on its terminal (no card needed).\n\n"+amountRule,
		"the increase", "amount", "increment", func(c *client.Client, _ *typedAmounts, ref string, n int64, reference string) (startFunc, error) {
			p := client.IncrementParams{OnlineAPIRefID: ref, Amount: n, ECRReference: reference}
			return func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Increment(ctx, p, opts...)
			}, nil
		})
}

func ecrCaptureCmd(f *ecrFlags) *cobra.Command {
	var tip string
	cmd := f.preAuthOpCmd("capture ONLINE_API_REF_ID TOTAL", "Capture an OPEN pre-authorisation for TOTAL (tip included), on its terminal (no card needed)",
		`Capture an OPEN pre-authorisation for TOTAL, the final amount tip included (at
most the authorised amount plus the service's capture tolerance, 20 % by
default); --tip names the part of TOTAL that is tip. Once approved, the
pre-authorisation is CAPTURED and the rest released.

`+amountRule,
		"the total", "total", "capture", func(c *client.Client, typed *typedAmounts, ref string, n int64, reference string) (startFunc, error) {
			p := client.CaptureParams{OnlineAPIRefID: ref, Amount: n, ECRReference: reference}
			if tip != "" {
				var err error
				if p.TipAmount, err = typed.parse("/tipAmount", "--tip", tip); err != nil {
					return nil, err
				}
			}
			return func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Capture(ctx, p, opts...)
			}, nil
		})
	cmd.Flags().StringVar(&tip, "tip", "", "the part of TOTAL that is tip")
	return cmd
}

// preAuthOpCmd builds a command that starts an operation with an amount on
// the pre-authorisation ONLINE_API_REF_ID, on its terminal (increment,
// capture): the amount, the second argument (amountWhat; amountName in a
// problem), is in the pre-authorisation's currency; prepare makes the
// request from the reference, the amount and the --reference.
func (f *ecrFlags) preAuthOpCmd(use, short, long, amountWhat, amountName, op string,
	prepare func(c *client.Client, typed *typedAmounts, ref string, amount int64, reference string) (startFunc, error)) *cobra.Command {
	var tf txFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  args(2, 2, "the pre-authorisation's onlineAPIRefId and "+amountWhat),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			typed, n, err := preAuthAmount(ctx, c, a, amountName)
			if err != nil {
				return err
			}
			start, err := prepare(c, typed, a[0], n, tf.reference)
			if err != nil {
				return err
			}
			return startTransaction(cmd, f, &tf, c, ctx, op, typed, start)
		}),
	}
	tf.register(cmd, false)
	return cmd
}

func ecrVoidCmd(f *ecrFlags) *cobra.Command {
	return f.onRefCmd("void ONLINE_API_REF_ID", "Void (release) an OPEN pre-authorisation, on its terminal (no card needed)",
		"the pre-authorisation's onlineAPIRefId", "void", func(ctx context.Context, c *client.Client, ref, reference string, opts ...client.CallOption) (*client.Transaction, error) {
			return c.Void(ctx, client.VoidParams{OnlineAPIRefID: ref, ECRReference: reference}, opts...)
		})
}

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
	var tf txFlags
	cmd := &cobra.Command{
		Use:   "increment ONLINE_API_REF_ID AMOUNT",
		Short: "Raise an OPEN pre-authorisation by AMOUNT, on its terminal (no card needed)",
		Long:  "Raise an OPEN pre-authorisation by AMOUNT, in its currency, on its terminal (no card needed).\n\n" + amountRule,
		Args:  args(2, 2, "the pre-authorisation's onlineAPIRefId and the increase"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			typed, n, err := preAuthAmount(ctx, c, a, "amount")
			if err != nil {
				return err
			}
			p := client.IncrementParams{OnlineAPIRefID: a[0], Amount: n, ECRReference: tf.reference}
			return startTransaction(cmd, f, &tf, c, ctx, "increment", typed, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Increment(ctx, p, opts...)
			})
		}),
	}
	tf.register(cmd, false)
	return cmd
}

func ecrCaptureCmd(f *ecrFlags) *cobra.Command {
	var (
		tf  txFlags
		tip string
	)
	cmd := &cobra.Command{
		Use:   "capture ONLINE_API_REF_ID TOTAL",
		Short: "Capture an OPEN pre-authorisation for TOTAL (tip included), on its terminal (no card needed)",
		Long: `Capture an OPEN pre-authorisation for TOTAL, the final amount tip included (at
most the authorised amount plus the service's capture tolerance, 20 % by
default); --tip names the part of TOTAL that is tip. Once approved, the
pre-authorisation is CAPTURED and the rest released.

` + amountRule,
		Args: args(2, 2, "the pre-authorisation's onlineAPIRefId and the total"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			typed, n, err := preAuthAmount(ctx, c, a, "total")
			if err != nil {
				return err
			}
			p := client.CaptureParams{OnlineAPIRefID: a[0], Amount: n, ECRReference: tf.reference}
			if tip != "" {
				if p.TipAmount, err = typed.parse("/tipAmount", "--tip", tip); err != nil {
					return err
				}
			}
			return startTransaction(cmd, f, &tf, c, ctx, "capture", typed, func(ctx context.Context, opts ...client.CallOption) (*client.Transaction, error) {
				return c.Capture(ctx, p, opts...)
			})
		}),
	}
	tf.register(cmd, false)
	cmd.Flags().StringVar(&tip, "tip", "", "the part of TOTAL that is tip")
	return cmd
}

func ecrVoidCmd(f *ecrFlags) *cobra.Command {
	return f.onRefCmd("void ONLINE_API_REF_ID", "Void (release) an OPEN pre-authorisation, on its terminal (no card needed)",
		"the pre-authorisation's onlineAPIRefId", "void", func(ctx context.Context, c *client.Client, ref, reference string, opts ...client.CallOption) (*client.Transaction, error) {
			return c.Void(ctx, client.VoidParams{OnlineAPIRefID: ref, ECRReference: reference}, opts...)
		})
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

func ecrConfirmCmd(f *ecrFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "confirm ONLINE_API_REF_ID",
		Short: "Confirm an approved sale that asked for confirmation (purchase --confirm-within)",
		Long: `Confirm an APPROVED sale started with purchase --confirm-within: the sale stays
APPROVED and is not reversed at its deadline. Confirming again answers the
same. A sale that cannot be confirmed (it asked for no confirmation, is not
APPROVED, was reversed, or its deadline passed, when the service reverses it)
fails with 409 not-confirmable and the reason. list --unconfirmed shows the
sales still waiting.`,
		Example: `  instore ecr purchase 12.50 --confirm-within 2m --wait
  instore ecr confirm txn_01...
  instore ecr list --unconfirmed`,
		Args: args(1, 1, "an onlineAPIRefId"),
		RunE: f.run(func(ctx context.Context, cmd *cobra.Command, a []string, c *client.Client) error {
			tx, err := c.Confirm(ctx, a[0])
			if err != nil {
				return fail("confirm", err)
			}
			newOutput(cmd.OutOrStdout(), f.json, false).show(tx)
			return nil
		}),
	}
}

// confirmWithin turns --confirm-within into the purchase's
// confirmWithinSeconds: whole seconds (the service checks the range).
func confirmWithin(d time.Duration) (int, error) {
	if d == 0 {
		return 0, nil
	}
	if d < 0 || d%time.Second != 0 {
		return 0, usageError{fmt.Errorf("--confirm-within: %s is not a whole number of seconds such as 60s or 2m", d)}
	}
	return int(d / time.Second), nil
}

// confirmationRow says where a sale's confirmation stands, for txBlock.
func confirmationRow(tx *client.Transaction) string {
	cf := tx.Confirmation
	if cf == nil {
		return ""
	}
	s := string(cf.State)
	switch {
	case cf.State == instore.ConfirmConfirmed && cf.ConfirmedAt != nil:
		s += " at " + cf.ConfirmedAt.UTC().Format(time.RFC3339)
	case cf.State == instore.ConfirmPending && cf.Deadline != nil:
		s += ": confirm before " + cf.Deadline.UTC().Format(time.RFC3339) + " or it is reversed"
	case cf.State == instore.ConfirmPending:
		s += fmt.Sprintf(" (within %d s of the approval)", cf.WithinSeconds)
	}
	return s
}

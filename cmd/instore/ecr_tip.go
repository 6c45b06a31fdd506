package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore/client"
)

// tipFlags are the ways `ecr purchase` asks for a tip, at most one.
type tipFlags struct {
	prompt     string // --tip-prompt 10,15,20
	enterTotal bool   // --tip-enter-total
	fixed      string // --tip 1.50
}

func (t *tipFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&t.prompt, "tip-prompt", "", "the terminal offers these tip percentages (1-3 of 1-100, such as 10,15,20), another amount and no tip")
	fs.BoolVar(&t.enterTotal, "tip-enter-total", false, "the cardholder types the total to pay; the tip is the total less AMOUNT")
	fs.StringVar(&t.fixed, "tip", "", "a tip the till already knows (such as 1.50), charged on top of AMOUNT")
	cmd.MarkFlagsMutuallyExclusive("tip-prompt", "tip-enter-total", "tip")
}

// tip is the purchase's tip the flags ask for (nil: none); an amount typed
// with --tip is recorded in typed, for the service's words about it.
func (t *tipFlags) tip(typed *typedAmounts) (*client.Tip, error) {
	switch {
	case t.enterTotal:
		return client.TipEnterTotal(), nil
	case t.fixed != "":
		n, err := typed.parse("/tip/amount", "--tip", t.fixed)
		if err != nil {
			return nil, err
		}
		return client.TipFixed(n), nil
	case t.prompt != "":
		var pcts []int
		for _, s := range strings.Split(t.prompt, ",") {
			p, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(s), "%"))
			if err != nil {
				return nil, usageError{fmt.Errorf("--tip-prompt: %q is not a whole percentage; write them like 10,15,20", s)}
			}
			pcts = append(pcts, p)
		}
		return client.TipPrompt(pcts...), nil
	}
	return nil, nil
}

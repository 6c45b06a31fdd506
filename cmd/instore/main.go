// Command instore is the instore payment service: `serve` runs it,
// `demo` runs everything seeded with no setup, `admin` manages accounts
// and credentials, `version` prints the build.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks an error in how the command was called (exit code 2).
type usageError struct{ error }

// run is the whole program; main only exits with its code.
// Cancelling ctx (SIGINT, SIGTERM) shuts the service down gracefully.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		fmt.Fprintln(stderr, "instore:", err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
			return 2
		}
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			return ec.ExitCode()
		}
		return 1
	}
	return 0
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "instore",
		Short:         "Online In-Store Payment API: ECRs drive card terminals over HTTP/JSON",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `instore version` does.
		Version: versionString(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Without the -v shorthand cobra would add: `instore ecr -v` is verbose.
	root.Flags().Bool("version", false, "print the version, commit and build date")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(), newDemoCmd(), newAdminCmd(), newVersionCmd(), newTerminalCmd(), newEcrCmd(), newLoadtestCmd(), newHealthcheckCmd())
	markUsageErrors(root)
	return root
}

// markUsageErrors makes every wrong call of c and its subcommands a
// usageError (exit code 2), as unknown flags are by the root's flag error
// function: an unknown subcommand of a command group (cobra would print
// the group's help and exit 0, or exit 1 for the root), wrong positional
// arguments and a missing required flag (exit 1 from cobra).
func markUsageErrors(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		// A group: alone it prints its help; with an argument that is
		// none of its subcommands it is wrong usage.
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			hint := ""
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError{fmt.Errorf("unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)}
		}
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	} else if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	if c.Runnable() {
		// cobra checks required flags after PreRunE (bindEnv may set
		// them from the environment): so does this, and wraps the error.
		preE, pre := c.PreRunE, c.PreRun
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if preE != nil {
				if err := preE(cmd, args); err != nil {
					return err
				}
			} else if pre != nil {
				pre(cmd, args)
			}
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return usageError{err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

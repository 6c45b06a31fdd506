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
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "instore:", err)
		var ue usageError
		if errors.As(err, &ue) {
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
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(), newDemoCmd(), newAdminCmd(), newVersionCmd(), newTerminalCmd(), newEcrCmd(), newLoadtestCmd())
	return root
}

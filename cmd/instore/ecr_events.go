package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// eventFlags select events: `instore ecr events` and `webhook listen`
// (--types only).
type eventFlags struct {
	types           []string
	terminal, after string
}

func (e *eventFlags) query() (client.EventQuery, error) {
	q := client.EventQuery{TerminalID: e.terminal, After: e.after}
	for _, t := range e.types {
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				q.Types = append(q.Types, instore.EventType(s))
			}
		}
	}
	if err := checkEventTypes("--types", q.Types); err != nil {
		return q, err
	}
	if q.After != "" {
		if _, ok := instore.ParseEventID(q.After); !ok {
			return q, usageError{fmt.Errorf("--after: %q is not an event id (evt_ and its digits, or its number)", q.After)}
		}
	}
	return q, nil
}

// checkEventTypes refuses a type the service does not know, before a
// request: a usage error, not a 400.
func checkEventTypes(flag string, types []instore.EventType) error {
	for _, t := range types {
		known := false
		for _, k := range instore.EventTypes {
			known = known || k == t
		}
		if !known {
			return usageError{fmt.Errorf("%s: %q is not an event type: %s", flag, t, instore.EventTypeList())}
		}
	}
	return nil
}

// followContext is the context of a command that runs until it is
// interrupted: --timeout bounds it only when given.
func (f *ecrFlags) followContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	if !cmd.Flags().Changed("timeout") {
		return context.WithCancel(cmd.Context())
	}
	return f.context(cmd)
}

// endedByUser reports whether err is the end of a command that runs until
// it is interrupted or its --timeout: a normal end.
func endedByUser(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTimeout))
}

func ecrEventsCmd(f *ecrFlags) *cobra.Command {
	var (
		ef     eventFlags
		follow bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the merchant's events (transactions, terminals, prints); --follow receives them as they happen",
		Long: `Show the merchant's events, oldest first, one line per event: its id, when, its
type and what it is about. --json prints each event as the API shows it, one
object per line.

Without --follow it shows every event after --after (from the oldest kept, 30
days, without it), page by page, and ends with the cursor to pass as --after
next time. With --follow it receives the events as they happen over the
server-sent event stream (from --after when given, else from now on),
reconnecting on its own after a break without losing or repeating one, until
it is interrupted (Ctrl-C) or --timeout, when given, passes.`,
		Example: `  instore ecr events --types transaction.final --terminal 10000001
  instore ecr events --follow
  instore ecr events --follow --after evt_0000000000000042 --json`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := ef.query()
			if err != nil {
				return err
			}
			c, err := f.client(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if follow {
				ctx, cancel := f.followContext(cmd)
				defer cancel()
				for ev, err := range c.FollowEvents(ctx, q) {
					if err != nil {
						if endedByUser(ctx, err) {
							return nil
						}
						return fail("events", err)
					}
					if err := printEvent(w, ev, f.json); err != nil {
						return err
					}
				}
				return nil
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			q.Limit = limit
			n := 0
			for {
				page, err := c.Events(ctx, q)
				if err != nil {
					return fail("events", err)
				}
				for _, ev := range page.Events {
					if err := printEvent(w, ev, f.json); err != nil {
						return err
					}
				}
				n += len(page.Events)
				if len(page.Events) == 0 || page.NextCursor == "" {
					break
				}
				q.After = page.NextCursor
			}
			if !f.json {
				if n == 0 {
					fmt.Fprintln(w, "no events")
				}
				if q.After != "" {
					fmt.Fprintf(w, "next: --after %s\n", q.After)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&follow, "follow", "f", false, "receive the events as they happen, until interrupted")
	fs.StringSliceVar(&ef.types, "types", nil, "only these event types, comma-separated ("+instore.EventTypeList()+")")
	fs.StringVar(&ef.terminal, "terminal", "", "only the events of this terminal ID")
	fs.StringVar(&ef.after, "after", "", "only the events after this event id (a cursor)")
	fs.IntVar(&limit, "limit", 0, "page size, 1-500 (default 100); without --follow")
	return cmd
}

// printEvent shows an event: its JSON as the API sent it, or one line for
// a person.
func printEvent(w io.Writer, ev client.Event, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, ev)
	}
	_, err := fmt.Fprintf(w, "%s  %s  %-24s  %s\n", ev.ID, ev.CreatedAt, ev.Type, eventSubject(ev))
	return err
}

// eventSubject says what an event is about: a transaction, a terminal, a
// print job.
func eventSubject(ev client.Event) string {
	switch {
	case strings.HasPrefix(string(ev.Type), "transaction."):
		tx, err := ev.Transaction()
		if err != nil {
			return "(" + err.Error() + ")"
		}
		s := fmt.Sprintf("%s  %s  %s", tx.OnlineAPIRefID, txSummary(tx), tx.Status)
		if tx.Final() {
			if code := string(tx.ErrorCode); code != "" {
				s += " " + code
			}
		} else {
			s += " (" + stageLabel(tx.Progress) + ")"
		}
		return s
	case strings.HasPrefix(string(ev.Type), "terminal."):
		t, err := ev.Terminal()
		if err != nil {
			return "(" + err.Error() + ")"
		}
		online := "offline"
		if t.Online {
			online = "online"
		}
		linked := "unlinked"
		if t.Linked {
			linked = "linked"
		}
		return fmt.Sprintf("terminal %s  %s, %s", t.TerminalID, linked, online)
	case strings.HasPrefix(string(ev.Type), "print."):
		j, err := ev.PrintJob()
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return fmt.Sprintf("%s  print job on terminal %s  %s", j.PrintID, j.TerminalID, j.Status)
	}
	var m map[string]json.RawMessage
	if ev.Decode(&m) == nil {
		return fmt.Sprintf("(%d members)", len(m))
	}
	return ""
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// envWebhookSecret is where `webhook listen` finds its secret when
// --secret is not given.
const envWebhookSecret = "INSTORE_WEBHOOK_SECRET"

func ecrWebhookCmd(f *ecrFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Manage webhook endpoints, and receive webhooks locally (listen)",
		Long: `Manage the merchant's webhook endpoints (list, create, rotate, delete, their
deliveries, retry one), and run a local receiver for the sandbox (listen) that
verifies and prints every delivery.`,
		Example: `  instore ecr webhook listen --register
  instore ecr webhook create https://example.com/hook --types transaction.final
  instore ecr webhook create https://example.com/hook --concurrency 8
  instore ecr webhook deliveries wh_...
  instore ecr webhook retry wh_... dlv_42`,
	}
	cmd.AddCommand(ecrWebhookListenCmd(f), ecrWebhookCreateCmd(f), ecrWebhookDeliveriesCmd(f))
	cmd.AddCommand(f.requestCmds(ecrWebhookRequests...)...)
	return cmd
}

// ecrWebhookRequests are the webhook commands of one request.
var ecrWebhookRequests = []request{
	{"list", "List the merchant's webhook endpoints", args(0, 0, "no arguments"), "webhook list",
		func(ctx context.Context, _ []string, c *client.Client) (any, func(io.Writer), error) {
			ws, err := c.Webhooks(ctx)
			return map[string]any{"webhooks": ws}, func(w io.Writer) { printWebhooks(w, ws) }, err
		}},
	{"rotate WEBHOOK_ID", "Give an endpoint a new secret (the old one signs beside it for 24 hours); prints it", args(1, 1, "a webhookId"), "webhook rotate",
		answer(func(ctx context.Context, a []string, c *client.Client) (*client.Webhook, error) {
			return c.RotateWebhookSecret(ctx, a[0])
		}, withSecret)},
	{"delete WEBHOOK_ID", "Delete an endpoint; what it is still owed is not sent", args(1, 1, "a webhookId"), "webhook delete",
		func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
			return nil, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", a[0]) }, c.DeleteWebhook(ctx, a[0])
		}},
	{"retry WEBHOOK_ID DELIVERY_ID", "Send a delivery again now", args(2, 2, "a webhookId and a deliveryId"), "webhook retry",
		answer(func(ctx context.Context, a []string, c *client.Client) (*client.WebhookDelivery, error) {
			return c.RetryWebhookDelivery(ctx, a[0], a[1])
		}, deliveryTable)},
}

// deliveryTable prints d for people.
func deliveryTable(d *client.WebhookDelivery) func(io.Writer) {
	return func(w io.Writer) { printDeliveries(w, &client.DeliveryPage{Deliveries: []*client.WebhookDelivery{d}}) }
}

func ecrWebhookListenCmd(f *ecrFlags) *cobra.Command {
	var (
		listen, secret, publicURL, description string
		register                               bool
		ef                                     eventFlags
	)
	cmd := &cobra.Command{
		Use:   "listen",
		Short: "Receive webhooks locally: verify each delivery's signature and print its event",
		Long: `Run a local webhook receiver for the sandbox. Each delivery is verified with
the endpoint's secret (the Standard Webhooks signature and timestamp, as
client.VerifyWebhook checks them) and its event printed, one line per event
(--json: the event as received); it is answered 204. A delivery that does not
verify is answered 400 and a warning printed on stderr. A delivery that comes
again (a retry) is answered 204 and not printed twice.

With --register the receiver registers itself as an endpoint of the merchant
(its URL, or --public-url), prints the endpoint's secret on stderr, and
deletes the endpoint when it ends (Ctrl-C, or --timeout when given). Without
--register give the secret of an endpoint registered already (--secret or
INSTORE_WEBHOOK_SECRET).

The service delivers to loopback and private addresses only when its operator
allows it (--webhook-allow-private; on with --sandbox and in the demo).`,
		Example: `  instore ecr webhook listen --register
  instore ecr webhook listen --listen 127.0.0.1:9000 --secret whsec_...`,
		Args: args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := ef.query()
			if err != nil {
				return err
			}
			if secret, err = envOr(secret, envWebhookSecret); err != nil {
				return err
			}
			if register == (secret != "") {
				return usageError{errors.New("give --register (a new endpoint and its secret), or the --secret of an endpoint registered already, not both")}
			}
			if !register && (publicURL != "" || len(q.Types) > 0 || description != "") {
				return usageError{errors.New("--public-url, --types and --description are for --register")}
			}
			var c *client.Client
			if register {
				if c, err = f.client(cmd); err != nil {
					return err
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return exitError{exitFailed, fmt.Errorf("listen: %w", err)}
			}
			url := "http://" + ln.Addr().String() + "/"
			rcv := &receiver{w: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), json: f.json, seen: map[string]bool{}}
			srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			defer srv.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "instore: listening on %s\n", url)

			ctx, cancel := f.followContext(cmd)
			defer cancel()
			if register {
				if publicURL != "" {
					url = publicURL
				}
				if description == "" {
					description = "instore ecr webhook listen"
				}
				wh, err := c.CreateWebhook(ctx, client.WebhookParams{URL: url, EventTypes: q.Types, Description: description})
				if err != nil {
					return fail("register", err)
				}
				defer func() {
					// The command's context has ended: delete with one of
					// its own.
					dctx, dcancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
					defer dcancel()
					if err := c.DeleteWebhook(dctx, wh.WebhookID); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "instore: warning: endpoint %s not deleted: %v\n", wh.WebhookID, err)
						return
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "instore: endpoint %s deleted\n", wh.WebhookID)
				}()
				rcv.setSecret(wh.Secret)
				fmt.Fprintf(cmd.ErrOrStderr(), "instore: registered endpoint %s for %s; its secret: %s\n", wh.WebhookID, url, wh.Secret)
			} else {
				rcv.setSecret(secret)
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-served:
				return exitError{exitFailed, fmt.Errorf("serve: %w", err)}
			}
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on (port 0: a free one, printed)")
	fs.StringVar(&secret, "secret", "", "the endpoint's signing secret, whsec_... (env "+envWebhookSecret+"); secret")
	fs.BoolVar(&register, "register", false, "register this receiver as an endpoint, and delete it at the end")
	fs.StringVar(&publicURL, "public-url", "", "with --register: the URL to register, when the service reaches this receiver by another name")
	fs.StringSliceVar(&ef.types, "types", nil, "with --register: only these event types, comma-separated (default: all)")
	fs.StringVar(&description, "description", "", "with --register: the endpoint's description")
	return cmd
}

// receiver verifies and prints webhook deliveries.
type receiver struct {
	w, errw io.Writer
	json    bool

	mu     sync.Mutex
	secret string
	seen   map[string]bool
}

func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	r.secret = s
	r.mu.Unlock()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "deliveries are POSTs", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 8<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secret == "" {
		// Registering: the secret is not known yet. The service retries.
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	ev, err := client.VerifyWebhook(r.secret, req.Header, body)
	if err != nil {
		fmt.Fprintf(r.errw, "instore: warning: refused a delivery (webhook-id %q) from %s: %v\n", req.Header.Get(client.HeaderWebhookID), req.RemoteAddr, err)
		http.Error(w, "the signature does not verify", http.StatusBadRequest)
		return
	}
	if !r.seen[ev.ID] {
		r.seen[ev.ID] = true
		printEvent(r.w, *ev, r.json)
	}
	w.WriteHeader(http.StatusNoContent)
}

func ecrWebhookCreateCmd(f *ecrFlags) *cobra.Command {
	var (
		types       []string
		description string
		concurrency int
	)
	cmd := &cobra.Command{
		Use:   "create URL",
		Short: "Register a webhook endpoint; prints its secret, shown this once",
		Long: `Register a webhook endpoint and print it with its secret, shown this once.

--concurrency is how many deliveries of the endpoint may be in flight at once,
1 to 16 (the service checks; not given: the service's default, 1). With 1 they
go one at a time, in order per endpoint. With 2 to 16 up to that many go at
once and the order is kept per terminal: the events of one terminal one after
another, different terminals' in any order relative to each other, events
without a terminal in order among themselves. A failed delivery still holds
the endpoint's later deliveries until it succeeds or is given up.`,
		Args: args(1, 1, "the endpoint's URL"),
		RunE: func(cmd *cobra.Command, a []string) error {
			q, err := (&eventFlags{types: types}).query()
			if err != nil {
				return err
			}
			return f.call("webhook create", func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
				w, err := c.CreateWebhook(ctx, client.WebhookParams{URL: a[0], EventTypes: q.Types, Description: description, Concurrency: concurrency})
				return w, withSecret(w), err
			})(cmd, a)
		},
	}
	cmd.Flags().StringSliceVar(&types, "types", nil, "only these event types, comma-separated (default: all)")
	cmd.Flags().StringVar(&description, "description", "", "free text, at most 200 characters")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "deliveries in flight at once, 1-16: 1 in order per endpoint, 2-16 in order per terminal (0: not sent, the service's default 1)")
	return cmd
}

func ecrWebhookDeliveriesCmd(f *ecrFlags) *cobra.Command {
	var p paging
	cmd := &cobra.Command{
		Use:   "deliveries WEBHOOK_ID",
		Short: "List an endpoint's deliveries, newest first, with their attempts",
		Long: `List an endpoint's deliveries, newest first: each event owed to it, its status
(pending, succeeded, failed: given up), its attempts and the last answer. --json
prints the page as the API answers it.`,
		Args: args(1, 1, "a webhookId"),
		RunE: f.call("webhook deliveries", func(ctx context.Context, a []string, c *client.Client) (any, func(io.Writer), error) {
			q := client.DeliveryQuery{Cursor: p.cursor, Limit: p.limit}
			page := &client.DeliveryPage{Deliveries: []*client.WebhookDelivery{}}
			var err error
			if p.all {
				for d, derr := range c.AllWebhookDeliveries(ctx, a[0], q) {
					if derr != nil {
						return nil, nil, derr
					}
					page.Deliveries = append(page.Deliveries, d)
				}
			} else if page, err = c.WebhookDeliveries(ctx, a[0], q); err != nil {
				return nil, nil, err
			}
			var next *string
			if page.NextCursor != "" {
				next = &page.NextCursor
			}
			return struct {
				Deliveries []*client.WebhookDelivery `json:"deliveries"`
				NextCursor *string                   `json:"nextCursor"`
			}{page.Deliveries, next}, func(w io.Writer) { printDeliveries(w, page) }, nil
		}),
	}
	p.add(cmd.Flags(), "1-100 (default 50)")
	return cmd
}

// withSecret prints for people an endpoint answered with its secret
// (creation, rotation).
func withSecret(wh *client.Webhook) func(io.Writer) {
	return func(w io.Writer) {
		printWebhooks(w, []*client.Webhook{wh})
		if wh.Secret != "" {
			fmt.Fprintf(w, "secret: %s\n(shown this once: store it where the receiver reads it)\n", wh.Secret)
		}
	}
}

func printWebhooks(w io.Writer, ws []*client.Webhook) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WEBHOOK ID\tSTATUS\tURL\tEVENT TYPES\tCONCURRENCY\tDESCRIPTION")
	for _, wh := range ws {
		types := instore.JoinEventTypes(wh.EventTypes, ",")
		if types == "" {
			types = "all"
		}
		status := string(wh.Status)
		if wh.DisabledReason != "" {
			status += " (" + wh.DisabledReason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", wh.WebhookID, status, wh.URL, types, wh.Concurrency, wh.Description)
	}
	tw.Flush()
	if len(ws) == 0 {
		fmt.Fprintln(w, "no webhook endpoints")
	}
}

func printDeliveries(w io.Writer, page *client.DeliveryPage) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY ID\tEVENT ID\tTYPE\tSTATUS\tATTEMPTS\tLAST ANSWER\tNEXT ATTEMPT")
	for _, d := range page.Deliveries {
		last, next := "-", "-"
		if n := len(d.Attempts); n > 0 {
			a := d.Attempts[n-1]
			last = fmt.Sprint(a.StatusCode)
			if a.Error != "" {
				last += " " + a.Error
			}
		}
		if d.NextAttemptAt != nil {
			next = d.NextAttemptAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.DeliveryID, d.EventID, d.EventType, d.Status, len(d.Attempts), last, next)
	}
	tw.Flush()
	if len(page.Deliveries) == 0 {
		fmt.Fprintln(w, "no deliveries")
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
	}
}

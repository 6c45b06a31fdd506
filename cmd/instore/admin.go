package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/server"
)

// adminFlags select the store the admin commands work on.
type adminFlags struct {
	data, databaseURL string
	json              bool
}

func (a *adminFlags) open(ctx context.Context) (instore.Store, *admin.Admin, error) {
	if a.data == "" && a.databaseURL == "" {
		return nil, nil, usageError{errors.New("no store: set --data DIR or --database-url (or INSTORE_DATA / INSTORE_DATABASE_URL)")}
	}
	st, err := server.OpenStore(ctx, server.Config{DataDir: a.data, DatabaseURL: a.databaseURL})
	if err != nil {
		return nil, nil, err
	}
	return st, admin.New(st), nil
}

// print prints a command's result v: as JSON with --json, for a person
// otherwise.
func (a *adminFlags) print(cmd *cobra.Command, v any) error {
	w := cmd.OutOrStdout()
	if a.json {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	printHuman(w, v)
	return nil
}

func newAdminCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage customers, merchants, API clients, subscription keys, devices, terminal IDs and packages; back up and restore a SQLite store (talks to the store directly)",
		Long: `Manage accounts and credentials. Secrets (client secrets, subscription keys) are
shown once, at creation, and stored only as SHA-256 digests.`,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return bindEnv(cmd) },
	}
	cmd.PersistentFlags().StringVar(&af.data, "data", "", "data directory holding the SQLite database")
	cmd.PersistentFlags().StringVar(&af.databaseURL, "database-url", "", "PostgreSQL URL instead of SQLite; secret")
	cmd.PersistentFlags().BoolVar(&af.json, "json", false, "print JSON")

	// do runs fn with an open store and prints its result.
	do := func(fn func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			st, ad, err := af.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			v, err := fn(cmd.Context(), ad, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return af.print(cmd, v)
		}
	}

	var name, customer, merchant, surface string
	var inactive bool

	customerCmd := &cobra.Command{Use: "customer", Short: "Customers (own terminals; merchants belong to one)"}
	cc := &cobra.Command{Use: "create", Short: "Create a customer", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.CreateCustomer(ctx, name)
		})}
	cc.Flags().StringVar(&name, "name", "", "customer name (required)")
	cc.MarkFlagRequired("name")
	cl := &cobra.Command{Use: "list", Short: "List customers", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.Store.Customers(ctx)
		})}
	customerCmd.AddCommand(cc, cl)

	merchantCmd := &cobra.Command{Use: "merchant", Short: "Merchants (Online API accounts)"}
	mc := &cobra.Command{Use: "create", Short: "Create a merchant of a customer", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.CreateMerchant(ctx, customer, name, !inactive)
		})}
	mc.Flags().StringVar(&customer, "customer", "", "customer id (required)")
	mc.Flags().StringVar(&name, "name", "", "merchant name (required)")
	mc.Flags().BoolVar(&inactive, "inactive", false, "create it inactive (every operation but metadata and token answers WP03)")
	mc.MarkFlagRequired("customer")
	mc.MarkFlagRequired("name")
	ml := &cobra.Command{Use: "list", Short: "List merchants", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.Store.Merchants(ctx, customer)
		})}
	ml.Flags().StringVar(&customer, "customer", "", "only this customer's merchants")
	setActive := func(active bool) func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
		return func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			if err := ad.SetMerchantActive(ctx, merchant, active); err != nil {
				return nil, err
			}
			return ad.Store.Merchant(ctx, merchant)
		}
	}
	ma := &cobra.Command{Use: "activate MERCHANT_ID", Short: "Activate a merchant", Args: cobra.ExactArgs(1),
		PreRun: func(cmd *cobra.Command, args []string) { merchant = args[0] }, RunE: do(setActive(true))}
	md := &cobra.Command{Use: "deactivate MERCHANT_ID", Short: "Deactivate a merchant (WP03 on every operation but metadata and token)", Args: cobra.ExactArgs(1),
		PreRun: func(cmd *cobra.Command, args []string) { merchant = args[0] }, RunE: do(setActive(false))}
	merchantCmd.AddCommand(mc, ml, ma, md)

	// owner picks the owner id of a credential from --merchant or --customer.
	owner := func() (instore.Surface, string, error) {
		s := instore.Surface(surface)
		switch {
		case s == instore.SurfaceOnline && merchant != "" && customer == "":
			return s, merchant, nil
		case s == instore.SurfaceAccess && customer != "" && merchant == "":
			return s, customer, nil
		}
		return "", "", usageError{errors.New("give --surface online with --merchant ID, or --surface access with --customer ID")}
	}
	type created struct {
		*instore.APIClient
		ClientSecret string `json:"clientSecret"`
	}
	type createdKey struct {
		*instore.SubscriptionKey
		Key string `json:"subscriptionKey"`
	}
	// createCredential is the create subcommand of a credential, which
	// belongs to the owner --surface, --merchant and --customer name.
	createCredential := func(short string, create func(ctx context.Context, ad *admin.Admin, s instore.Surface, owner string) (any, error)) *cobra.Command {
		c := &cobra.Command{Use: "create", Short: short, Args: cobra.NoArgs,
			RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
				s, id, err := owner()
				if err != nil {
					return nil, err
				}
				return create(ctx, ad, s, id)
			})}
		c.Flags().StringVar(&surface, "surface", "online", "online (belongs to a merchant) or access (belongs to a customer)")
		c.Flags().StringVar(&merchant, "merchant", "", "merchant id (online)")
		c.Flags().StringVar(&customer, "customer", "", "customer id (access)")
		return c
	}
	// listOfCustomer is the list subcommand of a customer's credentials.
	listOfCustomer := func(short string, list func(context.Context, instore.Store) (any, error)) *cobra.Command {
		c := &cobra.Command{Use: "list", Short: short, Args: cobra.NoArgs,
			RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
				return list(ctx, ad.Store)
			})}
		c.Flags().StringVar(&customer, "customer", "", "customer id (required)")
		c.MarkFlagRequired("customer")
		return c
	}
	// revokeCredential is the revoke subcommand of a credential: revoke
	// revokes the one of its argument and returns what to show.
	revokeCredential := func(use, short string, revoke func(ctx context.Context, ad *admin.Admin, id string) (any, error)) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
					return revoke(ctx, ad, args[0])
				})(cmd, args)
			}}
	}

	clientCmd := &cobra.Command{Use: "client", Short: "API clients (OAuth 2.0 client credentials)"}
	clc := createCredential("Create an API client; prints its secret once", func(ctx context.Context, ad *admin.Admin, s instore.Surface, owner string) (any, error) {
		c, secret, err := ad.CreateClient(ctx, s, owner, name)
		if err != nil {
			return nil, err
		}
		return created{c, secret}, nil
	})
	clc.Flags().StringVar(&name, "name", "", "a name for the client")
	cll := listOfCustomer("List API clients of a customer", func(ctx context.Context, st instore.Store) (any, error) {
		return st.APIClients(ctx, customer)
	})
	clr := revokeCredential("revoke CLIENT_ID", "Revoke an API client: its tokens stop working", func(ctx context.Context, ad *admin.Admin, id string) (any, error) {
		if err := ad.RevokeClient(ctx, id); err != nil {
			return nil, err
		}
		return ad.Store.APIClient(ctx, id)
	})
	clientCmd.AddCommand(clc, cll, clr)

	keyCmd := &cobra.Command{Use: "key", Short: "Subscription keys (Ocp-Apim-Subscription-Key)"}
	kc := createCredential("Create a subscription key; prints it once", func(ctx context.Context, ad *admin.Admin, s instore.Surface, owner string) (any, error) {
		k, secret, err := ad.CreateKey(ctx, s, owner)
		if err != nil {
			return nil, err
		}
		return createdKey{k, secret}, nil
	})
	kl := listOfCustomer("List subscription keys of a customer (prefixes only)", func(ctx context.Context, st instore.Store) (any, error) {
		return st.SubscriptionKeys(ctx, customer)
	})
	kr := revokeCredential("revoke KEY_ID", "Revoke a subscription key", func(ctx context.Context, ad *admin.Admin, id string) (any, error) {
		return nil, ad.RevokeKey(ctx, id)
	})
	keyCmd.AddCommand(kc, kl, kr)

	var serial, model string
	var count int
	deviceCmd := &cobra.Command{Use: "device", Short: "Terminal devices (authenticated on the gateway by serial number and secret)"}
	dc := &cobra.Command{Use: "add", Short: "Provision a device; prints its secret once", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			d, secret, err := ad.CreateDevice(ctx, serial, model, customer)
			if err != nil {
				return nil, err
			}
			return struct {
				*instore.Device
				Secret string `json:"deviceSecret"`
			}{d, secret}, nil
		})}
	dc.Flags().StringVar(&serial, "serial", "", "serial number (required)")
	dc.Flags().StringVar(&model, "model", instore.ModelCountertop, "model: countertop, mobile or pinpad")
	dc.Flags().StringVar(&customer, "customer", "", "customer id (default: the customer of the first terminal ID it is linked to)")
	dc.MarkFlagRequired("serial")
	dl := &cobra.Command{Use: "list", Short: "List devices", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.Store.Devices(ctx, customer)
		})}
	dl.Flags().StringVar(&customer, "customer", "", "only this customer's devices")
	deviceCmd.AddCommand(dc, dl)

	terminalCmd := &cobra.Command{Use: "terminal", Short: "Terminal IDs (8 digits, allocated to a merchant)"}
	ta := &cobra.Command{Use: "add", Short: "Allocate terminal IDs to a merchant", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.AllocateTerminals(ctx, merchant, count)
		})}
	ta.Flags().StringVar(&merchant, "merchant", "", "merchant id (required)")
	ta.Flags().IntVar(&count, "count", 1, "how many (1-1000)")
	ta.MarkFlagRequired("merchant")
	tl := &cobra.Command{Use: "list", Short: "List a merchant's terminal IDs", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.Store.Terminals(ctx, merchant)
		})}
	tl.Flags().StringVar(&merchant, "merchant", "", "merchant id (required)")
	tl.MarkFlagRequired("merchant")
	terminalCmd.AddCommand(ta, tl)

	packagesCmd := &cobra.Command{Use: "packages", Short: "The software package catalogue (Access API: packages and updates)"}
	pi := &cobra.Command{Use: "import FILE", Short: "Import a package catalogue (JSON; see docs/access-api.md); - reads standard input",
		Long: `Import a package catalogue: a JSON object {"packages": [...]}, each package with
packageId, model, name, version, sizeBytes, sha256, releasedAt, and optionally
mandatory and customerId. Every package is checked before any is stored; then all
are stored or none. A package imported before is skipped when unchanged and
refused when changed: packages are immutable, a new release takes a new packageId.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
				in := cmd.InOrStdin()
				if args[0] != "-" {
					f, err := os.Open(args[0])
					if err != nil {
						return nil, err
					}
					defer f.Close()
					in = f
				}
				return ad.ImportPackages(ctx, in)
			})(cmd, args)
		}}
	pl := &cobra.Command{Use: "list", Short: "List a model's packages a customer may install, newest first", Args: cobra.NoArgs,
		RunE: do(func(ctx context.Context, ad *admin.Admin, w io.Writer) (any, error) {
			return ad.Store.Packages(ctx, customer, model)
		})}
	pl.Flags().StringVar(&model, "model", "", "model: countertop, mobile or pinpad (required)")
	pl.Flags().StringVar(&customer, "customer", "", "customer id (default: only the packages for every customer)")
	pl.MarkFlagRequired("model")
	packagesCmd.AddCommand(pi, pl)

	var fingerprintKey string
	fp := &cobra.Command{Use: "fingerprint VALUE", Short: "Print the fingerprint the logs show in place of an identifier (a terminal ID, a merchant id), to find its lines",
		Long: `Print the fingerprint ("fp:" and 10 hex digits) that the service's log lines
show in place of VALUE: a terminal ID, a merchant id, a serial number. It is
computed with the key "instore serve" keeps in the store (or the one given by
--log-fingerprint-key, as serve was), so grep the logs for it:

  grep "$(instore admin fingerprint --data DIR 12345678)" instore.log`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ad *admin.Admin
			if fingerprintKey == "" {
				st, a, err := af.open(cmd.Context())
				if err != nil {
					return err
				}
				defer st.Close()
				ad = a
			} else {
				ad = admin.New(nil)
			}
			fp, err := ad.Fingerprint(cmd.Context(), args[0], []byte(fingerprintKey))
			if errors.Is(err, admin.ErrNothingToFingerprint) {
				return usageError{err}
			} else if err != nil {
				return err
			}
			if af.json {
				b, _ := json.Marshal(map[string]string{"fingerprint": fp})
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), fp)
			return nil
		}}
	fp.Flags().StringVar(&fingerprintKey, "log-fingerprint-key", "", "the key serve was given by --log-fingerprint-key, if it was (default: the key kept in the store); secret")

	cmd.AddCommand(customerCmd, merchantCmd, clientCmd, keyCmd, deviceCmd, terminalCmd, packagesCmd, fp)
	cmd.AddCommand(newBackupCmds(&af)...)
	return cmd
}

// printHuman prints a result as aligned "field  value" lines, through its
// JSON form so every type prints the same way and in its field order.
func printHuman(w io.Writer, v any) {
	if v == nil {
		fmt.Fprintln(w, "done")
		return
	}
	b, _ := json.Marshal(v)
	var list []json.RawMessage
	if json.Unmarshal(b, &list) != nil {
		list = []json.RawMessage{b}
	} else if len(list) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	for i, obj := range list {
		if i > 0 {
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		dec := json.NewDecoder(bytes.NewReader(obj))
		// Numbers as written (50331648), not as float64 (5.0331648e+07).
		dec.UseNumber()
		dec.Token() // {
		for dec.More() {
			k, _ := dec.Token()
			var val any
			dec.Decode(&val)
			if val == nil {
				val = "-"
			}
			fmt.Fprintf(tw, "%v\t%v\n", k, val)
		}
		tw.Flush()
	}
}

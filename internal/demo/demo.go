// Package demo runs the whole service with no configuration: SQLite in a
// data directory (or a PostgreSQL database), a seeded customer and merchant
// with credentials, virtual terminals and the console.
package demo

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
)

// CredentialsFile keeps the demo's own credentials in clear in its data
// directory so that a restart prints the same ones. Production never does
// this: there secrets exist only as digests.
const CredentialsFile = "demo-credentials.json"

// CredentialsSetting keeps them, as CredentialsFile does, in the store
// when the demo runs on PostgreSQL, which has no data directory.
const CredentialsSetting = "demo_credentials"

// packagesJSON is the demo's package catalogue (Access API): for each of
// the three models a mandatory 1.0.0, which the virtual terminals run, and
// two newer optional releases to install.
//
//go:embed packages.json
var packagesJSON []byte

// TokenTTL is the lifetime of the ready-made tokens the demo prints.
const TokenTTL = 24 * time.Hour

// Credentials are the demo's seeded accounts and secrets.
type Credentials struct {
	CustomerID            string    `json:"customerId"`
	MerchantID            string    `json:"merchantId"`
	ClientID              string    `json:"clientId"`
	ClientSecret          string    `json:"clientSecret"`
	SubscriptionKey       string    `json:"subscriptionKey"`
	AccessToken           string    `json:"accessToken"`
	AccessTokenExpires    time.Time `json:"accessTokenExpiresAt"`
	AccessClientID        string    `json:"accessClientId"`
	AccessClientSecret    string    `json:"accessClientSecret"`
	AccessSubscriptionKey string    `json:"accessSubscriptionKey"`
	AccessAccessToken     string    `json:"accessAccessToken"`
	AccessTokenExpires2   time.Time `json:"accessAccessTokenExpiresAt"`
	// Terminals are the merchant's terminal IDs linked to the virtual
	// devices, one per model in order: countertop, mobile, PIN pad.
	Terminals []Terminal `json:"terminals"`
}

// Terminal is one of the demo's terminals as printed.
type Terminal struct {
	TerminalID   string `json:"terminalId"`
	SerialNumber string `json:"serialNumber"`
	Model        string `json:"model"`
}

// Currency is the currency the demo's --env and --json suggest for
// transactions (the sandbox takes any ISO 4217 code).
const Currency = "SEK"

// Info is the object `instore demo --json` prints, field for field: all
// that --env prints as export lines and the banner shows (docs/sandbox.md
// lists the keys).
type Info struct {
	OnlineAPIBaseURL      string     `json:"onlineApiBaseUrl"`
	AccessAPIBaseURL      string     `json:"accessApiBaseUrl"`
	TerminalGatewayURL    string     `json:"terminalGatewayUrl"`
	ConsoleURL            string     `json:"consoleUrl"`
	OpsURL                string     `json:"opsUrl"`
	SubscriptionKey       string     `json:"subscriptionKey"`
	AccessToken           string     `json:"accessToken"`
	ClientID              string     `json:"clientId"`
	ClientSecret          string     `json:"clientSecret"`
	AccessSubscriptionKey string     `json:"accessSubscriptionKey"`
	AccessAccessToken     string     `json:"accessAccessToken"`
	AccessClientID        string     `json:"accessClientId"`
	AccessClientSecret    string     `json:"accessClientSecret"`
	CustomerID            string     `json:"customerId"`
	MerchantID            string     `json:"merchantId"`
	Currency              string     `json:"currency"`
	Terminals             []Terminal `json:"terminals"`
	// DataDir is the SQLite data directory, "" on PostgreSQL.
	DataDir string `json:"dataDir"`
}

// Demo is a running demo.
type Demo struct {
	Server      *server.Server
	Credentials *Credentials
	// DataDir is the SQLite data directory, "" on PostgreSQL.
	DataDir string
	tempDir bool
}

// Start seeds (first start) or loads (later starts) the demo in the
// PostgreSQL database cfg.DatabaseURL when it is set, else in SQLite in
// cfg.DataDir, or in a new temporary directory when that is empty too,
// starts every listener and returns once every virtual terminal is ready
// for a command (server.WaitSandboxReady; an error after ReadyTimeout).
func Start(ctx context.Context, cfg server.Config) (*Demo, error) {
	d := &Demo{}
	if cfg.DatabaseURL == "" {
		d.DataDir = cfg.DataDir
		if d.DataDir == "" {
			dir, err := os.MkdirTemp("", "instore-demo-")
			if err != nil {
				return nil, err
			}
			d.DataDir, d.tempDir = dir, true
		}
	}
	cfg.DataDir, cfg.Sandbox = d.DataDir, true
	srv, err := server.New(ctx, cfg)
	if err != nil {
		d.cleanup()
		return nil, err
	}
	d.Server = srv
	if d.Credentials, err = d.seed(ctx); err != nil {
		srv.Close()
		d.cleanup()
		return nil, fmt.Errorf("demo: %w", err)
	}
	srv.SetConsoleCredentials(d.Credentials.SubscriptionKey, d.Credentials.AccessToken)
	if err := srv.Start(); err != nil {
		d.cleanup()
		return nil, err
	}
	// Ready when it says so: a purchase sent as soon as Start returns (and
	// the demo prints its credentials) finds its terminal ready.
	rctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := srv.WaitSandboxReady(rctx); err != nil {
		srv.Close()
		d.cleanup()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("demo: the virtual terminals were not ready within %s", ReadyTimeout)
	}
	return d, nil
}

// ReadyTimeout bounds how long Start waits for the virtual terminals to
// be ready before it gives up.
const ReadyTimeout = time.Minute

// Storage says where the demo keeps its data, for people: the data
// directory, or PostgreSQL (its URL may hold a password).
func (d *Demo) Storage() string {
	if d.DataDir == "" {
		return "the PostgreSQL database of --database-url"
	}
	return d.DataDir
}

// Info returns what the demo prints.
func (d *Demo) Info() Info {
	c := d.Credentials
	online := d.Server.URL("online")
	return Info{
		OnlineAPIBaseURL:      online,
		AccessAPIBaseURL:      d.Server.URL("access"),
		TerminalGatewayURL:    d.Server.URL("terminal") + "/terminal/v1/connect",
		ConsoleURL:            online + "/console",
		OpsURL:                d.Server.URL("ops"),
		SubscriptionKey:       c.SubscriptionKey,
		AccessToken:           c.AccessToken,
		ClientID:              c.ClientID,
		ClientSecret:          c.ClientSecret,
		AccessSubscriptionKey: c.AccessSubscriptionKey,
		AccessAccessToken:     c.AccessAccessToken,
		AccessClientID:        c.AccessClientID,
		AccessClientSecret:    c.AccessClientSecret,
		CustomerID:            c.CustomerID,
		MerchantID:            c.MerchantID,
		Currency:              Currency,
		Terminals:             append([]Terminal{}, c.Terminals...),
		DataDir:               d.DataDir,
	}
}

// Close stops the demo; a temporary data directory is removed.
func (d *Demo) Close() error {
	err := d.Server.Close()
	d.cleanup()
	return err
}

func (d *Demo) cleanup() {
	if d.tempDir {
		os.RemoveAll(d.DataDir)
	}
}

func (d *Demo) seed(ctx context.Context) (*Credentials, error) {
	st := d.Server.Store
	c, err := d.readCredentials(ctx)
	if err != nil {
		return nil, err
	}
	if c != nil {
		// Trust the file only while the store still knows its accounts.
		if _, err := st.Merchant(ctx, c.MerchantID); err != nil {
			if !errors.Is(err, instore.ErrNotFound) {
				return nil, err
			}
			c = nil
		}
	}
	if c == nil {
		c, err = create(ctx, st)
		if err != nil {
			return nil, err
		}
	}
	// The package catalogue of the three models; importing it again
	// changes nothing, so every start loads it and the first one adds it.
	if _, err := admin.New(st).ImportPackages(ctx, bytes.NewReader(packagesJSON)); err != nil {
		return nil, fmt.Errorf("package catalogue: %w", err)
	}
	changed := false
	if len(c.Terminals) == 0 {
		if c.Terminals, err = linkTerminals(ctx, st, c.MerchantID, d.Server.SandboxDevices()); err != nil {
			return nil, err
		}
		changed = true
	}
	now := time.Now()
	refresh := func(surface instore.Surface, clientID string, tok *string, exp *time.Time) error {
		if *tok != "" && exp.After(now.Add(time.Hour)) {
			// Keep it while the current signing key still accepts it.
			if id, err := d.Server.Auth.VerifyToken(surface, *tok); err == nil && id == clientID {
				return nil
			}
		}
		cl, err := st.APIClient(ctx, clientID)
		if err != nil {
			return err
		}
		t, e, err := d.Server.Auth.Mint(cl, TokenTTL)
		if err != nil {
			return err
		}
		*tok, *exp, changed = t, e, true
		return nil
	}
	if err := refresh(instore.SurfaceOnline, c.ClientID, &c.AccessToken, &c.AccessTokenExpires); err != nil {
		return nil, err
	}
	if err := refresh(instore.SurfaceAccess, c.AccessClientID, &c.AccessAccessToken, &c.AccessTokenExpires2); err != nil {
		return nil, err
	}
	if changed {
		if err := d.writeCredentials(ctx, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// linkTerminals allocates a terminal ID per virtual device and links them,
// in the devices' order.
func linkTerminals(ctx context.Context, st instore.Store, merchantID string, devices []sandbox.Device) ([]Terminal, error) {
	ts, err := admin.New(st).AllocateTerminals(ctx, merchantID, len(devices))
	if err != nil {
		return nil, err
	}
	out := make([]Terminal, len(devices))
	for i, dev := range devices {
		if _, _, err := st.LinkTerminal(ctx, ts[i].TerminalID, dev.SerialNumber, time.Now().UTC().Truncate(time.Microsecond)); err != nil {
			return nil, fmt.Errorf("link demo terminal: %w", err)
		}
		out[i] = Terminal{TerminalID: ts[i].TerminalID, SerialNumber: dev.SerialNumber, Model: dev.Model}
	}
	return out, nil
}

func create(ctx context.Context, st instore.Store) (*Credentials, error) {
	ad := admin.New(st)
	shop, err := ad.CreateShop(ctx, "Demo Customer", "Demo Merchant", "demo ECR")
	if err != nil {
		return nil, err
	}
	access, err := ad.CreateCredentials(ctx, instore.SurfaceAccess, shop.Customer.ID, "demo terminal management")
	if err != nil {
		return nil, err
	}
	return &Credentials{
		CustomerID: shop.Customer.ID, MerchantID: shop.Merchant.ID,
		ClientID: shop.Online.Client.ID, ClientSecret: shop.Online.Secret, SubscriptionKey: shop.Online.Key,
		AccessClientID: access.Client.ID, AccessClientSecret: access.Secret, AccessSubscriptionKey: access.Key,
	}, nil
}

// readCredentials reads the credentials of an earlier start: from
// CredentialsFile in the data directory, or the store's CredentialsSetting
// on PostgreSQL. It returns nil at the first start.
func (d *Demo) readCredentials(ctx context.Context) (*Credentials, error) {
	var (
		b     []byte
		err   error
		where = CredentialsFile
	)
	if d.DataDir == "" {
		where = "setting " + CredentialsSetting
		var v string
		v, err = d.Server.Store.Setting(ctx, CredentialsSetting)
		b = []byte(v)
	} else {
		b, err = os.ReadFile(filepath.Join(d.DataDir, CredentialsFile))
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, instore.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s is damaged: %w", where, err)
	}
	return &c, nil
}

// writeCredentials keeps c where readCredentials finds it.
func (d *Demo) writeCredentials(ctx context.Context, c *Credentials) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if d.DataDir == "" {
		return d.Server.Store.PutSetting(ctx, CredentialsSetting, string(b))
	}
	path := filepath.Join(d.DataDir, CredentialsFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

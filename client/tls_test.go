package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/tlsfiles/tlstest"
)

// TestTrustCAFilePurchaseOverHTTPS runs the demo over TLS with a
// certificate of a CA made here, and a purchase through the SDK that
// trusts that CA by TrustCAFile: the virtual terminals reach the gateway
// over wss://, the SDK the Online API over https://.
func TestTrustCAFilePurchaseOverHTTPS(t *testing.T) {
	ca, holder := tlstest.NewHolder(t, 7)
	scfg := testserver.Config(t.TempDir())
	scfg.TokenTTL, scfg.AckTimeout, scfg.TransactionDeadline, scfg.PrintTimeout = time.Hour, 2*time.Second, 30*time.Second, 5*time.Second
	scfg.TLS = holder
	info := testserver.Demo(t, scfg).Info()
	if !strings.HasPrefix(info.OnlineAPIBaseURL, "https://") || !strings.HasPrefix(info.TerminalGatewayURL, "wss://") {
		t.Fatalf("URLs %s and %s, want https:// and wss://", info.OnlineAPIBaseURL, info.TerminalGatewayURL)
	}
	cfg := client.Config{
		OnlineAPIURL: info.OnlineAPIBaseURL,
		Online:       client.Credentials{SubscriptionKey: info.SubscriptionKey, ClientID: info.ClientID, ClientSecret: info.ClientSecret},
		MaxRetries:   -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Without the CA the certificate is refused.
	plain, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Metadata(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Metadata without the CA = %v, want a certificate error", err)
	}

	if err := cfg.TrustCAFile(ca.File); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	term := info.Terminals[0].TerminalID
	waitOnline(t, c, term, true) // the in-process terminal came in over wss://
	tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: term, Amount: 1250, Currency: "SEK"})
	if err != nil {
		t.Fatalf("Purchase over https: %v", err)
	}
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if final.StatusID != instore.StatusApproved {
		t.Errorf("purchase ended %d %s, want APPROVED", final.StatusID, final.Status)
	}

	// The SDK's default transport speaks HTTP/2 to the APIs.
	hc := cfg.HTTPClient
	resp, err := hc.Get(info.OnlineAPIBaseURL + "/in-store/api/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("answer over %s (TLS %v), want HTTP/2 over TLS 1.2 or later", resp.Proto, resp.TLS)
	}
}

func TestTrustCAFileErrors(t *testing.T) {
	ca := tlstest.NewCA(t)
	var cfg client.Config
	if err := cfg.TrustCAFile(filepath.Join(t.TempDir(), "missing.pem")); err == nil || cfg.HTTPClient != nil {
		t.Errorf("TrustCAFile of a missing file = %v (HTTPClient %v), want an error and nothing set", err, cfg.HTTPClient)
	}
	// A transport of the caller's own is not rewritten.
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("x") })}
	if err := cfg.TrustCAFile(ca.File); err == nil {
		t.Error("TrustCAFile with a foreign transport succeeded, want an error")
	}
	// An *http.Transport is copied, the caller's left unchanged.
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "pos.example"}}
	orig := &http.Client{Transport: tr, Timeout: time.Minute}
	cfg.HTTPClient = orig
	if err := cfg.TrustCAFile(ca.File); err != nil {
		t.Fatal(err)
	}
	got := cfg.HTTPClient.Transport.(*http.Transport).TLSClientConfig
	if cfg.HTTPClient == orig || tr.TLSClientConfig.RootCAs != nil || got.RootCAs == nil || got.ServerName != "pos.example" ||
		got.MinVersion != tls.VersionTLS12 || cfg.HTTPClient.Timeout != time.Minute {
		t.Errorf("TrustCAFile on a client of the caller's: got %+v, caller's transport changed: %v", got, tr.TLSClientConfig.RootCAs != nil)
	}
}

func TestTLSConfigTrusting(t *testing.T) {
	ca := tlstest.NewCA(t)
	tc, err := client.TLSConfigTrusting(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	p := ca.Issue(t, 5)
	leaf, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: tc.RootCAs, DNSName: "localhost"}); err != nil {
		t.Errorf("a certificate of the CA does not verify with the pool: %v", err)
	}
	if tc.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want TLS 1.2", tc.MinVersion)
	}
	if _, err := client.TLSConfigTrusting(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("a missing file was accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	tlstest.WriteFile(t, bad, p.KeyPEM)
	if _, err := client.TLSConfigTrusting(bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key file as CA file = %v, want 'no PEM certificate'", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUnknownCAHint: a service whose certificate no trusted CA issued (a
// real TLS server with a self-signed certificate) is refused with an
// error that says to trust its CA with TrustCAFile, after one attempt;
// with TrustCAFile of that certificate the request goes through.
func TestUnknownCAHint(t *testing.T) {
	var handshakes atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"paymentMethods":[]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			handshakes.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cfg := client.Config{
		OnlineAPIURL: srv.URL,
		Online:       client.Credentials{SubscriptionKey: "key", AccessToken: "token"},
		MaxRetries:   3, RetryDelay: time.Millisecond,
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Metadata(context.Background())
	var unknownCA *client.UnknownCAError
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) || !errors.As(err, &ua) ||
		!strings.HasSuffix(err.Error(), "certificate signed by unknown authority: trust the service's CA with Config.TrustCAFile") {
		t.Fatalf("Metadata = %v, want an UnknownCAError that names TrustCAFile", err)
	}
	if n := handshakes.Load(); n != 1 {
		t.Errorf("%d connections, want 1: an unknown CA is not retried", n)
	}
	// Following the events says the same at once, rather than retrying
	// until its context ends (the bound is only a guard).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, err := range c.FollowEvents(ctx, client.EventQuery{}) {
		if !errors.As(err, &unknownCA) || ctx.Err() != nil {
			t.Errorf("FollowEvents = %v, want an UnknownCAError at once", err)
		}
		break
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cfg.TrustCAFile(caFile); err != nil {
		t.Fatal(err)
	}
	if c, err = client.New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Metadata(context.Background()); err != nil {
		t.Errorf("Metadata trusting the CA = %v", err)
	}
}

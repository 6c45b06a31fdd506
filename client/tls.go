package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// TLSConfigTrusting returns a client TLS configuration (TLS 1.2 at least)
// that trusts the system's CA certificates (none where the system has no
// store, as in a scratch container) and every certificate in the PEM file
// caFile. A file that holds no certificate is an error. The virtual
// terminal (instore terminal --ca-file) dials wss:// with it.
func TLSConfigTrusting(caFile string) (*tls.Config, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client: CA file %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// TrustCAFile makes the client trust the CA certificates in the PEM file
// caFile, besides the system's: for a service whose certificate a private
// CA issued (instore serve --tls-cert). It sets HTTPClient to a client
// whose transport verifies the service's certificate against them, with
// TLS 1.2 at least; call it before New.
//
// When HTTPClient is already set, its transport must be an
// *http.Transport (or nil, the default transport): a copy of it is made
// with the CA added, and HTTPClient is replaced by a copy using it, so the
// client that was passed is left as it was. Any other transport sets its
// own TLS configuration, and TrustCAFile returns an error.
func (cfg *Config) TrustCAFile(caFile string) error {
	tc, err := TLSConfigTrusting(caFile)
	if err != nil {
		return err
	}
	hc := &http.Client{}
	base := http.DefaultTransport
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
		if hc.Transport != nil {
			base = hc.Transport
		}
	}
	tr, ok := base.(*http.Transport)
	if !ok {
		return errors.New("client: TrustCAFile: HTTPClient's transport is not an *http.Transport; give it the CA in its own TLS configuration")
	}
	tr = tr.Clone()
	if tr.TLSClientConfig != nil {
		// Keep what the caller set (client certificates, server name);
		// the CA pool and the minimum version are TrustCAFile's.
		tc2 := tr.TLSClientConfig.Clone()
		tc2.RootCAs = tc.RootCAs
		tc2.MinVersion = max(tc2.MinVersion, tc.MinVersion)
		tc = tc2
	}
	tr.TLSClientConfig = tc
	hc.Transport = tr
	cfg.HTTPClient = hc
	return nil
}

// UnknownCAError is the error of a request whose answer never came
// because the service's certificate was issued by a certificate authority
// the client does not trust (x509.UnknownAuthorityError, which it wraps):
// a service with a private CA's certificate. Its message says what to do:
// trust that CA with Config.TrustCAFile. It is not retried.
type UnknownCAError struct{ Err error }

func (e *UnknownCAError) Error() string {
	return e.Err.Error() + ": trust the service's CA with Config.TrustCAFile"
}

func (e *UnknownCAError) Unwrap() error { return e.Err }

// withCAHint wraps a transport error caused by an unknown certificate
// authority in an UnknownCAError; any other error is returned as it is.
func withCAHint(err error) error {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return &UnknownCAError{Err: err}
	}
	return err
}

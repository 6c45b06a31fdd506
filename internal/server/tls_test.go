package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/tlsfiles/tlstest"
)

// TestTLSListeners: with a certificate the two APIs and the gateway serve
// TLS (1.2 at least; HTTP/2 offered on the APIs, HTTP/1.1 only on the
// gateway, whose WebSocket upgrades an HTTP/1.1 request) and the ops
// listener stays plain HTTP.
func TestTLSListeners(t *testing.T) {
	ca, holder := tlstest.NewHolder(t, 42)
	cfg := testserver.Config(t.TempDir())
	cfg.TokenTTL, cfg.TLS = time.Hour, holder
	testserver.Logs(&cfg)
	srv := testserver.Start(t, cfg)
	want := map[string]string{"online": "https://", "access": "https://", "terminal": "wss://", "ops": "http://"}
	for name, scheme := range want {
		if u := srv.URL(name); !strings.HasPrefix(u, scheme) {
			t.Errorf("URL(%s) = %s, want %s...", name, u, scheme)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hostOf := func(name string) string {
		u, err := url.Parse(srv.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	dial := func(addr string, cfg *tls.Config) (*tls.Conn, error) {
		cfg.RootCAs = pool
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	}
	for name, proto := range map[string]string{"online": "h2", "access": "h2", "terminal": "http/1.1"} {
		c, err := dial(hostOf(name), &tls.Config{NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Errorf("%s: TLS handshake: %v", name, err)
			continue
		}
		st := c.ConnectionState()
		c.Close()
		if st.NegotiatedProtocol != proto || st.PeerCertificates[0].SerialNumber.Int64() != 42 {
			t.Errorf("%s: protocol %q, certificate %v; want %q and serial 42", name, st.NegotiatedProtocol, st.PeerCertificates[0].SerialNumber, proto)
		}
		if c, err := dial(hostOf(name), &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
			c.Close()
			t.Errorf("%s: a TLS 1.1 handshake succeeded", name)
		}
	}
	// Plain HTTP on a TLS listener gets no API answer.
	if resp, err := http.Get("http://" + hostOf("online") + "/in-store/api/v1/metadata"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS Online API = %d, want 400 (Go's answer to HTTP on a TLS port)", resp.StatusCode)
		}
	}
	// The ops listener answers plain HTTP.
	resp, err := http.Get(srv.URL("ops") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /readyz on the ops listener = %d, want 200", resp.StatusCode)
	}
}

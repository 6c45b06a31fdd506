// Package tlstest makes the certificates of TLS tests: a CA of its own and
// server certificates it signs (ECDSA P-256, for 127.0.0.1, ::1 and
// localhost), written as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/tlsfiles"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
}

// NewCA makes a CA and writes its certificate to a file in a temporary
// directory of t.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "instore test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, File: filepath.Join(t.TempDir(), "ca.pem")}
	WriteFile(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pair is a server certificate and its key, PEM-encoded.
type Pair struct {
	Serial   int64
	CertPEM  []byte
	KeyPEM   []byte
	NotAfter time.Time
}

// Issue makes a server certificate with this serial number for 127.0.0.1,
// ::1 and localhost, valid from an hour ago for a day.
func (ca *CA) Issue(t testing.TB, serial int64) Pair {
	t.Helper()
	return ca.IssueValid(t, serial, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// IssueValid is Issue with the validity period given.
func (ca *CA) IssueValid(t testing.TB, serial int64, notBefore, notAfter time.Time) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "instore test server"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		Serial:   serial,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		NotAfter: notAfter,
	}
}

// Files are the certificate and key files a server reads.
type Files struct{ Cert, Key string }

// NewFiles returns two file names in a temporary directory of t.
func NewFiles(t testing.TB) Files {
	dir := t.TempDir()
	return Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
}

// Write replaces the files' contents with p, each file by a rename, as a
// certificate manager does, so that a reader sees the old or the new file,
// never half of one.
func (f Files) Write(t testing.TB, p Pair) {
	t.Helper()
	WriteFile(t, f.Cert, p.CertPEM)
	WriteFile(t, f.Key, p.KeyPEM)
}

// WriteFile writes b to path through a temporary file and a rename.
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ServedSerial connects to addr (host:port) with TLS, trusting only ca, and
// returns the serial number of the certificate the server presented.
func ServedSerial(addr string, ca *CA) (int64, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// NewHolder makes a CA and a server certificate of this serial it signs,
// writes them to files and loads them as a holder for a server's TLS.
func NewHolder(t testing.TB, serial int64) (*CA, *tlsfiles.Holder) {
	t.Helper()
	ca := NewCA(t)
	files := NewFiles(t)
	files.Write(t, ca.Issue(t, serial))
	holder, err := tlsfiles.Load(files.Cert, files.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca, holder
}

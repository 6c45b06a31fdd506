package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/internal/tlsfiles"
	"github.com/instore-dev/instore/internal/tlsfiles/tlstest"
)

// serve runs a TLS listener on the holder's configuration that completes
// handshakes and closes, until the test ends.
func serve(t *testing.T, h *tlsfiles.Holder) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", h.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

func served(t *testing.T, addr string, ca *tlstest.CA) int64 {
	t.Helper()
	n, err := tlstest.ServedSerial(addr, ca)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	return n
}

func TestLoadRefusesBadPairs(t *testing.T) {
	ca := tlstest.NewCA(t)
	good, other := ca.Issue(t, 10), ca.Issue(t, 11)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		tlstest.WriteFile(t, p, b)
		return p
	}
	cert, key := write("c.pem", good.CertPEM), write("k.pem", good.KeyPEM)
	if h, err := tlsfiles.Load(cert, key, nil); err != nil || h.Certificate().Leaf.SerialNumber.Int64() != 10 {
		t.Fatalf("Load of a good pair = %v", err)
	}
	expired := ca.IssueValid(t, 12, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	for name, files := range map[string][2]string{
		"missing certificate": {filepath.Join(dir, "nope"), key},
		"missing key":         {cert, filepath.Join(dir, "nope")},
		"no file names":       {"", ""},
		"key of another":      {cert, write("k2.pem", other.KeyPEM)},
		"garbage key":         {cert, write("g.pem", []byte("not a key"))},
		"key as certificate":  {key, key},
		"expired":             {write("e.pem", expired.CertPEM), write("ek.pem", expired.KeyPEM)},
	} {
		if _, err := tlsfiles.Load(files[0], files[1], nil); err == nil {
			t.Errorf("%s: Load succeeded, want an error", name)
		} else if strings.Contains(err.Error(), "PRIVATE KEY-----") || strings.Contains(err.Error(), string(good.KeyPEM[30:60])) {
			t.Errorf("%s: the error holds key material: %v", name, err)
		}
	}
}

// logged loads a pair the CA issues with serial from files f, logging as
// JSON into logs at level.
func logged(t *testing.T, serial int64, level slog.Level) (ca *tlstest.CA, f tlstest.Files, h *tlsfiles.Holder, logs *testlog.Buffer) {
	t.Helper()
	ca, f, logs = tlstest.NewCA(t), tlstest.NewFiles(t), &testlog.Buffer{}
	f.Write(t, ca.Issue(t, serial))
	h, err := tlsfiles.Load(f.Cert, f.Key, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	return ca, f, h, logs
}

// TestReload: Reload serves the new certificate to new handshakes; a bad
// replacement keeps the old one and logs an error without key material.
func TestReload(t *testing.T) {
	ca, f, h, logs := logged(t, 100, slog.LevelInfo)
	addr := serve(t, h)
	if got := served(t, addr, ca); got != 100 {
		t.Fatalf("served serial = %d, want 100", got)
	}
	p2 := ca.Issue(t, 101)
	f.Write(t, p2)
	if err := h.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := served(t, addr, ca); got != 101 {
		t.Fatalf("served serial after Reload = %d, want 101", got)
	}
	// A key that does not match, then a truncated certificate: both keep 101.
	p3 := ca.Issue(t, 102)
	tlstest.WriteFile(t, f.Cert, p3.CertPEM)
	if err := h.Reload(); err == nil {
		t.Fatal("Reload with a mismatched key succeeded")
	}
	tlstest.WriteFile(t, f.Cert, p3.CertPEM[:len(p3.CertPEM)/2])
	tlstest.WriteFile(t, f.Key, p3.KeyPEM)
	if err := h.Reload(); err == nil {
		t.Fatal("Reload with a truncated certificate succeeded")
	}
	if got := served(t, addr, ca); got != 101 {
		t.Errorf("served serial after bad reloads = %d, want 101 (the last good one)", got)
	}
	out := logs.String()
	if strings.Count(out, `"level":"ERROR"`) != 2 || !strings.Contains(out, "previous one stays in use") {
		t.Errorf("want two error lines for the two bad reloads, got:\n%s", out)
	}
	for _, p := range []tlstest.Pair{p2, p3} {
		body := strings.Split(string(p.KeyPEM), "\n")[1]
		if strings.Contains(out, body) || strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("the log holds key material:\n%s", out)
		}
	}
}

// TestWatch: a change of the files is picked up without a signal; a bad
// pair is tried once and again after the next change.
func TestWatch(t *testing.T) {
	ca, f, h, logs := logged(t, 200, slog.LevelInfo)
	defer watch(h)()
	addr := serve(t, h)
	waitSerial := func(want int64) {
		t.Helper()
		testwait.ForNil(t, fmt.Sprintf("serial %d served after the files changed", want), func() error {
			if got := served(t, addr, ca); got != want {
				return fmt.Errorf("served serial = %d", got)
			}
			return nil
		})
	}
	f.Write(t, ca.Issue(t, 201))
	waitSerial(201)

	// A certificate without its key: not a pair yet, waited for (INFO),
	// 201 stays.
	p := ca.Issue(t, 202)
	tlstest.WriteFile(t, f.Cert, p.CertPEM)
	testwait.ForNil(t, "the certificate without its key to be noticed", func() error {
		if !strings.Contains(logs.String(), "not a valid pair yet") {
			return fmt.Errorf("logs:\n%s", logs.String())
		}
		return nil
	})
	if got := served(t, addr, ca); got != 201 {
		t.Fatalf("served serial = %d, want 201 while the key is missing", got)
	}
	// The key arrives: the pair is loaded, and no error was logged.
	tlstest.WriteFile(t, f.Key, p.KeyPEM)
	waitSerial(202)
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 0 {
		t.Errorf("%d error lines, want none (the key followed within the grace):\n%s", n, logs.String())
	}
}

// TestCheckWaitsForMatchingPair drives the watch's looks with explicit
// times: a certificate and its key replaced a few seconds apart are
// reloaded without an error line, the old certificate serving meanwhile;
// a pair that still does not match ReloadGrace after the first look that
// found it is logged at ERROR once, and loaded when the key comes.
func TestCheckWaitsForMatchingPair(t *testing.T) {
	ca, f, h, logs := logged(t, 400, slog.LevelDebug)
	addr := serve(t, h)
	errorLines := func() int { return strings.Count(logs.String(), `"level":"ERROR"`) }
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	// The certificate first, the key 5 s later.
	p := ca.Issue(t, 401)
	tlstest.WriteFile(t, f.Cert, p.CertPEM)
	h.Check(t0)
	if got := served(t, addr, ca); got != 400 {
		t.Fatalf("served serial = %d while the key is missing, want 400", got)
	}
	h.Check(t0.Add(5 * time.Second))
	tlstest.WriteFile(t, f.Key, p.KeyPEM)
	h.Check(t0.Add(10 * time.Second))
	if got := served(t, addr, ca); got != 401 {
		t.Fatalf("served serial = %d once the key came, want 401", got)
	}
	if n := errorLines(); n != 0 {
		t.Fatalf("%d error lines for a pair replaced 5 s apart, want none:\n%s", n, logs.String())
	}

	// A certificate whose key never comes: an error once the grace passed,
	// not before, and once.
	q := ca.Issue(t, 402)
	tlstest.WriteFile(t, f.Cert, q.CertPEM)
	t1 := t0.Add(time.Minute)
	h.Check(t1)
	h.Check(t1.Add(tlsfiles.ReloadGrace - time.Second))
	if n := errorLines(); n != 0 {
		t.Fatalf("%d error lines within the grace, want none:\n%s", n, logs.String())
	}
	h.Check(t1.Add(tlsfiles.ReloadGrace))
	h.Check(t1.Add(2 * tlsfiles.ReloadGrace))
	if n := errorLines(); n != 1 || !strings.Contains(logs.String(), "previous one stays in use") {
		t.Fatalf("%d error lines after the grace, want 1:\n%s", n, logs.String())
	}
	if got := served(t, addr, ca); got != 401 {
		t.Fatalf("served serial = %d with a mismatched pair, want 401", got)
	}
	tlstest.WriteFile(t, f.Key, q.KeyPEM)
	h.Check(t1.Add(3 * tlsfiles.ReloadGrace))
	if got := served(t, addr, ca); got != 402 {
		t.Fatalf("served serial = %d once the late key came, want 402", got)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("the log holds key material:\n%s", logs.String())
	}
}

// TestWatchFollowsSymlinkSwap: a Kubernetes secret volume replaces its
// files by pointing a symbolic link at a new directory.
func TestWatchFollowsSymlinkSwap(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	gen := func(name string, p tlstest.Pair) {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		tlstest.WriteFile(t, filepath.Join(d, "tls.crt"), p.CertPEM)
		tlstest.WriteFile(t, filepath.Join(d, "tls.key"), p.KeyPEM)
	}
	gen("v1", ca.Issue(t, 300))
	gen("v2", ca.Issue(t, 301))
	link := func(target string) {
		tmp := filepath.Join(dir, "..data.tmp")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	link("v1")
	for _, n := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", n), filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := tlsfiles.Load(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watch(h)()
	link("v2")
	testwait.For(t, "the swapped link to be followed", func() bool { return h.Certificate().Leaf.SerialNumber.Int64() == 301 })
}

func TestMinimumVersion(t *testing.T) {
	ca, h := tlstest.NewHolder(t, 1)
	addr := serve(t, h)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10})
	if err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded, want it refused")
	}
}

func TestPinnedClientConfig(t *testing.T) {
	ca, h := tlstest.NewHolder(t, 1)
	addr := serve(t, h)
	dial := func(h *tlsfiles.Holder) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, h.PinnedClientConfig())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(h); err != nil {
		t.Fatalf("pinned dial to its own certificate: %v", err)
	}
	// Another holder's certificate, even from the same CA, is refused.
	g := tlstest.NewFiles(t)
	g.Write(t, ca.Issue(t, 2))
	other, err := tlsfiles.Load(g.Cert, g.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(other); err == nil {
		t.Fatal("pinned dial accepted a certificate that is not the pinned one")
	}
}

// watch runs h.Watch, checking every 10ms, until the returned function is
// called; that function returns once Watch has.
func watch(h *tlsfiles.Holder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Watch(ctx, 10*time.Millisecond)
	}()
	return func() { cancel(); <-done }
}

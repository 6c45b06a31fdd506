// Package tlsfiles holds the service's TLS certificate, read from a PEM
// certificate file and a PEM key file, and replaces it while the service
// runs: on Reload (the binary calls it on SIGHUP) and when Watch sees either
// file change. A reload that fails keeps the certificate in use and logs
// why; the handshakes of new connections get the new certificate, those of
// open connections are not touched.
//
// The clients' side, a CA file to trust, is the SDK's
// (client.TLSConfigTrusting), which the virtual terminal uses too.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatchInterval is how often the binary looks at the files' size
// and modification time.
const DefaultWatchInterval = 5 * time.Second

// Holder is the current certificate of a pair of files. It is safe for
// concurrent use.
type Holder struct {
	certFile, keyFile string
	log               *slog.Logger
	cur               atomic.Pointer[tls.Certificate]

	// mu serializes reloads; seen is what the files looked like at the
	// last attempt, so that Watch tries again only after another change.
	// waitingSince is when Watch found the changed files not a valid pair
	// (zero: it is not waiting): it tries them again at every look until
	// they are, and logs an error only if ReloadGrace passes first.
	mu           sync.Mutex
	seen         [2]fileStamp
	waitingSince time.Time
}

// ReloadGrace is how long Watch waits for changed files to form a valid
// pair before it logs the error: a certificate and its key replaced one
// after the other, a few seconds apart, are reloaded without an error
// line. Meanwhile the certificate in use stays.
const ReloadGrace = 30 * time.Second

// fileStamp is what Watch compares: the file (a rename over it makes it
// another), its size and its modification time. A rewrite in place, a
// rename over the file and the symbolic-link swap of a Kubernetes secret
// volume all change it.
type fileStamp struct{ fi os.FileInfo }

func stamp(path string) fileStamp {
	fi, err := os.Stat(path) // follows links: the file the link names now
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi}
}

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}

// Load reads the pair of files; an error means the service must not start
// with them. logger (nil: discard) gets one line per reload.
func Load(certFile, keyFile string, logger *slog.Logger) (*Holder, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: both a certificate file and a key file are needed")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Holder{certFile: certFile, keyFile: keyFile, log: logger}
	h.seen = h.stamps()
	c, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	h.cur.Store(c)
	h.logLoaded(c)
	return h, nil
}

func (h *Holder) stamps() [2]fileStamp {
	return [2]fileStamp{stamp(h.certFile), stamp(h.keyFile)}
}

// loadPair reads and checks a certificate and its key. The errors name the
// files and what is wrong, never their contents.
func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s and key %s: %w", certFile, keyFile, err)
	}
	// The leaf is parsed by LoadX509KeyPair (Go 1.23+); a certificate
	// that has expired is refused as no client would accept it.
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", certFile, err)
		}
	}
	if time.Now().After(c.Leaf.NotAfter) {
		return nil, fmt.Errorf("tls: certificate %s expired at %s", certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &c, nil
}

// Certificate returns the certificate in use.
func (h *Holder) Certificate() *tls.Certificate { return h.cur.Load() }

// GetCertificate is tls.Config.GetCertificate: the certificate in use.
func (h *Holder) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return h.cur.Load(), nil
}

// SetLogger replaces the logger of the reloads (nil: discard), for a
// holder loaded before the program's loggers exist, and logs the
// certificate in use to it.
func (h *Holder) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = l
	if c := h.cur.Load(); c != nil {
		h.logLoaded(c)
	}
}

// Reload reads the files again. On success the new certificate serves
// every handshake from now on; on failure the old one stays, and the
// error is logged and returned.
func (h *Holder) Reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reloadLocked()
}

func (h *Holder) reloadLocked() error {
	h.seen = h.stamps()
	h.waitingSince = time.Time{}
	c, err := loadPair(h.certFile, h.keyFile)
	if err != nil {
		h.logNotReloaded(err)
		return err
	}
	h.install(c)
	return nil
}

func (h *Holder) logNotReloaded(err error) {
	h.log.Error("TLS certificate not reloaded; the previous one stays in use", "error", err.Error())
}

// install makes c the certificate in use.
func (h *Holder) install(c *tls.Certificate) {
	old := h.cur.Swap(c)
	if old != nil && bytes.Equal(old.Certificate[0], c.Certificate[0]) {
		h.log.Debug("TLS certificate unchanged", "serial", serial(c.Leaf.SerialNumber))
		return
	}
	h.logLoaded(c)
}

func (h *Holder) logLoaded(c *tls.Certificate) {
	h.log.Info("TLS certificate loaded", "serial", serial(c.Leaf.SerialNumber),
		"notAfter", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// serial is a certificate's serial number as hex (not a secret: every
// client sees it).
func serial(n *big.Int) string { return fmt.Sprintf("%x", n) }

// Watch calls Check every interval, until ctx ends.
func (h *Holder) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Check(now)
		}
	}
}

// Check is one look of Watch, at time now: when either file changed (its
// identity, size or modification time) since the last attempt, the pair
// is read again. Changed files that are not a valid pair yet (a new
// certificate with the old key: the key is being replaced a moment later)
// keep the certificate in use and are tried again at every look, logged
// at INFO; only when they still fail ReloadGrace after the first failure
// is the error logged, once. After that they are tried again at the next
// change, not logged at every look.
func (h *Holder) Check(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stamps()
	changed := !st[0].same(h.seen[0]) || !st[1].same(h.seen[1])
	if !changed && h.waitingSince.IsZero() {
		return
	}
	h.seen = st
	c, err := loadPair(h.certFile, h.keyFile)
	switch {
	case err == nil:
		h.waitingSince = time.Time{}
		h.install(c)
	case h.waitingSince.IsZero():
		h.waitingSince = now
		h.log.Info("TLS files changed but are not a valid pair yet; the previous certificate stays in use while waiting for the other file",
			"error", err.Error(), "grace", ReloadGrace.String())
	case now.Sub(h.waitingSince) >= ReloadGrace:
		h.waitingSince = time.Time{}
		h.logNotReloaded(err)
	default:
		h.log.Debug("TLS files still not a valid pair", "error", err.Error())
	}
}

// ServerConfig returns the TLS configuration of a listener: TLS 1.2 at
// least, Go's cipher suites and curves (which prefer forward secrecy and
// AEAD ciphers, and leave out the broken ones), and the holder's current
// certificate for every handshake.
func (h *Holder) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: h.GetCertificate}
}

// PinnedClientConfig returns a client configuration that trusts exactly
// the certificate the holder serves at the time of the handshake, whatever
// its names and issuer: for the service's own in-process clients (the
// sandbox's virtual terminals), which dial the listener they run beside
// by its loopback address.
func (h *Holder) PinnedClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is VerifyConnection's: the peer's leaf must be the
		// certificate in use, byte for byte.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			if !bytes.Equal(cs.PeerCertificates[0].Raw, h.cur.Load().Certificate[0]) {
				return errors.New("tls: the server's certificate is not the one this service serves")
			}
			return nil
		},
	}
}

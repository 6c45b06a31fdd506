package loadtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is the webhook endpoints' HTTPS server: one path per endpoint
// (/hook/{i}), each with its secret. Its certificate is its own (for
// 127.0.0.1): the server is told to trust it with SSL_CERT_FILE (the
// server takes http:// endpoints in the sandbox only, and a real receiver
// is https). It answers 204 to a delivery whose
// signature verifies, 400 otherwise; while held, it keeps requests waiting
// (under the dispatcher's 10 s time-out) until released.
type receiver struct {
	srv      *http.Server
	url      string
	certFile string // PEM of its certificate

	mu      sync.Mutex
	secrets []*standardwebhooks.Webhook
	// last is per endpoint the last event id delivered, per terminal when
	// its concurrency is above 1 (in order per terminal only).
	last    []map[string]string
	perTerm []bool
	hold    chan struct{}
	// lags measures the deliveries' lag behind their events (lag.go).
	lags lags

	deliveries, badSignatures, outOfOrder, repeats atomic.Int64
	// waiting counts the requests held now (holdAll).
	waiting atomic.Int64
	// firstAt and lastAt are the first and last deliveries' times (Unix
	// nanoseconds) since reset.
	firstAt, lastAt atomic.Int64
}

// newReceiver starts a receiver; its certificate goes to dir.
func newReceiver(dir string) (*receiver, error) {
	cert, certPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(dir, "receiver-cert.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "https://" + ln.Addr().String(), certFile: certFile}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{i}", r.serve)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ErrorLog: log.New(io.Discard, "", 0)}
	go r.srv.ServeTLS(ln, "", "")
	return r, nil
}

// selfSigned returns the receivers' certificate for 127.0.0.1, valid for
// a day: one per process, since an in-process server (and Go's TLS
// clients in general) reads SSL_CERT_FILE only once.
func selfSigned() (tls.Certificate, []byte, error) {
	c := receiverCert()
	return c.cert, c.pem, c.err
}

type certPEM struct {
	cert tls.Certificate
	pem  []byte
	err  error
}

var receiverCert = sync.OnceValue(func() certPEM {
	cert, p, err := makeCert()
	return certPEM{cert, p, err}
})

func makeCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "instore loadtest receiver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// trustingClient is an HTTP client that trusts the receiver's certificate.
func (r *receiver) trustingClient(workers int) (*http.Client, error) {
	pemBytes, err := os.ReadFile(r.certFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers,
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}, nil
}

func (r *receiver) close() {
	r.release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	r.srv.Close()
}

// endpoint adds an endpoint's secret and returns its index; its lags
// count in class (lagAll: every event type; lagTyped: some); its
// deliveries are checked in order per endpoint, or per terminal if its
// concurrency is above 1.
func (r *receiver) endpoint(secret string, class, concurrency int) (int, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, wh)
	r.last = append(r.last, map[string]string{})
	r.perTerm = append(r.perTerm, concurrency > 1)
	r.lags.add(class)
	return len(r.secrets) - 1, nil
}

// terminalOf is the terminal of an event's body ("" for none): the key
// of its order when an endpoint has several deliveries in flight.
func terminalOf(body []byte) string {
	var e struct {
		Data struct {
			TerminalID string `json:"terminalId"`
		} `json:"data"`
	}
	json.Unmarshal(body, &e)
	return e.Data.TerminalID
}

// holdAll makes the deliveries wait until release.
func (r *receiver) holdAll() {
	r.mu.Lock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
	r.mu.Unlock()
}

func (r *receiver) release() {
	r.mu.Lock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return
	}
	var i int
	if _, err := fmt.Sscan(req.PathValue("i"), &i); err != nil {
		http.Error(w, "no such endpoint", 404)
		return
	}
	r.mu.Lock()
	if i < 0 || i >= len(r.secrets) {
		r.mu.Unlock()
		http.Error(w, "no such endpoint", 404)
		return
	}
	wh, hold := r.secrets[i], r.hold
	r.mu.Unlock()
	if hold != nil {
		r.waiting.Add(1)
		select {
		case <-hold:
			r.waiting.Add(-1)
		case <-req.Context().Done():
			r.waiting.Add(-1)
			return
		}
	}
	if wh.Verify(body, req.Header) != nil {
		r.badSignatures.Add(1)
		http.Error(w, "bad signature", 400)
		return
	}
	if !r.lags.delivered(i, body, time.Now()) {
		w.WriteHeader(http.StatusNoContent) // an endpoint closed by the run: not counted
		return
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	key := ""
	if r.perTerm[i] {
		key = terminalOf(body)
	}
	switch last := r.last[i][key]; {
	case id == last:
		r.repeats.Add(1) // at least once: a delivery sent again
	case id < last:
		r.outOfOrder.Add(1)
	default:
		r.last[i][key] = id
	}
	r.mu.Unlock()
	now := time.Now().UnixNano()
	r.firstAt.CompareAndSwap(0, now)
	r.lastAt.Store(now)
	r.deliveries.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

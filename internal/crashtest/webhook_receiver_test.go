package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/tlsfiles/tlstest"
)

// The webhook cluster test's receiver: the merchant's HTTPS endpoints, with
// the checks of what each was delivered and which node sent it.

// whReceiver is the merchant's webhook receiver: HTTPS on a fixed loopback
// port (its own certificate, which the nodes trust through SSL_CERT_FILE),
// one path per endpoint.
type whReceiver struct {
	addr, url, certFile string
	cert                tls.Certificate

	mu  sync.Mutex
	srv *http.Server
	eps map[string]*whEndpoint
}

type whEndpoint struct {
	secret string
	types  []instore.EventType // nil: all
	// requests counts the requests that verified; failLeft and slowLeft
	// the 503s and slow answers still to give.
	requests, failed, slowed int
	failLeft, slowLeft       int
	badSigs                  int
	arrivals                 []*whArrival
	// cut holds the events whose attempt a kill cut (in flight, or
	// answered and not yet recorded by the node killed): those alone may
	// arrive twice; inFlight counts the first kind.
	cut      map[string]bool
	inFlight int
}

// whArrival is a delivery that verified and was (or is being) answered 2xx.
type whArrival struct {
	ev         instore.EventWire
	port       int // the sender's local port
	at, done   time.Time
	slow       bool
	answeredOK bool
}

func startWHReceiver(t *testing.T) *whReceiver {
	t.Helper()
	// A certificate for 127.0.0.1; the nodes trust its CA (SSL_CERT_FILE).
	ca := tlstest.NewCA(t)
	pair := ca.Issue(t, 1)
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certFile := ca.File
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &whReceiver{addr: ln.Addr().String(), certFile: certFile, cert: cert, eps: map[string]*whEndpoint{}}
	r.url = "https://" + r.addr
	r.serve(ln)
	t.Cleanup(func() {
		r.mu.Lock()
		srv := r.srv
		r.srv = nil
		r.mu.Unlock()
		if srv != nil {
			srv.Close()
		}
	})
	return r
}

func (r *whReceiver) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{name}", r.handle)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{r.cert}}, ErrorLog: log.New(io.Discard, "", 0)}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.ServeTLS(ln, "", "")
}

// setDown takes the receiver down (its port refuses connections; the
// requests it is answering are finished) or brings it back on the same
// port.
func (r *whReceiver) setDown(t *testing.T, down bool) {
	if down {
		r.mu.Lock()
		srv := r.srv
		r.srv = nil
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*whSlow)
		defer cancel()
		srv.Shutdown(ctx)
		t.Logf("the receiver is down for %s", whDown)
		return
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatalf("the receiver back on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *whReceiver) add(t *testing.T, name, secret string, types []instore.EventType) {
	if err := apitest.WebhookSecret(secret); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eps[name] = &whEndpoint{secret: secret, types: types, failLeft: 2, slowLeft: 4, cut: map[string]bool{}}
}

func (r *whReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	_, p, _ := net.SplitHostPort(req.RemoteAddr)
	port, _ := strconv.Atoi(p)
	r.mu.Lock()
	ep := r.eps[req.PathValue("name")]
	if ep == nil {
		r.mu.Unlock()
		http.Error(w, "no such endpoint", http.StatusNotFound)
		return
	}
	var ev instore.EventWire
	if !apitest.WebhookSigned(body, req.Header, ep.secret) || json.Unmarshal(body, &ev) != nil || ev.ID != req.Header.Get("webhook-id") {
		ep.badSigs++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	ep.requests++
	n := ep.requests
	if ep.failLeft > 0 && n%13 == 6 {
		ep.failLeft--
		ep.failed++
		r.mu.Unlock()
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	a := &whArrival{ev: ev, port: port, at: time.Now()}
	if ep.slowLeft > 0 && n%9 == 4 {
		ep.slowLeft--
		ep.slowed++
		a.slow = true
	}
	ep.arrivals = append(ep.arrivals, a)
	r.mu.Unlock()
	if a.slow {
		t := time.NewTimer(whSlow)
		select {
		case <-t.C:
		case <-req.Context().Done(): // the sender died
		}
		t.Stop()
	}
	w.WriteHeader(http.StatusNoContent)
	r.mu.Lock()
	a.done, a.answeredOK = time.Now(), req.Context().Err() == nil
	r.mu.Unlock()
}

// sendsSlow reports whether the process pid is sending a delivery the
// receiver answers slowly, and will for a while.
func (r *whReceiver) sendsSlow(pid int) bool {
	ports := connPorts(pid, r.port())
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range r.eps {
		for _, a := range ep.arrivals {
			if a.slow && a.done.IsZero() && time.Since(a.at) < whSlow/2 && ports[a.port] {
				return true
			}
		}
	}
	return false
}

// sending reports whether the process pid has a delivery in flight.
func (r *whReceiver) sending(pid int) bool {
	r.mu.Lock()
	var open []int
	for _, ep := range r.eps {
		for _, a := range ep.arrivals[max(0, len(ep.arrivals)-8):] {
			if a.done.IsZero() {
				open = append(open, a.port)
			}
		}
	}
	r.mu.Unlock()
	if len(open) == 0 {
		return false
	}
	ports := connPorts(pid, r.port())
	for _, p := range open {
		if ports[p] {
			return true
		}
	}
	return false
}

func (r *whReceiver) port() int {
	_, p, _ := net.SplitHostPort(r.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// inFlightOf marks, before pid is killed, the events whose attempt it
// has in flight (cut: they may arrive again), and returns them with the
// local ports of its connections to the receiver, by which unrecorded
// later finds what it was answered.
func (r *whReceiver) inFlightOf(pid int) (ports map[int]bool, ids []string) {
	ports = connPorts(pid, r.port())
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, ep := range r.eps {
		for _, a := range ep.arrivals {
			if ports[a.port] && a.done.IsZero() {
				ep.cut[a.ev.ID] = true
				ep.inFlight++
				ids = append(ids, name+":"+a.ev.ID)
			}
		}
	}
	return ports, ids
}

// unrecorded marks, once the process that had ports is dead, the events
// it was answered 2xx whose success the store does not hold (succeeded:
// an endpoint's events recorded delivered, read after the kill): a node
// records a run of deliveries once its last attempt ends, so what a kill
// cut is every answer of its runs in flight, the first of which may have
// come seconds before (a slow attempt behind it); they are sent again
// once their lease ends. It returns them.
func (r *whReceiver) unrecorded(ports map[int]bool, succeeded map[string]map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for name, ep := range r.eps {
		for _, a := range ep.arrivals {
			if ports[a.port] && !a.done.IsZero() && !succeeded[name][a.ev.ID] && !ep.cut[a.ev.ID] {
				ep.cut[a.ev.ID] = true
				ids = append(ids, name+":"+a.ev.ID)
			}
		}
	}
	return ids
}

// wants reports whether the endpoint gets events of type typ.
func (ep *whEndpoint) wants(typ instore.EventType) bool {
	return ep.types == nil || slices.Contains(ep.types, typ)
}

// firsts is the endpoint's events in the order of their first arrival,
// and how many arrivals repeated an event.
func (ep *whEndpoint) firsts() (first []instore.EventWire, again map[string]int) {
	seen := map[string]bool{}
	again = map[string]int{}
	for _, a := range ep.arrivals {
		if seen[a.ev.ID] {
			again[a.ev.ID]++
			continue
		}
		seen[a.ev.ID] = true
		first = append(first, a.ev)
	}
	return first, again
}

// complete reports whether every endpoint got every event of want it
// wants.
func (r *whReceiver) complete(want []instore.EventWire) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range r.eps {
		first, _ := ep.firsts()
		n := 0
		for _, ev := range want {
			if ep.wants(ev.Type) {
				n++
			}
		}
		if len(first) < n {
			return false
		}
	}
	return true
}

// check compares what each endpoint got with the list.
func (r *whReceiver) check(t *testing.T, want []instore.EventWire) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range []string{"all", "some"} {
		ep := r.eps[name]
		var exp []instore.EventWire
		for _, ev := range want {
			if ep.wants(ev.Type) {
				exp = append(exp, ev)
			}
		}
		first, again := ep.firsts()
		if ep.badSigs != 0 {
			t.Errorf("endpoint %s: %d deliveries failed verification", name, ep.badSigs)
		}
		if len(first) != len(exp) {
			t.Errorf("endpoint %s: %d events arrived, the list has %d for it", name, len(first), len(exp))
		}
		for i := range min(len(first), len(exp)) {
			if first[i].ID != exp[i].ID || first[i].Type != exp[i].Type || !bytes.Equal(first[i].Data, exp[i].Data) {
				t.Errorf("endpoint %s: arrival %d is %s %s, the list's is %s %s", name, i, first[i].ID, first[i].Type, exp[i].ID, exp[i].Type)
				break
			}
		}
		dups := 0
		for id, n := range again {
			dups += n
			if !ep.cut[id] {
				t.Errorf("endpoint %s: event %s arrived %d times, and no kill cut an attempt to send it", name, id, n+1)
			}
		}
		slow := 0
		for _, a := range ep.arrivals {
			if a.slow {
				slow++
			}
		}
		t.Logf("endpoint %s: %d events in the list's order (%d requests verified; %d answered 503, %d slowly); attempts cut by a kill: %d in flight, %d answered and not recorded before it; %d events arrived again",
			name, len(first), ep.requests, ep.failed, slow, ep.inFlight, len(ep.cut)-ep.inFlight, dups)
	}
}

// connPorts returns the local ports of pid's TCP connections to remote
// port.
func connPorts(pid, remote int) map[int]bool {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	out := map[int]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 10 && inodes[fs[9]] && hexPort(fs[2]) == remote {
				out[hexPort(fs[1])] = true
			}
		}
	}
	return out
}

// hexPort is the port of an address of /proc/net/tcp (ADDR:PORT in hex).
func hexPort(s string) int {
	_, p, ok := strings.Cut(s, ":")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(p, 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

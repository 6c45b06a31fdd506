// The sandbox console: a page where an integrator sees the virtual
// terminals as small device screens, acts as the cardholder or the shop,
// and follows transactions, print jobs, terminals and webhook deliveries
// live. Everything that is an Online API resource the page reads from the
// Online API itself (GET /in-store/api/v1/events as server-sent events, the
// lists, the webhooks' deliveries); the console's own stream
// (/console/events) carries only what no API shows: the virtual devices'
// screens and state. It is served from embedded files (no Node toolchain)
// in sandbox and demo mode only.

package sandbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sim"
)

//go:embed static
var staticFS embed.FS

// Credentials pre-fill the page's connection form (the demo's own sandbox
// credentials); empty in `serve --sandbox`, where a person pastes theirs.
type Credentials struct {
	SubscriptionKey string `json:"subscriptionKey"`
	AccessToken     string `json:"accessToken"`
}

// ConsoleConfig holds what the console needs.
type ConsoleConfig struct {
	API     *httpapi.API
	Guard   *httpapi.Guard
	Service *service.Service
	Store   instore.Store
	Fleet   *sim.Fleet
	// Defaults, if set, returns credentials offered to the page (demo only).
	Defaults func() *Credentials
}

// Console serves the page and its event stream.
type Console struct {
	cfg ConsoleConfig
	hub *hub
}

// RegisterConsole adds /console and its API to cfg.API and starts
// following the service's and the virtual terminals' changes.
func RegisterConsole(cfg ConsoleConfig) *Console {
	c := &Console{cfg: cfg, hub: newHub()}
	sub, _ := fs.Sub(staticFS, "static")
	files := http.FileServer(http.FS(sub))
	cfg.API.Handle("GET /console", func(w http.ResponseWriter, r *http.Request) error {
		b, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			return err
		}
		h := noStore(w, "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
		return nil
	})
	static := http.StripPrefix("/console/static/", files)
	cfg.API.Handle("GET /console/static/", func(w http.ResponseWriter, r *http.Request) error {
		// A name that is no file's (the directory; bytes that are not
		// UTF-8, which the file server answers 500) is a 404 problem, as
		// every other route's.
		name := strings.TrimPrefix(r.URL.Path, "/console/static/")
		if !fs.ValidPath(name) { // UTF-8 included
			return instore.Errorf(instore.ENotFound, "No such resource.")
		}
		if st, err := fs.Stat(sub, name); err != nil || st.IsDir() {
			return instore.Errorf(instore.ENotFound, "No such resource.")
		}
		static.ServeHTTP(w, r)
		return nil
	})
	cfg.API.Handle("GET /console/defaults", func(w http.ResponseWriter, r *http.Request) error {
		noStore(w, "")
		if !fromLoopback(r) {
			return instore.Errorf(instore.EForbidden, "The demo's credentials are offered only to a browser on the machine that runs it; enter your subscription key and access token.")
		}
		d := &Credentials{}
		if cfg.Defaults != nil {
			if c := cfg.Defaults(); c != nil {
				d = c
			}
		}
		return httpapi.WriteJSON(w, http.StatusOK, d)
	})
	cfg.API.Handle("GET /console/events", cfg.Guard.Wrap(c.events))
	cfg.API.Handle("POST /console/devices/{serialNumber}/{action}", cfg.Guard.Wrap(c.action))

	cfg.Fleet.OnChange(func(t *sim.Terminal) { c.hub.publish(c.device(t)) })
	return c
}

// noStore forbids caching the response (Cache-Control: no-store) and sets
// its Content-Type to contentType unless it is "" (set later); it returns
// the header for the rest.
func noStore(w http.ResponseWriter, contentType string) http.Header {
	h := w.Header()
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Cache-Control", "no-store")
	return h
}

// consoleDevice is a virtual device as the console shows it: the sandbox's
// view plus whether it waits for a person, the outcome and print status
// set for its next transaction and print job (null when none), and the
// state's version, by which the page keeps the newer of two states (a
// click's answer can arrive after the event of a later change).
type consoleDevice struct {
	DeviceJSON
	Interactive bool                       `json:"interactive"`
	NextOutcome *instore.TransactionStatus `json:"nextOutcome"`
	NextPrint   *instore.PrintStatus       `json:"nextPrint"`
	NextTip     *int64                     `json:"nextTip"`
	TipPrompt   *sim.TipPrompt             `json:"tipPrompt"`
	Deciding    string                     `json:"deciding"`
	Version     uint64                     `json:"version"`
}

func (c *Console) device(t *sim.Terminal) *consoleDevice { return deviceOf(t.State()) }

func deviceOf(st sim.State) *consoleDevice {
	return &consoleDevice{DeviceJSON: DeviceState(st), Interactive: st.Interactive,
		NextOutcome: st.NextOutcome, NextPrint: st.NextPrint, NextTip: st.NextTip, TipPrompt: st.TipPrompt, Deciding: st.Deciding, Version: st.Version}
}

// visibleDevices lists the devices a customer may see, as the console
// shows them.
func (c *Console) visibleDevices(ctx context.Context, customerID string) ([]*consoleDevice, error) {
	ds, err := VisibleDevices(ctx, c.cfg.Store, c.cfg.Fleet, customerID)
	if err != nil {
		return nil, err
	}
	out := make([]*consoleDevice, 0, len(ds))
	for _, d := range ds {
		if t, ok := c.cfg.Fleet.Get(d.SerialNumber); ok {
			out = append(out, c.device(t))
		}
	}
	return out, nil
}

// events streams the virtual devices to one page as server-sent events: a
// snapshot first (the visible devices, the currencies' decimals), then
// every change of a device. Transactions, print jobs and terminals are not
// here: the page follows them on the Online API's own stream (GET
// /in-store/api/v1/events). A reconnecting page gets a new snapshot.
func (c *Console) events(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if _, err := c.cfg.Service.ActiveMerchant(r.Context(), p); err != nil {
		return err
	}
	httpapi.Waiting(w, httpapi.WaitStream)
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout.
	rc.SetWriteDeadline(time.Time{})
	sub := c.hub.subscribe()
	defer c.hub.unsubscribe(sub)

	devices, err := c.visibleDevices(r.Context(), p.CustomerID)
	if err != nil {
		return err
	}
	noStore(w, "text/event-stream").Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	visible := map[string]bool{}
	for _, d := range devices {
		visible[d.SerialNumber] = true
	}
	if err := sse(w, "snapshot", map[string]any{"devices": devices, "currencyDigits": currencyDigits()}); err != nil {
		return nil
	}
	rc.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-sub.gone:
			return nil // too slow: dropped; the page reconnects and catches up
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return nil
			}
		case d := <-sub.ch:
			if !visible[d.SerialNumber] {
				// A device becomes visible when linked to this customer.
				if ds, err := VisibleDevices(r.Context(), c.cfg.Store, c.cfg.Fleet, p.CustomerID); err == nil {
					for _, d := range ds {
						visible[d.SerialNumber] = true
					}
				}
				if !visible[d.SerialNumber] {
					continue
				}
			}
			if err := sse(w, "device", d); err != nil {
				return nil
			}
		}
		rc.Flush()
	}
}

func sse(w http.ResponseWriter, kind string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, b)
	return err
}

// Actions a person can take on a virtual terminal from the console.
var outcomeActions = map[string]instore.TransactionStatus{
	"approve":          instore.StatusApproved,
	"decline":          instore.StatusTransactionDeclined,
	"wrong-pin":        instore.StatusWrongPIN,
	"cardholder-abort": instore.StatusAbortedByCardholder,
	"cancel":           instore.StatusAbortedByCashier,
}

var printerActions = map[string]instore.PrintStatus{
	"out-of-paper": instore.PrintOutOfPaper,
	"low-battery":  instore.PrintLowBattery,
}

// action acts on a virtual device the caller may see: outcomes decide the
// transaction a waiting (interactive) terminal shows, or the next one;
// offline/online take it off and back; printer actions set the next print.
func (c *Console) action(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if _, err := c.cfg.Service.ActiveMerchant(r.Context(), p); err != nil {
		return err
	}
	serial, action := r.PathValue("serialNumber"), r.PathValue("action")
	devices, err := VisibleDevices(r.Context(), c.cfg.Store, c.cfg.Fleet, p.CustomerID)
	if err != nil {
		return err
	}
	var t *sim.Terminal
	for _, d := range devices {
		if d.SerialNumber == serial {
			t, _ = c.cfg.Fleet.Get(serial)
		}
	}
	if t == nil {
		return instore.Errorf(instore.ENotFound, "No virtual terminal with this serial number.")
	}
	switch {
	case action == "offline", action == "online":
		return httpapi.WriteJSON(w, http.StatusOK, deviceOf(SwitchOnline(r.Context(), c.cfg.Service, t, action == "online")))
	case action == "card-network-down", action == "card-network-up", action == "next-forward-declined":
		networkAction(t, action) // network.go
	case action == "interactive-on", action == "interactive-off":
		t.SetInteractive(action == "interactive-on")
	case action == "tip":
		// The cardholder's answer to the tip prompt of the transaction
		// it names (?onlineAPIRefId=...&tipAmount=150; 0: no tip), only
		// while that prompt waits: a second click, or one after the
		// sale moved on, is refused, never kept for the next sale.
		q := r.URL.Query()
		tip, err := strconv.ParseInt(q.Get("tipAmount"), 10, 64)
		if err != nil || tip < 0 || tip > instore.MaxAmount {
			return instore.Errorf(instore.EValidation, "tipAmount must be the tip in minor units, from 0 to %d.", instore.MaxAmount)
		}
		if !instore.ValidRef(q.Get("onlineAPIRefId")) {
			return instore.Errorf(instore.EValidation, "onlineAPIRefId must name the transaction whose tip prompt this answers.")
		}
		if err := t.AnswerTip(q.Get("onlineAPIRefId"), tip); err != nil {
			return instore.Errorf(instore.EConflict, "This tip prompt no longer waits for an answer: it was answered already, or its transaction moved on.")
		}
	default:
		if st, ok := outcomeActions[action]; ok {
			if ref := r.URL.Query().Get("onlineAPIRefId"); ref != "" {
				// A click on the transaction the screen showed waiting
				// (?onlineAPIRefId=...): that one only. A second click, or
				// one after it ended, is refused, never the next sale's.
				if err := t.DecideRef(ref, st); err != nil {
					return instore.Errorf(instore.EConflict, "This transaction no longer waits for an outcome: it was decided already, or it ended.")
				}
				break
			}
			if err := t.Decide(st); errors.Is(err, sim.ErrNothingToDecide) {
				if err := t.SetNextOutcome(st); err != nil {
					return instore.Errorf(instore.EValidation, "%s", err.Error())
				}
			} else if err != nil {
				return instore.Errorf(instore.EConflict, "%s", err.Error())
			}
		} else if st, ok := printerActions[action]; ok {
			t.SetNextPrint(st)
		} else {
			return instore.Errorf(instore.ENotFound, "Unknown action.")
		}
	}
	return httpapi.WriteJSON(w, http.StatusOK, c.device(t))
}

// fromLoopback reports whether r comes straight from a browser on this
// machine: the peer address is a loopback address, the Host names a
// loopback address or localhost (not a name another site rebound to
// 127.0.0.1, which would let its pages read the answer), and no proxy's
// forwarding header is present (a proxy on this machine would make every
// client look local).
func fromLoopback(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !peer.Addr().Unmap().IsLoopback() {
		return false
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// hub fans the virtual devices' changes out to the subscribed pages. A
// page that cannot keep up is dropped, never allowed to block a device.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]bool
}

type subscriber struct {
	ch   chan *consoleDevice
	gone chan struct{}
}

func newHub() *hub { return &hub{subs: map[*subscriber]bool{}} }

func (h *hub) subscribe() *subscriber {
	s := &subscriber{ch: make(chan *consoleDevice, 256), gone: make(chan struct{})}
	h.mu.Lock()
	h.subs[s] = true
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	if h.subs[s] {
		delete(h.subs, s)
		close(s.gone)
	}
	h.mu.Unlock()
}

func (h *hub) publish(d *consoleDevice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- d:
		default:
			delete(h.subs, s)
			close(s.gone)
		}
	}
}

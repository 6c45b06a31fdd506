package simulation

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/onlineapi"
	"github.com/instore-dev/instore/internal/service"
)

// node is one incarnation of a process of the service: a real
// service.Service and the real Online API handler over the world's store.
// A crash ends the incarnation (its timers, sessions and tasks die with
// it); a restart makes a new one in the same slot, which runs Recover.
type node struct {
	w        *world
	slot     int
	name     string
	up       bool
	svc      *service.Service
	handler  http.Handler
	sessions map[string]*session // serial number → the session held here
}

// start makes a new incarnation of slot and recovers it.
func (w *world) start(slot int) *node {
	w.incarnations++
	n := &node{w: w, slot: slot, name: fmt.Sprintf("n%d.%d", slot, w.incarnations), up: true, sessions: map[string]*session{}}
	meta := instore.DefaultMetadata()
	c := clock{s: w.sched, n: n}
	svc := &service.Service{
		Store: &store{Store: w.db, n: n}, Gateway: gateway{n}, Metadata: &meta, Logger: n.logger(),
		SecretMatches: auth.Matches, NewRef: w.ids.next("txn"), NewPrintID: w.ids.next("prt"), Clock: c,
		AckTimeout: ackTimeout, Deadline: deadline, PrintTimeout: 30 * time.Second,
		PreAuthValidity: w.validity, CaptureTolerance: captureTolerance,
		Shared: w.nodes > 1, Rand: w.ids.reader(), Go: func(f func()) { w.sched.spawn(n, "spawned", f) },
		WebhookAllowHTTP: true, WebhookAllowPrivate: true,
	}
	var authn *auth.Authenticator
	n.handler, authn = onlineHandler(svc, holders{n})
	n.svc = svc
	if w.token == "" {
		var err error
		if w.token, _, err = authn.Mint(w.client, 24*time.Hour); err != nil {
			panic(err)
		}
	}
	w.sched.spawn(n, "recover", func() { _ = svc.Recover(context.Background()) })
	n.every(sweepEvery, "sweep", func() { svc.Sweep(context.Background()) })
	n.every(time.Second, "sequence", func() { _ = svc.SequenceEvents(context.Background()) })
	disp := n.dispatcher()
	n.every(dispatchEvery, "webhooks", func() { disp.Round(context.Background()) })
	if w.nodes > 1 {
		n.every(rescanEvery, "rescan", n.rescan)
	}
	return n
}

// onlineHandler is the real Online API handler over svc, and its
// authenticator.
func onlineHandler(svc *service.Service, h httpapi.Holders) (http.Handler, *auth.Authenticator) {
	authn, err := auth.New(auth.Config{Store: svc.Store, SigningKey: signingKey, TokenTTL: 24 * time.Hour, Clock: svc.Clock, SeparateReads: true})
	if err != nil {
		panic(err)
	}
	a := httpapi.NewAPI("online", svc.Logger, svc.Metadata, nil)
	onlineapi.Register(onlineapi.Config{
		API: a, Guard: &httpapi.Guard{Auth: authn, Surface: instore.SurfaceOnline}, Metadata: svc.Metadata,
		Service: svc, Store: svc.Store, OpenAPI: api.OnlineYAML, Logger: svc.Logger, IdempotencyHolders: h,
	})
	return a, authn
}

// every runs f as a task of n every interval while n is up, one at a
// time.
func (n *node) every(interval time.Duration, name string, f func()) {
	var tick func()
	tick = func() {
		if !n.up {
			return
		}
		n.w.sched.spawn(n, name, func() {
			f()
			n.w.sched.after(interval, name+" "+n.name, tick)
		})
	}
	n.w.sched.after(interval, name+" "+n.name, tick)
}

// rescan wakes every device with a session here: what another node
// committed for it is sent even if its wake-up was lost (as
// internal/cluster's rescan does).
func (n *node) rescan() {
	for _, serial := range sortedKeys(n.sessions) {
		if s := n.sessions[serial]; s.open && s.ready {
			_ = n.svc.DeviceWoken(context.Background(), serial)
		}
	}
}

// crash ends the incarnation at once: its sessions break, its timers and
// tasks die (their store calls answer errCrashed), and it restarts after
// a while.
func (n *node) crash(why string) {
	if !n.up {
		return
	}
	n.up = false
	n.w.note("crash %s %s", n.name, why)
	n.w.crashes++
	n.w.lastCrash = n.w.sched.now
	for _, serial := range sortedKeys(n.sessions) {
		n.sessions[serial].cut()
	}
	n.w.sched.after(n.w.faults.downtime(), "restart", func() { n.w.nodeAt[n.slot] = n.w.start(n.slot) })
}

// holders tells the idempotency middleware which nodes are alive (as
// internal/cluster's heartbeats do).
type holders struct{ n *node }

func (h holders) Self() string { return h.n.name }
func (h holders) Alive(_ context.Context, id string) bool {
	for _, o := range h.n.w.nodeAt {
		if o.name == id {
			return o.up
		}
	}
	return false
}

// gateway is a node's instore.Gateway: a device's session on this node
// takes the message; a session on another live node is woken to send
// from the store what was committed (internal/cluster's rule); otherwise
// the device is offline.
type gateway struct{ n *node }

func (g gateway) local(serial string) *session {
	if !g.n.up {
		return nil
	}
	if s := g.n.sessions[serial]; s != nil && s.open {
		return s
	}
	return nil
}

// remote is the live node holding serial's current session, if another.
func (g gateway) remote(serial string) *node {
	if g.n.w.nodes == 1 || !g.n.up {
		return nil
	}
	if s := g.n.w.current[serial]; s != nil && s.open && s.node != g.n && s.node.up {
		return s.node
	}
	return nil
}

func (g gateway) Online(serial string) bool { return g.local(serial) != nil || g.remote(serial) != nil }

func (g gateway) Ready(serial string) bool {
	if s := g.local(serial); s != nil {
		return s.ready
	}
	return g.remote(serial) != nil
}

func (g gateway) send(serial string, m msg) error {
	// A send is a write on a connection: another task may run first.
	g.n.w.sched.yield()
	if d := g.n.w.device(serial); d != nil && m.kind == mPayment {
		// The device's link as the command goes (relink.go): what the
		// command is checked against when it arrives.
		m.linked = d.terminalID
	}
	if s := g.local(serial); s != nil {
		s.toDevice(m)
		return nil
	}
	if o := g.remote(serial); o != nil {
		g.n.w.wake(o, serial)
		return nil
	}
	return instore.ErrOffline
}

func (g gateway) SendPayment(_ context.Context, serial string, t *instore.Transaction) error {
	cp := *t
	return g.send(serial, msg{kind: mPayment, ref: t.ID, tx: &cp})
}

func (g gateway) SendCancel(_ context.Context, serial, id, ref, reason string) error {
	return g.send(serial, msg{kind: mCancel, id: id, ref: ref, reason: reason})
}

func (g gateway) SendReversal(_ context.Context, serial, id, ref, reason string) error {
	return g.send(serial, msg{kind: mReversal, id: id, ref: ref, reason: reason})
}

func (g gateway) SendPrint(_ context.Context, serial, id, printID string, _ []string) error {
	return g.send(serial, msg{kind: mPrint, id: id, ref: printID})
}

func (g gateway) SendLinked(context.Context, string, string) error { return nil }

func (g gateway) SendUpdate(context.Context, string, *instore.Update, *instore.Package) error {
	return instore.ErrOffline
}

// wake tells node o, a little later, that something was committed for
// serial (the NOTIFY of internal/cluster); the wake-up may be lost, and
// o's rescan then finds it.
func (w *world) wake(o *node, serial string) {
	if w.faults.lose() {
		return
	}
	w.sched.after(w.faults.delay(), "wake", func() {
		if s := o.sessions[serial]; o.up && s != nil && s.open && s.ready {
			w.sched.spawn(o, "woken", func() { _ = o.svc.DeviceWoken(context.Background(), serial) })
		}
	})
}

// logger writes what a node logs at warning level and above into the
// trace (the trace is the history's log).
func (n *node) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(traceWriter{n}, &slog.HandlerOptions{Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			// The endpoint's id is the template's, drawn by the service
			// outside the seed.
			if a.Key == slog.TimeKey || a.Key == "requestId" || a.Key == "durationUs" || a.Key == "bytes" || a.Key == "webhookId" {
				return slog.Attr{}
			}
			return a
		}}))
}

type traceWriter struct{ n *node }

func (t traceWriter) Write(p []byte) (int, error) {
	t.n.w.note("log %s %s", t.n.name, strings.TrimSpace(string(p)))
	return len(p), nil
}

// Package simulation runs the whole service in a deterministic world
// driven by one seed: the real lifecycles, the real Service and the real
// Online API handler, on the real store (SQLite), with simulated ECRs,
// terminals, network and crashes. Invariants are checked after every
// step; a failing history is replayed bit for bit from its seed
// (docs/testing.md).
package simulation

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/wallclock"
)

// The service's time-outs in the world, and the grace within which a
// PENDING transaction must be final after them: the longest a node stays
// down, its sweep, a few message delays.
const (
	ackTimeout  = 10 * time.Second
	deadline    = 60 * time.Second
	sweepEvery  = 5 * time.Second
	rescanEvery = 5 * time.Second
	maxDowntime = 20 * time.Second
	grace       = maxDowntime + 2*sweepEvery + 10*time.Second
	// quietFor is how long the world runs after its storm: every deadline,
	// confirmation window and reconnect passes.
	quietFor = 5 * time.Minute
	// inFlightFor is run after the wait for the expiries at the end of a
	// history: longer than a link's delay and a terminal's resend of an
	// unconfirmed result.
	inFlightFor = time.Minute
	// captureTolerance is the service's capture tolerance in the world;
	// expiryGrace is how long past its expiresAt an OPEN pre-auth may take
	// to end EXPIRED once the world is calm (the expiry's VOID retried
	// through a terminal's failures).
	captureTolerance = instore.DefaultCaptureTolerance
	expiryGrace      = 5 * time.Minute
)

// Config is one history.
type Config struct {
	Seed uint64
	// Steps bounds the stormy part of the history (default 2000).
	Steps int
	// Dir is where its SQLite database goes (a temporary directory).
	Dir string
	// Template is a migrated, seeded database to copy (Prepare); "" makes one.
	Template *Template
}

// Result is what a history did.
type Result struct {
	Seed  uint64
	Steps int
	// Hash is the SHA-256 of the trace: two runs of a seed give the same.
	Hash  string
	Trace []string
	// Failure is the first invariant broken, nil if none.
	Failure *Failure
	Crashes int
	Sales   int
	// Relinks is how many relinks the operator finished (relink.go),
	// Lapses how many pre-auths were seen lapsed.
	Relinks, Lapses int
}

// Failure is a broken invariant.
type Failure struct {
	Step      int
	Invariant string
	Detail    string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("step %d: invariant %q broken: %s", f.Step, f.Invariant, f.Detail)
}

// world is everything one history holds.
type world struct {
	sched        *sched
	faults       *faults
	ecrRng       *rand.Rand
	ids          *ids
	db           *sqlstore.DB
	nodes        int
	nodeAt       []*node
	incarnations int
	devices      []*device
	ecrs         []*ecr
	current      map[string]*session // serial → its current session (the newest epoch)
	sessions     int
	resultIDs    int
	forwards     int                                // forwarded reports made (their ids)
	toldFwd      map[string]instore.ForwardingState // forwarding states the ECRs were told (offline.go)
	ledger       *ledger
	closes       *closes  // day closes (close.go)
	relinks      *relinks // the operator's relinks, and the links (relink.go)
	keyRef       map[string]string
	confirmed    map[string]bool  // sales whose confirm the ECR was answered 2xx
	payback      float64          // how often an ECR acts on a sale rather than selling (drawn per seed)
	sales        map[string]*sale // what the ECRs know of the transactions they created, by ref
	validity     time.Duration    // how long a pre-auth stays OPEN (drawn per seed, short: expiries happen)
	told         *told            // what the ECRs were told of pre-auths (preauth_check.go)
	versions     map[string]int64
	lastTxs      map[string]*instore.Transaction
	quiet        bool
	crashes      int
	lastCrash    time.Time
	nextDue      time.Time // the earliest time a check must run even without a write

	merchantID      string
	eventsBefore    int64 // the template's last event: those after it are owed to the endpoints
	receivers       receivers
	concurrency     int // the lanes endpoint's (drawn per seed)
	client          *instore.APIClient
	token           string
	subscriptionKey string

	writes, checkedWrites int
	step                  int
	trace                 []string
	hash                  io.Writer
	failure               *Failure
}

// note adds a line to the trace.
func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf("%d %s ", w.step, w.sched.now.Sub(epoch)) + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	io.WriteString(w.hash, line+"\n")
}

// fail records the first broken invariant.
func (w *world) fail(invariant, format string, args ...any) {
	if w.failure != nil {
		return
	}
	w.failure = &Failure{Step: w.step, Invariant: invariant, Detail: fmt.Sprintf(format, args...)}
	w.note("FAIL %s: %s", invariant, w.failure.Detail)
}

// pickNode is the node the load balancer gives a request: a live one.
func (w *world) pickNode() *node {
	var up []*node
	for _, n := range w.nodeAt {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[w.faults.rng.IntN(len(up))]
}

// Run runs the history of cfg.Seed.
func Run(cfg Config) (res *Result, err error) {
	if cfg.Steps == 0 {
		cfg.Steps = 2000
	}
	tpl := cfg.Template
	if tpl == nil {
		if tpl, err = Prepare(cfg.Dir); err != nil {
			return nil, err
		}
	}
	w, err := newWorld(cfg, tpl)
	if err != nil {
		return nil, err
	}
	defer w.db.Close()
	for i := range w.nodes {
		w.nodeAt = append(w.nodeAt, w.start(i))
	}
	for _, d := range w.devices {
		d.connect()
		d.planOutages()
	}
	for _, e := range w.ecrs {
		w.sched.after(time.Duration(w.ecrRng.IntN(3000))*time.Millisecond, "ecr "+e.name, e.act)
		w.sched.after(w.closes.every/2+time.Duration(w.closes.rng.Int64N(int64(w.closes.every))), "close "+e.name, e.closeLoop)
	}
	if r := w.relinks; r.every > 0 {
		w.sched.after(5*time.Second+time.Duration(r.rng.Int64N(int64(r.every))), "operator", w.operate)
	}
	for ; w.step < cfg.Steps && w.failure == nil; w.step++ {
		if !w.sched.step() {
			break
		}
		w.check()
	}
	if w.failure == nil {
		w.calm()
		w.runUntil(w.sched.now.Add(quietFor))
		w.awaitExpiries()
		// What the expiries' wait may have left in flight (a confirm of
		// the result that ended the last pre-auth, on a link with its
		// delay) lands before the checks; the events of that minute are
		// delivered by the wait for the deliveries, after it.
		w.runUntil(w.sched.now.Add(inFlightFor))
		w.awaitDeliveries()
		if w.failure == nil {
			w.note("settled")
			w.settled()
		}
	}
	res = &Result{Seed: cfg.Seed, Steps: w.step, Trace: w.trace, Failure: w.failure, Crashes: w.crashes, Sales: len(w.keyRef),
		Relinks: w.relinks.done, Lapses: len(w.relinks.lapsed)}
	res.Hash = hex.EncodeToString(w.hash.(interface{ Sum([]byte) []byte }).Sum(nil))
	return res, nil
}

// runUntil runs the world, checking it, until end (or a failure, or
// nothing left to do).
func (w *world) runUntil(end time.Time) {
	for w.failure == nil && w.sched.now.Before(end) && w.sched.step() {
		w.step++
		w.check()
	}
}

// calm ends the storm: no more faults or ECR moves; every node comes up,
// every device connects.
func (w *world) calm() {
	w.note("calm")
	w.quiet = true
	w.faults.calm()
	for _, d := range w.devices {
		if d.sess == nil {
			w.sched.after(time.Second, "reconnect "+d.serial, d.connect)
		}
		d.networkUp()
	}
}

// Template is a migrated database with one merchant, its terminals, an
// API client and two webhook endpoints, copied for each history.
type Template struct {
	path            string
	merchantID      string
	client          *instore.APIClient
	subscriptionKey string
	terminals       []string // terminal ID and serial number pairs
	webhookID       string   // the endpoint in order per endpoint
	webhookSecret   string
	lanesID         string // the endpoint in lanes, in order per terminal
	lanesSecret     string
	eventsBefore    int64 // the last event before the endpoints: those after it are owed to them
}

var prepareMu sync.Mutex

// signingKey signs the API's tokens.
var signingKey = []byte(strings.Repeat("k", 32))

// Prepare makes a Template in dir.
func Prepare(dir string) (*Template, error) {
	prepareMu.Lock()
	defer prepareMu.Unlock()
	ctx := context.Background()
	path := filepath.Join(dir, "template.db")
	db, err := sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ad := admin.New(db)
	// What the admin stamps (the terminal IDs' creation: their first
	// batch's window opens there) is before the world's epoch.
	ad.Clock = beforeEpoch{wallclock.Clock{}}
	shop, err := ad.CreateShop(ctx, "sim", "shop", "ecr")
	if err != nil {
		return nil, err
	}
	cus, mer := shop.Customer, shop.Merchant
	tpl := &Template{path: path, merchantID: mer.ID, client: shop.Online.Client, subscriptionKey: shop.Online.Key}
	ts, err := ad.AllocateTerminals(ctx, mer.ID, 3)
	if err != nil {
		return nil, err
	}
	for i, t := range ts {
		serial := fmt.Sprintf("SIM-%d", i+1)
		if _, _, err := ad.CreateDevice(ctx, serial, instore.ModelCountertop, cus.ID); err != nil {
			return nil, err
		}
		if _, _, err := db.LinkTerminal(ctx, t.TerminalID, serial, epoch); err != nil {
			return nil, err
		}
		tpl.terminals = append(tpl.terminals, t.TerminalID, serial)
	}
	// The spare device, linked to nothing (relink.go), without a link
	// code: the service gives it one from the seed at its first hello.
	if _, _, err := ad.CreateDevice(ctx, spareSerial, instore.ModelCountertop, cus.ID); err != nil {
		return nil, err
	}
	if _, err := db.SequenceEvents(ctx, 1000); err != nil {
		return nil, err
	}
	evs, err := db.ListEvents(ctx, instore.EventFilter{MerchantID: mer.ID, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		tpl.eventsBefore = evs[len(evs)-1].Seq
	}
	if err := registerWebhooks(ctx, db, tpl); err != nil {
		return nil, err
	}
	return tpl, nil
}

func newWorld(cfg Config, tpl *Template) (*world, error) {
	dir := cfg.Dir
	if dir == "" {
		dir = filepath.Dir(tpl.path)
	}
	path := filepath.Join(dir, fmt.Sprintf("h%d.db", cfg.Seed))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	b, err := os.ReadFile(tpl.path)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	db, err := sqlstore.Open(context.Background(), path, sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	f := newFaults(cfg.Seed)
	w := &world{
		sched: newSched(cfg.Seed), faults: f, ecrRng: rand.New(rand.NewChaCha8(seedBytes(cfg.Seed, "ecr"))),
		ids: &ids{rng: rand.New(rand.NewChaCha8(seedBytes(cfg.Seed, "ids")))}, db: db, nodes: f.nodes,
		current: map[string]*session{}, keyRef: map[string]string{}, confirmed: map[string]bool{}, sales: map[string]*sale{}, versions: map[string]int64{},
		toldFwd:    map[string]instore.ForwardingState{},
		merchantID: tpl.merchantID, eventsBefore: tpl.eventsBefore,
		client: tpl.client, subscriptionKey: tpl.subscriptionKey, hash: sha256.New(),
	}
	w.closes = newCloses(cfg.Seed)
	w.receivers = receivers{newReceiver(w, receiverURL, tpl.webhookID, tpl.webhookSecret, false),
		newReceiver(w, lanesURL, tpl.lanesID, tpl.lanesSecret, true)}
	if w.concurrency, err = setConcurrency(context.Background(), db, tpl, cfg.Seed); err != nil {
		db.Close()
		return nil, err
	}
	w.ledger = &ledger{w: w, auths: map[string]int{}, amount: map[string]int64{}, cashback: map[string]int64{}, byKey: map[string]string{}, refunded: map[string]int64{},
		refunds: map[string]bool{}, refundOf: map[string]refund{}, reversed: map[string]bool{},
		preauths: map[string]bool{}, ops: map[string]*cardOp{}, holdOps: map[string][]*cardOp{}, offline: map[string]instore.ForwardingState{},
		by: map[string]string{}}
	w.told = &told{end: map[string]*sale{}, state: map[string]instore.AuthorizationState{}, refunded: map[string]int64{}}
	w.sched.stepHook = func(kind, name string) { w.note("%s %s", kind, name) }
	for i := 0; i < len(tpl.terminals); i += 2 {
		d := w.newDevice(tpl.terminals[i+1], tpl.terminals[i])
		w.devices = append(w.devices, d)
		w.ecrs = append(w.ecrs, &ecr{w: w, name: fmt.Sprintf("ecr%d", i/2+1), terminalID: d.terminalID})
	}
	if w.relinks = newRelinks(cfg.Seed, tpl.terminals); w.relinks.every > 0 {
		w.devices = append(w.devices, w.newDevice(spareSerial, ""))
	}
	w.payback = 0.3 + 0.5*w.ecrRng.Float64()
	w.validity = time.Duration(30+w.ecrRng.IntN(70)) * time.Second
	w.note("seed %d nodes %d faults %s payback %.2f validity %v %s lanes %d", cfg.Seed, w.nodes, f, w.payback, w.validity, w.closes, w.concurrency)
	if w.relinks.every > 0 {
		w.note("%s", w.relinks)
	}
	return w, nil
}

// newDevice is the simulated device serial, linked to terminalID ("":
// none).
func (w *world) newDevice(serial, terminalID string) *device {
	return &device{w: w, serial: serial, terminalID: terminalID, known: map[string]*dtx{}, cancelFirst: map[string]bool{},
		book: batchBook{answered: map[string]*batchAnswer{}}}
}

// beforeEpoch is the admin's clock: an hour before the world's epoch.
type beforeEpoch struct{ wallclock.Clock }

func (beforeEpoch) Now() time.Time { return epoch.Add(-time.Hour) }

// seedBytes derives the seed of one source of randomness.
func seedBytes(seed uint64, purpose string) [32]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	return sha256.Sum256(append(b[:], purpose...))
}

// ids makes the service's identifiers from the seed.
type ids struct {
	rng *rand.Rand
	n   int
}

func (g *ids) next(prefix string) func() string {
	return func() string {
		g.n++
		return fmt.Sprintf("%s_%08d", prefix, g.n)
	}
}

// reader is the service's randomness (instore ids' random parts).
func (g *ids) reader() io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		for i := range p {
			p[i] = byte(g.rng.Uint32())
		}
		return len(p), nil
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Package cluster makes `instore serve` one node of several sharing one
// PostgreSQL database (docs/operations.md and docs/architecture.md,
// "Several nodes"). Nothing a node holds is the only copy
// of a fact: every change is committed first, then the other nodes are
// woken, and they read the store.
//
//   - Wake-ups: after every commit of a transaction or print job change,
//     the node sends a NOTIFY (never inside the transaction: that takes a
//     global lock and halves the commit rate), batched; the receivers wake
//     their waits (the purchase's wait for the ack, `?wait=` long-polls, the
//     console), which read the store. A command, cancel, reversal, print or
//     link for a terminal whose session another node holds is committed and
//     then that node is woken; it sends the device what the store says it
//     is owed (service.Service.DeviceWoken), exactly what a hello sends.
//     Lost signals: after its LISTEN connection breaks, and every Rescan,
//     a node does it all again from the store.
//   - Ownership: the session of a terminal is a row (terminal_sessions)
//     naming its node and an epoch that grows at every (re)connect. A node
//     drops its session of a device that connected again elsewhere, and
//     refuses to record what a session whose epoch is stale reports (the
//     device resends it on its current session: it keeps every result until
//     it is confirmed).
//   - Liveness: every node beats (cluster_nodes) each Heartbeat; a node
//     that has not beaten for Dead is gone, and so are its sessions. A node
//     that cannot beat drops its own sessions, so that its devices go to a
//     node that can.
//   - Timers and effects: every node arms the time-outs the store implies
//     and sweeps; each expiry is a compare-and-set on the transaction's
//     version, so exactly one node's wins. Owed messages are sent only by
//     the node holding the device's session.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/batch"
	"github.com/instore-dev/instore/internal/service"
)

// Defaults of Config's intervals.
const (
	DefaultHeartbeat = time.Second
	DefaultDead      = 5 * time.Second
	DefaultRescan    = 5 * time.Second
)

// sessionConns bounds a node's connections for its sessions and wake-ups
// (besides the heartbeat's one and the listener's).
const sessionConns = 8

// gatherWindow is how long the sender gathers wake-ups into one NOTIFY.
const gatherWindow = 2 * time.Millisecond

// maxPayload bounds one NOTIFY's payload (PostgreSQL's limit is 8000
// bytes); a batch of wake-ups is split below it.
const maxPayload = 7000

// Local is the node's own terminal gateway (internal/gateway).
type Local interface {
	instore.Gateway
	// Drop closes the local session of serial: it has a newer one
	// elsewhere.
	Drop(serial string)
	// Serials lists the devices with a session on this node.
	Serials() []string
}

// Config holds what a node needs.
type Config struct {
	// DatabaseURL is the PostgreSQL URL the store uses.
	DatabaseURL string
	// NodeID names the node; a random one when empty.
	NodeID  string
	Service *service.Service
	Logger  *slog.Logger
	// Heartbeat, Dead and Rescan: how often the node beats, after how
	// long without a beat a node is gone, and how often it redoes from
	// the store what wake-ups may have missed.
	Heartbeat, Dead, Rescan time.Duration
}

// Node is this process's membership of the cluster. It is the Service's
// Gateway (Gateway) and the local gateway's TerminalEvents (Events).
type Node struct {
	cfg     Config
	id      string
	pool    *pgxpool.Pool
	beats   *pgxpool.Pool // the heartbeat's one connection
	channel string
	local   Local
	svc     *service.Service
	log     *slog.Logger

	mu     sync.Mutex
	epochs map[string]int64 // serial -> epoch of this node's session
	waking map[string]bool  // serial -> a wake-up runs (true: run again after)
	// since holds, per device with a session here, when its hello or its
	// last wake-up began sending it what it is owed: the rescan wakes it
	// only for what was committed after.
	since map[string]time.Time

	// claims gathers the session claims of concurrent hellos (a dead
	// node's fleet reconnecting here): one statement and one commit per
	// batch (claimAll).
	claims batch.Batcher[string, int64]

	outbox   chan string
	draining atomic.Bool
	// peers is how many other live nodes the last heartbeat saw: alone,
	// a node wakes nobody and checks no epoch (see alone).
	peers    atomic.Int64
	lastBeat atomic.Int64 // unix nanoseconds of the last successful beat
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   atomic.Bool
}

// channelName is the NOTIFY channel of a schema: notifications are
// database-wide, and tests run clusters in schemas of one database.
func channelName(schema string) string {
	clean := regexp.MustCompile(`[^a-z0-9_]`).ReplaceAllString(strings.ToLower(schema), "_")
	if len(clean) > 40 {
		clean = clean[:40]
	}
	return "instore_" + clean
}

// New connects the node to the database; Attach and Start complete it.
func New(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Dead <= 0 {
		cfg.Dead = DefaultDead
	}
	if cfg.Dead < 2*cfg.Heartbeat {
		return nil, fmt.Errorf("cluster: Dead (%s) must be at least twice Heartbeat (%s)", cfg.Dead, cfg.Heartbeat)
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = DefaultRescan
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	id := cfg.NodeID
	if strings.ContainsAny(id, "\n\r@") {
		return nil, errors.New("cluster: a node id has no line breaks and no @")
	}
	if id == "" {
		var b [6]byte
		rand.Read(b[:])
		id = "node_" + hex.EncodeToString(b[:])
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("cluster: invalid postgres URL (not repeated here: it may hold a password)")
	}
	// The heartbeat has a connection of its own: queued behind a
	// reconnect storm's session claims it would miss Dead, and the node
	// would drop every session it holds, which makes the next storm.
	bc := pc.Copy()
	bc.MaxConns = 1
	// Sessions (the claims of hellos, one statement per batch; a release
	// per end; the epoch and owner reads) and wake-ups: each a short
	// statement, a batch of claims and a release a commit of their own.
	pc.MaxConns = sessionConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect: %w", err)
	}
	beats, err := pgxpool.NewWithConfig(ctx, bc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("cluster: connect: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		beats.Close()
		return nil, fmt.Errorf("cluster: current schema: %w", err)
	}
	n := &Node{
		cfg: cfg, id: id, pool: pool, beats: beats, channel: channelName(schema), svc: cfg.Service,
		log: cfg.Logger.With("node", id), epochs: map[string]int64{}, waking: map[string]bool{}, since: map[string]time.Time{},
		outbox: make(chan string, 4096),
	}
	return n, nil
}

// Healthy reports whether the node's last heartbeat was written within
// Dead: the other nodes count it alive. A node that is not sends its
// terminals elsewhere, and should get no requests (/readyz).
func (n *Node) Healthy() bool {
	return time.Since(time.Unix(0, n.lastBeat.Load())) <= n.cfg.Dead
}

// ID returns the node's id.
func (n *Node) ID() string { return n.id }

// Start registers the node (its first beat), listens for the other
// nodes' wake-ups and starts beating and rescanning; local is the node's
// own gateway, whose events go through Events. The Service is told of
// every commit (OnCommit) to wake the others.
func (n *Node) Start(ctx context.Context, local Local) error {
	n.local = local
	if err := n.beat(ctx); err != nil {
		return fmt.Errorf("cluster: register node: %w", err)
	}
	n.svc.OnCommit(func(id string) {
		if !n.alone() {
			n.send("t", id)
		}
	})
	// Events told here: the other nodes' streams show them at once (the
	// horizon told, which holds for every node).
	n.svc.OnEventsSequenced(func() {
		if !n.alone() {
			n.send("e", strconv.FormatInt(n.svc.EventsTold(), 10))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	listening := make(chan struct{})
	n.wg.Add(3)
	go func() { defer n.wg.Done(); n.listen(ctx, listening) }()
	go func() { defer n.wg.Done(); n.sender(ctx) }()
	go func() { defer n.wg.Done(); n.beating(ctx) }()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		return errors.New("cluster: LISTEN did not start within 10s")
	}
	n.log.Info("cluster node started", "heartbeat", n.cfg.Heartbeat.String(), "dead", n.cfg.Dead.String())
	return nil
}

// Drain marks the node draining (it takes no new sessions; the load
// balancer sees /readyz 503).
func (n *Node) Drain() { n.draining.Store(true) }

// Close releases the node's sessions, deletes its row and stops it. The
// other nodes see its devices offline until they reconnect to them.
func (n *Node) Close() {
	if !n.closed.CompareAndSwap(false, true) {
		return
	}
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(ctx, `UPDATE terminal_sessions SET node_id = NULL WHERE node_id = $1`, n.id); err != nil {
		n.log.Warn("cluster: release sessions", "error", err)
	}
	if _, err := n.pool.Exec(ctx, `DELETE FROM cluster_nodes WHERE id = $1`, n.id); err != nil {
		n.log.Warn("cluster: deregister node", "error", err)
	}
	n.pool.Close()
	n.beats.Close()
}

// beat records the node's heartbeat and counts the other live nodes.
func (n *Node) beat(ctx context.Context) error {
	var peers int64
	err := n.beats.QueryRow(ctx, `WITH b AS (
			INSERT INTO cluster_nodes (id, started_at, beat_at, draining) VALUES ($1, now(), now(), $2)
			ON CONFLICT (id) DO UPDATE SET beat_at = now(), draining = EXCLUDED.draining)
		SELECT count(*) FROM cluster_nodes WHERE id <> $1 AND beat_at > now() - make_interval(secs => $3)`,
		n.id, n.draining.Load(), n.cfg.Dead.Seconds()).Scan(&peers)
	if err == nil {
		n.lastBeat.Store(time.Now().UnixNano())
		if old := n.peers.Swap(peers); old == 0 && peers > 0 {
			// Others joined: what they may have missed while this node
			// thought itself alone is in the store; they rescan at start.
			n.log.Info("cluster: other nodes are alive", "peers", peers)
		}
	}
	return err
}

// alone reports whether the last heartbeat saw no other live node. A
// node alone sends no wake-ups for its changes and reads no epoch before
// recording a device's report: nobody listens, and no other node holds a
// session. A node that joins is seen within a heartbeat; until then it
// catches up by its rescan (at its start and every Rescan), and a session
// it takes over is dropped here by its "s" wake-up, which is sent
// regardless.
func (n *Node) alone() bool { return n.peers.Load() == 0 }

// beating beats every Heartbeat. A node that could not beat for Dead is
// gone in the others' eyes: it drops its sessions, whose devices then
// reconnect to a node that can. It also forgets nodes gone for an hour.
func (n *Node) beating(ctx context.Context) {
	tick := time.NewTicker(n.cfg.Heartbeat)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		bctx, cancel := context.WithTimeout(ctx, n.cfg.Heartbeat)
		err := n.beat(bctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			n.log.Warn("cluster: heartbeat failed", "error", err)
			if time.Since(time.Unix(0, n.lastBeat.Load())) > n.cfg.Dead {
				for _, serial := range n.local.Serials() {
					n.local.Drop(serial)
				}
			}
		}
		if i%600 == 0 {
			_, _ = n.pool.Exec(ctx, `DELETE FROM cluster_nodes WHERE beat_at < now() - interval '1 hour'`)
		}
	}
}

// send queues a wake-up for the other nodes: kind "t" (a transaction or
// print job id changed), "w" (a device's owner should send it what it is
// owed), "s" (a device connected here with an epoch).
func (n *Node) send(kind, arg string) {
	select {
	case n.outbox <- kind + ":" + arg:
	default:
		// Full: the receivers' rescan covers what a dropped wake-up says.
		n.log.Warn("cluster: wake-up queue full; the rescan will cover it", "kind", kind)
	}
}

// sender sends the queued wake-ups, as many in one NOTIFY as fit.
func (n *Node) sender(ctx context.Context) {
	prefix := n.id + "\n"
	for {
		var first string
		select {
		case <-ctx.Done():
			return
		case first = <-n.outbox:
		}
		var b strings.Builder
		b.WriteString(prefix)
		b.WriteString(first)
		// Gather what the next moment brings into the same notification:
		// each NOTIFY is a commit that takes the notification queue's
		// lock, so a few per millisecond cost the database more than the
		// millisecond costs a wake-up.
		gather := time.NewTimer(gatherWindow)
	more:
		for b.Len() < maxPayload-200 {
			select {
			case m := <-n.outbox:
				b.WriteByte('\n')
				b.WriteString(m)
			case <-gather.C:
				break more
			case <-ctx.Done():
				break more
			}
		}
		gather.Stop()
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := n.pool.Exec(nctx, `SELECT pg_notify($1, $2)`, n.channel, b.String()); err != nil && ctx.Err() == nil {
			n.log.Warn("cluster: notify failed; the rescan will cover it", "error", err)
		}
		cancel()
	}
}

// listen receives the other nodes' wake-ups on a connection of its own,
// reconnecting when it breaks; after every (re)connect it rescans, and it
// rescans every Rescan too.
func (n *Node) listen(ctx context.Context, started chan<- struct{}) {
	backoff := 100 * time.Millisecond
	once := sync.Once{}
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, n.cfg.DatabaseURL)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize())
		}
		if err != nil {
			if conn != nil {
				conn.Close(context.Background())
			}
			if ctx.Err() != nil {
				return
			}
			n.log.Warn("cluster: listen failed", "error", err, "retryIn", backoff.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		once.Do(func() { close(started) })
		n.rescan(ctx)
		err = n.receive(ctx, conn)
		conn.Close(context.Background())
		if ctx.Err() == nil {
			n.log.Warn("cluster: listen connection lost; reconnecting", "error", err)
		}
	}
}

// receive handles notifications until the connection breaks or ctx ends,
// rescanning every Rescan.
func (n *Node) receive(ctx context.Context, conn *pgx.Conn) error {
	next := time.Now().Add(n.cfg.Rescan)
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, context.DeadlineExceeded) {
				n.rescan(ctx)
				next = time.Now().Add(n.cfg.Rescan)
				continue
			}
			return err
		}
		n.handle(note.Payload)
	}
}

// handle acts on one notification's wake-ups, unless this node sent it.
func (n *Node) handle(payload string) {
	from, body, ok := strings.Cut(payload, "\n")
	if !ok || from == n.id {
		return
	}
	for _, m := range strings.Split(body, "\n") {
		kind, arg, ok := strings.Cut(m, ":")
		if !ok {
			continue
		}
		switch kind {
		case "t":
			n.svc.Publish(arg)
		case "e":
			// The sender's horizon (older nodes send "new"): a fact of the
			// database, so this node's readers may show what it tells.
			told, _ := strconv.ParseInt(arg, 10, 64)
			n.svc.EventsToldElsewhere(told)
		case "w":
			if n.local.Online(arg) {
				n.wake(arg)
			}
		case "s":
			serial, e, ok := strings.Cut(arg, ":")
			epoch, err := strconv.ParseInt(e, 10, 64)
			if !ok || err != nil {
				continue
			}
			n.mu.Lock()
			mine, has := n.epochs[serial]
			n.mu.Unlock()
			if has && mine < epoch {
				n.log.Info("cluster: device connected to another node; session dropped", "serialNumber", serial)
				n.local.Drop(serial)
			}
		}
	}
}

// wake sends a device with a session here what it is owed, once at a time
// per device (a wake-up during one runs it again after).
func (n *Node) wake(serial string) {
	n.mu.Lock()
	if _, running := n.waking[serial]; running {
		n.waking[serial] = true
		n.mu.Unlock()
		return
	}
	n.waking[serial] = false
	n.mu.Unlock()
	go func() {
		for {
			n.mu.Lock()
			if _, ok := n.epochs[serial]; ok {
				n.since[serial] = time.Now()
			}
			n.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := n.svc.DeviceWoken(ctx, serial); err != nil && !errors.Is(err, instore.ErrOffline) {
				n.log.Warn("cluster: wake device", "serialNumber", serial, "error", err)
			}
			cancel()
			n.mu.Lock()
			if n.waking[serial] {
				n.waking[serial] = false
				n.mu.Unlock()
				continue
			}
			delete(n.waking, serial)
			n.mu.Unlock()
			return
		}
	}()
}

// rescan does what lost wake-ups would have: it sends the devices with a
// session here what they are owed when something was committed for them
// (an unacknowledged command, an owed message) after their hello or their
// last wake-up began, and wakes every wait to read the store again. The
// nodes' clocks must agree (NTP), as the deadlines already require.
func (n *Node) rescan(ctx context.Context) {
	newest, err := n.newestOwed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("cluster: rescan", "error", err)
		}
		return
	}
	for s, at := range newest {
		n.mu.Lock()
		since, ok := n.since[s]
		n.mu.Unlock()
		if ok && at.After(since) && n.local.Online(s) {
			n.wake(s)
		}
	}
	n.svc.RefreshWaits()
}

// newestOwed is, by device, when the newest thing it is owed was
// committed: an unacknowledged command or an owed message.
func (n *Node) newestOwed(ctx context.Context) (map[string]time.Time, error) {
	newest := map[string]time.Time{}
	pending, err := n.svc.Store.PendingTransactions(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range pending {
		if !t.Acknowledged() && t.CreatedAt.After(newest[t.SerialNumber]) {
			newest[t.SerialNumber] = t.CreatedAt
		}
	}
	owed, err := n.svc.Store.OwedDevices(ctx)
	if err != nil {
		return nil, err
	}
	for s, at := range owed {
		if at.After(newest[s]) {
			newest[s] = at
		}
	}
	return newest, nil
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/instore-dev/instore"
)

// ErrStaleSession is what a node answers a device's report on a session
// whose epoch is no longer the device's current one: the device connected
// again (to this node or another) since. The gateway does not confirm the
// report; the device resends it on its current session.
var ErrStaleSession = errors.New("cluster: the device has a newer session; report refused")

// claim records a new session of serial on this node: its epoch grows
// past every earlier one, so an older session anywhere is stale from now.
// The claims of hellos that come at once are made together (claimAll).
func (n *Node) claim(ctx context.Context, serial string) (int64, error) {
	epoch, err := n.claims.Do(ctx, serial, maxClaims, n.claimAll)
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	// Two hellos of one device in consecutive batches may come back in
	// either order: the session is the newer claim's.
	n.epochs[serial] = max(n.epochs[serial], epoch)
	n.since[serial] = time.Now() // the hello sends what is owed until now
	n.mu.Unlock()
	n.send("s", serial+":"+strconv.FormatInt(epoch, 10))
	return epoch, nil
}

// maxClaims bounds the sessions of one claimAll.
const maxClaims = 512

// claimAll claims the sessions of serials on this node in one statement,
// and returns their new epochs. A serial twice in the batch (two hellos of
// one device at once, which the gateway resolves: the later session
// drops the earlier) is claimed once, and both get that epoch: an epoch
// tells one node's session from another's. A batch serves every hello in
// it, so it is not cut short by the end of the one that runs it, only
// bounded in time.
func (n *Node) claimAll(serials []string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	rows, err := n.pool.Query(ctx, `INSERT INTO terminal_sessions (serial_number, node_id, epoch, connected_at)
		SELECT s, $2, 1, now() FROM unnest($1::text[]) AS s
		ON CONFLICT (serial_number) DO UPDATE SET node_id = EXCLUDED.node_id,
			epoch = terminal_sessions.epoch + 1, connected_at = now()
		RETURNING serial_number, epoch`, distinctSorted(serials), n.id)
	if err != nil {
		return nil, fmt.Errorf("cluster: claim sessions: %w", err)
	}
	epochs := make(map[string]int64, len(serials))
	for rows.Next() {
		var serial string
		var epoch int64
		if err := rows.Scan(&serial, &epoch); err != nil {
			rows.Close()
			return nil, fmt.Errorf("cluster: claim sessions: %w", err)
		}
		epochs[serial] = epoch
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster: claim sessions: %w", err)
	}
	return epochs, nil
}

// claimTimeout bounds a batch of claims.
const claimTimeout = 10 * time.Second

// distinctSorted returns each of ss once, in order: an upsert may not
// change one row twice, and two nodes' batches then take the rows' locks
// in the same order.
func distinctSorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// release ends this node's session of serial, if it is still the current
// one.
func (n *Node) release(serial string) {
	n.mu.Lock()
	epoch, ok := n.epochs[serial]
	delete(n.epochs, serial)
	delete(n.since, serial)
	n.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(ctx, `UPDATE terminal_sessions SET node_id = NULL
		WHERE serial_number = $1 AND node_id = $2 AND epoch = $3`, serial, n.id, epoch); err != nil && !n.closed.Load() {
		n.log.Warn("cluster: release session", "serialNumber", serial, "error", err)
	}
}

// current reports whether this node's session of serial is the device's
// current one (its epoch is the stored one, and it names this node).
// When it is not, the local session is dropped.
func (n *Node) current(ctx context.Context, serial string) error {
	n.mu.Lock()
	epoch, ok := n.epochs[serial]
	n.mu.Unlock()
	if !ok {
		return ErrStaleSession
	}
	if n.alone() {
		return nil
	}
	var stored int64
	var node *string
	err := n.pool.QueryRow(ctx, `SELECT epoch, node_id FROM terminal_sessions WHERE serial_number = $1`, serial).Scan(&stored, &node)
	if err != nil {
		return fmt.Errorf("cluster: session of the device: %w", err)
	}
	if stored != epoch || node == nil || *node != n.id {
		n.log.Info("cluster: report on a stale session refused; session dropped", "serialNumber", serial)
		n.local.Drop(serial)
		return ErrStaleSession
	}
	return nil
}

// Self names this node, for the Idempotency-Key attempts it holds.
func (n *Node) Self() string { return n.id }

// Alive reports whether the node id beat within Dead (an error reading it
// counts as alive: a retry then waits for the first request rather than
// risk running beside it).
func (n *Node) Alive(ctx context.Context, id string) bool {
	var alive bool
	err := n.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cluster_nodes WHERE id = $1 AND beat_at > now() - make_interval(secs => $2))`,
		id, n.cfg.Dead.Seconds()).Scan(&alive)
	return alive || err != nil
}

// remote returns the node holding serial's session when it is another
// live node.
func (n *Node) remote(ctx context.Context, serial string) (string, bool) {
	var node string
	err := n.pool.QueryRow(ctx, `SELECT s.node_id FROM terminal_sessions s JOIN cluster_nodes c ON c.id = s.node_id
		WHERE s.serial_number = $1 AND c.id <> $2 AND c.beat_at > now() - make_interval(secs => $3)`,
		serial, n.id, n.cfg.Dead.Seconds()).Scan(&node)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			n.log.Warn("cluster: session lookup", "serialNumber", serial, "error", err)
		}
		return "", false
	}
	return node, true
}

// Gateway is the Service's gateway on a node: the local gateway for a
// device with a session here; for a device whose session another live node
// holds, what is sent was committed first, so that node is woken and sends
// it from the store (DeviceWoken); ErrOffline otherwise.
func (n *Node) Gateway() instore.Gateway { return gatewayOf{n} }

type gatewayOf struct{ n *Node }

func (g gatewayOf) Online(serial string) bool {
	if g.n.local.Online(serial) {
		return true
	}
	_, ok := g.n.remote(context.Background(), serial)
	return ok
}

func (g gatewayOf) Ready(serial string) bool {
	if g.n.local.Online(serial) {
		return g.n.local.Ready(serial)
	}
	_, ok := g.n.remote(context.Background(), serial)
	return ok
}

// via sends with the local gateway when the device is online here, and
// wakes the node that holds its session otherwise.
func (g gatewayOf) via(ctx context.Context, serial string, local func() error) error {
	if g.n.local.Online(serial) {
		err := local()
		if !errors.Is(err, instore.ErrOffline) {
			return err
		}
	}
	if _, ok := g.n.remote(ctx, serial); !ok {
		return instore.ErrOffline
	}
	g.n.send("w", serial)
	return nil
}

func (g gatewayOf) SendPayment(ctx context.Context, serial string, t *instore.Transaction) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendPayment(ctx, serial, t) })
}

func (g gatewayOf) SendCancel(ctx context.Context, serial, id, ref, reason string) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendCancel(ctx, serial, id, ref, reason) })
}

func (g gatewayOf) SendReversal(ctx context.Context, serial, id, ref, reason string) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendReversal(ctx, serial, id, ref, reason) })
}

func (g gatewayOf) SendPrint(ctx context.Context, serial, id, printID string, lines []string) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendPrint(ctx, serial, id, printID, lines) })
}

func (g gatewayOf) SendLinked(ctx context.Context, serial, terminalID string) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendLinked(ctx, serial, terminalID) })
}

func (g gatewayOf) SendLinkCode(ctx context.Context, serial, code string) error {
	return g.via(ctx, serial, func() error { return g.n.local.SendLinkCode(ctx, serial, code) })
}

// SendUpdate sends only on a session of this node: the update sweep of the
// node holding the device's session delivers it (every node runs it).
func (g gatewayOf) SendUpdate(ctx context.Context, serial string, u *instore.Update, p *instore.Package) error {
	return g.n.local.SendUpdate(ctx, serial, u, p)
}

// Events wraps the Service as the local gateway's TerminalEvents: a hello
// claims the device's session for this node (a new epoch), a disconnect
// releases it, and what the device reports on a session that is no longer
// its current one is refused (fencing).
func (n *Node) Events(inner instore.TerminalEvents) instore.TerminalEvents {
	return events{TerminalEvents: inner, n: n}
}

type events struct {
	instore.TerminalEvents
	n *Node
}

// fenced passes a device's report on (report) only while this node holds
// the device's current session.
func (e events) fenced(ctx context.Context, serial string, report func() error) error {
	if err := e.n.current(ctx, serial); err != nil {
		return err
	}
	return report()
}

func (e events) DeviceConnected(ctx context.Context, serial string, h instore.DeviceHello) error {
	if _, err := e.n.claim(ctx, serial); err != nil {
		return err
	}
	return e.TerminalEvents.DeviceConnected(ctx, serial, h)
}

func (e events) DeviceDisconnected(serial string) {
	e.TerminalEvents.DeviceDisconnected(serial)
	e.n.release(serial)
}

func (e events) TerminalAcknowledged(ctx context.Context, serial, ref string) error {
	return e.fenced(ctx, serial, func() error { return e.TerminalEvents.TerminalAcknowledged(ctx, serial, ref) })
}

func (e events) TerminalResult(ctx context.Context, serial string, r instore.TerminalResult) error {
	return e.fenced(ctx, serial, func() error { return e.TerminalEvents.TerminalResult(ctx, serial, r) })
}

func (e events) TerminalPrintResult(ctx context.Context, serial, printID string, statusID instore.PrintStatus) error {
	return e.fenced(ctx, serial, func() error { return e.TerminalEvents.TerminalPrintResult(ctx, serial, printID, statusID) })
}

func (e events) TerminalConfirmed(ctx context.Context, serial, messageID string) error {
	return e.fenced(ctx, serial, func() error { return e.TerminalEvents.TerminalConfirmed(ctx, serial, messageID) })
}

func (e events) TerminalUpdateStatus(ctx context.Context, serial, updateID string, r instore.UpdateReport) error {
	return e.fenced(ctx, serial, func() error { return e.TerminalEvents.TerminalUpdateStatus(ctx, serial, updateID, r) })
}

func (e events) TerminalForwarded(ctx context.Context, serial string, r instore.ForwardReport) error {
	if err := e.n.current(ctx, serial); err != nil {
		return err
	}
	return e.TerminalEvents.TerminalForwarded(ctx, serial, r)
}

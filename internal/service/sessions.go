package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/batch"
)

// A device's session, as the gateway reports it: the hello
// (DeviceConnected) and the end (DeviceDisconnected). Both read the
// device's rows with one statement (Store.DeviceSessions). The hellos of
// many devices at once (a node's fleet reconnecting) are read and written
// together, and so are the ends (batchers): a storm costs a read and a
// durable commit per batch instead of one each.

// DeviceConnected records the device's hello and tells it what to show: its
// terminal ID, or a link code while unlinked. Then it resumes what the
// device may have missed: the command of its transaction if it has not
// acknowledged it, every message still owed to it (the root's effect.go), and its
// software update.
func (s *Service) DeviceConnected(ctx context.Context, serial string, h instore.DeviceHello) error {
	// The hello reads the device's terminal ID and its rows once, in one
	// statement: for the terminal.online event, and for what it sends
	// (sendOwed). The rows are read after the session was registered
	// (internal/gateway), so a command or owed message that found the
	// device offline before is among them; a later one goes to the
	// session itself. It goes on only once its device row and event are
	// stored (seeHellos), so that its terminal.online comes before
	// anything it sends.
	call := &helloCall{serial: serial, version: h.SoftwareVersion, at: s.now()}
	got, err := batched(s, &s.hellos, ctx, call, maxHelloBatch, func(calls []*helloCall) (map[*helloCall]helloSeen, error) {
		return s.seeHellos(ctx, calls)
	})
	if err == nil {
		err = got.err
	}
	if err != nil {
		return err
	}
	hl := &hello{DeviceHello: h, at: call.at, read: true}
	if ds := got.ds; ds == nil {
		hl.termErr = instore.ErrNotFound // not linked: sendOwed sends a link code
	} else {
		hl.term = ds.Terminal
		if hl.rows, err = s.helloRows(ctx, ds); err != nil {
			return err
		}
		// The minimum software version of `linked` is the device's
		// customer's and model's: read here (minimumFor).
		ctx = context.WithValue(ctx, helloDeviceKey{}, ds.Device)
	}
	return s.sendOwed(ctx, serial, hl)
}

// helloCall is a hello to record: its device, the software version it
// runs and when it said hello. A hello's batch finds its result under its
// own helloCall, so that two hellos of one device are two records.
type helloCall struct {
	serial, version string
	at              time.Time
}

// helloSeen is what the batch of a hello read for it (its device's
// session; nil when the device is not linked) and how its write went.
// Two hellos of one device in a batch share the session, which is only
// read.
type helloSeen struct {
	ds  *instore.DeviceSession
	err error
}

// maxHelloBatch bounds the hellos of one batch: one DeviceSessions
// statement, one write transaction.
const maxHelloBatch = 512

// seeHellos reads the device sessions of the hellos of calls (one
// statement per 512) and records them all in one write transaction
// (DevicesSeen, in the order of calls): each device's software version
// and time, and the terminal.online event of each linked one. If that
// fails, it records each one alone, so that one bad record loses only
// itself. It returns each hello's session and the error of its write; an
// error of the read is every hello's.
func (s *Service) seeHellos(ctx context.Context, calls []*helloCall) (map[*helloCall]helloSeen, error) {
	// A batch is every caller's: it is not cut short by the end of the
	// one that runs it, but bounded in time, so that a stalled store
	// holds the node's hellos for batchTimeout at most.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	serials := make([]string, len(calls))
	for i, c := range calls {
		serials[i] = c.serial
	}
	ss, err := s.Store.DeviceSessions(ctx, serials)
	if err != nil {
		return nil, fmt.Errorf("device session: %w", err)
	}
	sessions := make(map[string]*instore.DeviceSession, len(ss))
	for _, ds := range ss {
		sessions[ds.Device.SerialNumber] = ds
	}
	got := make(map[*helloCall]helloSeen, len(calls))
	seen := make([]instore.DeviceSeen, len(calls))
	for i, c := range calls {
		seen[i] = instore.DeviceSeen{SerialNumber: c.serial, SoftwareVersion: c.version, At: c.at}
		if ds := sessions[c.serial]; ds != nil {
			seen[i].Events = s.sessionEvent(ds, instore.EventTerminalOnline, true)
			got[c] = helloSeen{ds: ds}
		}
	}
	err = s.Store.DevicesSeen(ctx, seen)
	if err != nil && len(seen) > 1 {
		s.log().Warn("record hellos together", "hellos", len(seen), "error", err)
	}
	written := false
	for i, c := range calls {
		r := got[c]
		r.err = err
		if err != nil && len(seen) > 1 && ctx.Err() == nil {
			r.err = s.Store.DevicesSeen(ctx, seen[i:i+1])
		}
		if r.err != nil {
			r.err = fmt.Errorf("device seen: %w", r.err)
		} else if len(seen[i].Events) > 0 {
			written = true
		}
		got[c] = r
	}
	if written {
		s.eventsWritten()
	}
	return got, nil
}

// helloRows are the rows of a hello's device session: its PENDING
// transaction is read whole (its command may be resent) when there is
// one; the rest is the session's.
func (s *Service) helloRows(ctx context.Context, ds *instore.DeviceSession) (*terminalRows, error) {
	rows := &terminalRows{update: ds.Update, batchID: ds.BatchID, batchSerial: ds.BatchSerial, noneOwed: !ds.Owed}
	if ds.ActiveID == "" {
		return rows, nil
	}
	t, err := s.Store.ActiveTransaction(ctx, ds.Terminal.TerminalID)
	switch {
	case err == nil:
		rows.active = t
	case !errors.Is(err, instore.ErrNotFound): // ended since: none
		return nil, fmt.Errorf("active transaction: %w", err)
	}
	return rows, nil
}

// helloDeviceKey is the context key of the device row a hello read, for
// the minimum software version of its `linked` (MinSoftwareVersion).
type helloDeviceKey struct{}

// hello is a device's hello with the time it was taken in and, when read
// is set, its terminal ID as DeviceConnected read it (term, or termErr)
// and its rows (rows, nil when they were not read).
type hello struct {
	instore.DeviceHello
	at      time.Time
	read    bool
	term    *instore.Terminal
	termErr error
	rows    *terminalRows
}

// rowsOf returns the rows a hello read, nil for a wake-up or when they
// were not read.
func (h *hello) rowsOf() *terminalRows {
	if h == nil {
		return nil
	}
	return h.rows
}

// DeviceDisconnected notes that a device lost its session: its
// terminal.offline event is written, and it returns once that write
// committed (the gateway holds the device's next hello until then, so
// that its terminal.online comes after). Transactions it acknowledged
// stay PENDING (WP30 for new requests) until it reconnects and resends
// its result, or the deadline passes.
func (s *Service) DeviceDisconnected(serial string) {
	s.log().Debug("device disconnected")
	// The ends of many sessions (a node's fleet reconnecting at once) are
	// written together; every end returns once the batch holding it
	// committed (or failed), so that no end is acknowledged to the gateway
	// before it is stored (its wait has no context that could end it): a
	// storm's ends cost a read and a commit per batch instead of five
	// reads and a commit each.
	batched(s, &s.offline, context.Background(), serial, maxOfflineBatch, func(serials []string) (map[string]struct{}, error) {
		s.writeOffline(serials)
		return nil, nil
	})
}

// writeOffline reads the device sessions of serials (one statement per
// 512) and writes their terminal.offline events in one transaction; if
// that fails, each one alone, so that one bad event loses only itself. A
// failure is logged: the session ended anyway.
func (s *Service) writeOffline(serials []string) {
	ctx := context.Background()
	ss, err := s.Store.DeviceSessions(ctx, serials)
	if err != nil {
		s.log().Warn("record event", "type", instore.EventTerminalOffline, "error", err)
		return
	}
	var evs []instore.OutboxEvent
	for _, ds := range ss {
		evs = append(evs, s.sessionEvent(ds, instore.EventTerminalOffline, false)...)
	}
	if len(evs) == 0 {
		return
	}
	if err := s.Store.AppendEvents(ctx, evs); err == nil {
		s.eventsWritten()
		return
	} else if len(evs) == 1 {
		s.log().Warn("record event", "type", instore.EventTerminalOffline, "error", err)
		return
	}
	for _, ev := range evs {
		s.recordEvent(ctx, ev)
	}
}

// maxOfflineBatch bounds the session ends written in one transaction.
const maxOfflineBatch = 512

// maxDeviceBatch bounds the devices of one batch of authentications.
const maxDeviceBatch = 512

// batchTimeout bounds the store calls of a batch (a read of devices, the
// read and write of hellos).
const batchTimeout = 10 * time.Second

// batched runs the call of key through the batcher b (do), or in the
// simulation (s.Go set) alone: the simulation runs every task on its
// scheduler, where one task cannot wait for another's batch, so each call
// is a batch of its own there.
func batched[K comparable, V any](s *Service, b *batch.Batcher[K, V], ctx context.Context, key K, most int, run func(keys []K) (map[K]V, error)) (V, error) {
	if s.Go != nil {
		got, err := run([]K{key})
		return got[key], err
	}
	return b.Do(ctx, key, most, run)
}

// device reads the device of an authentication. The devices of hellos
// that miss the credentials cache at once (a dead node's fleet coming
// back on this one, the cache cold) are read together: one read per
// batch (a batcher) instead of one each, each waiting for a connection
// of the store.
func (s *Service) device(ctx context.Context, serial string) (*instore.Device, error) {
	read := func(serials []string) (map[string]*instore.Device, error) {
		// A batch is every caller's: it is not cut short by the end of
		// the one that reads it, but bounded in time, so that a stalled
		// read holds the node's authentications for batchTimeout at most.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		defer cancel()
		ds, err := s.Store.DevicesBySerial(ctx, serials)
		m := make(map[string]*instore.Device, len(ds))
		for _, d := range ds {
			m[d.SerialNumber] = d
		}
		return m, err
	}
	d, err := batched(s, &s.devices, ctx, serial, maxDeviceBatch, read)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("device: %w", instore.ErrNotFound)
	}
	own := *d // two hellos of one device may share a batch
	return &own, nil
}

package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// A device's session, as the gateway reports it: the hello
// (DeviceConnected) and the end (DeviceDisconnected). Both read the
// device's rows with one statement (Store.DeviceSessions); the ends of
// many sessions (a node's fleet reconnecting at once) are written
// together (a batcher).

// DeviceConnected records the device's hello and tells it what to show: its
// terminal ID, or a link code while unlinked. Then it resumes what the
// device may have missed: the command of its transaction if it has not
// acknowledged it, every message still owed to it (the root's effect.go), and its
// software update.
func (s *Service) DeviceConnected(ctx context.Context, serial string, h instore.DeviceHello) error {
	at := s.now()
	// The hello reads the device's terminal ID and its rows once, in one
	// statement: for the terminal.online event, and for what it sends
	// (sendOwed). The rows are read after the session was registered
	// (internal/gateway), so a command or owed message that found the
	// device offline before is among them; a later one goes to the
	// session itself.
	hl := &hello{DeviceHello: h, at: at, read: true}
	ss, err := s.Store.DeviceSessions(ctx, []string{serial})
	if err != nil {
		return fmt.Errorf("device session: %w", err)
	}
	var evs []instore.OutboxEvent
	if len(ss) == 0 {
		hl.termErr = instore.ErrNotFound // not linked: sendOwed sends a link code
	} else {
		ds := ss[0]
		hl.term = ds.Terminal
		if hl.rows, err = s.helloRows(ctx, ds); err != nil {
			return err
		}
		evs = s.sessionEvent(ds, instore.EventTerminalOnline, true)
		// The minimum software version of `linked` is the device's
		// customer's and model's: read here (minimumFor).
		ctx = context.WithValue(ctx, helloDeviceKey{}, ds.Device)
	}
	if err := s.Store.DevicesSeen(ctx, []instore.DeviceSeen{{SerialNumber: serial, SoftwareVersion: h.SoftwareVersion, At: at, Events: evs}}); err != nil {
		return fmt.Errorf("device seen: %w", err)
	}
	if len(evs) > 0 {
		s.eventsWritten()
	}
	return s.sendOwed(ctx, serial, hl)
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
// and the rows read for its event (rows, nil when they were not read).
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
	if s.Go != nil {
		// The simulation runs every task on its scheduler, where one task
		// cannot wait for another's batch: each end is a batch of its own.
		s.writeOffline([]string{serial})
		return
	}
	// The ends of many sessions (a node's fleet reconnecting at once) are
	// written together; every end returns once the batch holding it
	// committed (or failed), so that no end is acknowledged to the gateway
	// before it is stored (its wait has no context that could end it): a
	// storm's ends cost a read and a commit per batch instead of five
	// reads and a commit each.
	s.offline.do(context.Background(), serial, maxOfflineBatch, func(serials []string) (map[string]struct{}, error) {
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

// deviceReadTimeout bounds a batch's read of devices.
const deviceReadTimeout = 10 * time.Second

// device reads the device of an authentication. The devices of hellos
// that miss the credentials cache at once (a dead node's fleet coming
// back on this one, the cache cold) are read together: one read per
// batch (a batcher) instead of one each, each waiting for a connection
// of the store. The simulation's tasks cannot wait for one another's
// batch: each reads its own.
func (s *Service) device(ctx context.Context, serial string) (*instore.Device, error) {
	read := func(serials []string) (map[string]*instore.Device, error) {
		// A batch is every caller's: it is not cut short by the end of
		// the one that reads it, but bounded in time, so that a stalled
		// read holds the node's authentications for deviceReadTimeout at
		// most.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deviceReadTimeout)
		defer cancel()
		ds, err := s.Store.DevicesBySerial(ctx, serials)
		m := make(map[string]*instore.Device, len(ds))
		for _, d := range ds {
			m[d.SerialNumber] = d
		}
		return m, err
	}
	var d *instore.Device
	var err error
	if s.Go != nil {
		var m map[string]*instore.Device
		m, err = read([]string{serial})
		d = m[serial]
	} else {
		d, err = s.devices.do(ctx, serial, maxDeviceBatch, read)
	}
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("device: %w", instore.ErrNotFound)
	}
	own := *d // two hellos of one device may share a batch
	return &own, nil
}

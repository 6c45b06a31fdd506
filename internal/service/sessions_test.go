package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestSessionEndsWrittenInBatches: the ends of many sessions at once (a
// reconnect storm) are written in fewer transactions than ends, every
// device's terminal.offline event once and after its terminal.online, and
// each DeviceDisconnected returns only once its own event is stored.
func TestSessionEndsWrittenInBatches(t *testing.T) {
	const n = 60
	f := newFixture(t, "FULL", "SN-END-0000")
	ctx := context.Background()
	serials, _ := linkDevices(t, f, "SN-END", n)
	rc := &readCounter{Store: f.st}
	f.svc.Store, f.svc.Gateway = rc, onlineGateway{}
	for _, serial := range serials {
		if err := f.svc.DeviceConnected(ctx, serial, instore.DeviceHello{Model: instore.ModelCountertop, SoftwareVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, serial := range serials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.svc.DeviceDisconnected(serial)
			// Its own event is stored once DeviceDisconnected returns.
			ss, err := f.st.DeviceSessions(ctx, []string{serial})
			if err != nil || len(ss) != 1 {
				t.Errorf("%s: %v, %v", serial, ss, err)
				return
			}
			if !hasEvent(t, f, ss[0].Terminal.TerminalID, instore.EventTerminalOffline) {
				t.Errorf("%s: DeviceDisconnected returned before its terminal.offline event was stored", serial)
			}
		}()
	}
	wg.Wait()
	if got := rc.counts()["AppendEvents"]; got >= n || got == 0 {
		t.Errorf("%d session ends made %d writes, want fewer (batches)", n, got)
	}
	if got := rc.counts()["DeviceSessions"]; got >= 2*n {
		t.Errorf("%d hellos and %d session ends made %d reads, want fewer than %d", n, n, got, 2*n)
	}
	if err := f.svc.SequenceEvents(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := f.st.ListEvents(ctx, instore.EventFilter{MerchantID: f.merchant, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]instore.EventType{}
	for _, ev := range evs {
		seen[ev.TerminalID] = append(seen[ev.TerminalID], ev.Type)
		if ev.Type == instore.EventTerminalOffline {
			var v instore.TerminalView
			if err := json.Unmarshal(ev.Data, &v); err != nil || v.Online || !v.Linked || v.SerialNumber == nil {
				t.Errorf("terminal.offline of %s shows %s (%v)", ev.TerminalID, ev.Data, err)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("events of %d terminals, want %d", len(seen), n)
	}
	for term, types := range seen {
		if len(types) != 2 || types[0] != instore.EventTerminalOnline || types[1] != instore.EventTerminalOffline {
			t.Errorf("terminal %s: events %v, want [online offline]", term, types)
		}
	}
}

// linkDevices links n-1 more devices to new terminal IDs of the fixture's
// merchant, named prefix-0001 and up, and returns the serial numbers of
// all n (the fixture's, prefix-0000, first) and their terminal IDs.
func linkDevices(t *testing.T, f *fixture, prefix string, n int) (serials, terminals []string) {
	t.Helper()
	ctx := context.Background()
	ad := admin.New(f.st)
	m, err := f.st.Merchant(ctx, f.merchant)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ad.AllocateTerminals(ctx, f.merchant, n-1)
	if err != nil {
		t.Fatal(err)
	}
	serials, terminals = []string{prefix + "-0000"}, []string{f.terminal}
	for i, term := range ts {
		serial := fmt.Sprintf("%s-%04d", prefix, i+1)
		if _, _, err := ad.CreateDevice(ctx, serial, instore.ModelCountertop, m.CustomerID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.st.LinkTerminal(ctx, term.TerminalID, serial, time.Now()); err != nil {
			t.Fatal(err)
		}
		serials, terminals = append(serials, serial), append(terminals, term.TerminalID)
	}
	return serials, terminals
}

// TestHellosReadAndWrittenInBatches: the hellos of many devices at once
// (a reconnect storm) read their sessions and are recorded together: the
// hellos that queue while a batch runs are the next batch, one read and
// one write transaction. Each DeviceConnected returns only once its own
// device row and terminal.online are stored, and goes on with its own
// rows: the device whose PENDING transaction it has not acknowledged gets
// its command again, the others none. A queued hello whose context ends
// leaves without being recorded.
func TestHellosReadAndWrittenInBatches(t *testing.T) {
	const n = 40
	f := newFixture(t, "FULL", "SN-HELLO-0000")
	ctx := context.Background()
	serials, terminals := linkDevices(t, f, "SN-HELLO", n)
	const busy, gone = 7, n - 1 // the device with a transaction, the hello that leaves
	tx := &instore.Transaction{ID: f.svc.NewRef(), MerchantID: f.merchant, TerminalID: terminals[busy], SerialNumber: serials[busy],
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
		Progress: instore.ProgressSent, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := f.st.CreateTransaction(ctx, &instore.Change{T: tx}); err != nil {
		t.Fatal(err)
	}
	rc := &readCounter{Store: f.st}
	gw := &paymentsGateway{}
	f.svc.Store, f.svc.Gateway = rc, gw
	leave, cancel := context.WithCancel(ctx)
	defer cancel()
	release := helloStorm(t, f, rc, serials, map[int]context.Context{gone: leave}, func(i int, err error) {
		if i == gone {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("the hello whose context ended: %v, want context.Canceled", err)
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", serials[i], err)
			return
		}
		checkHelloStored(t, f, serials[i], terminals[i])
	})
	cancel()
	waitQueued(t, f, n-2)
	release()
	got := rc.counts()
	for name, want := range map[string]int{
		"DeviceSessions": 2, "DevicesSeen": 2, "DevicesSeen " + string(instore.EventTerminalOnline): n - 1, "ActiveTransaction": 1,
	} {
		if got[name] != want {
			t.Errorf("%d hellos made %d of %s, want %d (the held one, then the rest together; all: %v)", n, got[name], name, want, got)
		}
	}
	if d, err := f.st.Device(ctx, serials[gone]); err != nil || d.SoftwareVersion == "2.0.0" || d.LastSeenAt != nil {
		t.Errorf("the hello that left was recorded: %+v, %v", d, err)
	}
	if hasEvent(t, f, terminals[gone], instore.EventTerminalOnline) {
		t.Error("the hello that left wrote its terminal.online")
	}
	if want := map[string][]string{serials[busy]: {tx.ID}}; !maps.EqualFunc(gw.sent, want, slices.Equal) {
		t.Errorf("commands sent on the hellos: %v, want %v (the unacknowledged one, to its device)", gw.sent, want)
	}
}

// TestHelloBatchWrittenAloneWhenItFails: when the write of a batch of
// hellos fails, each hello is written alone: the one the store refuses
// fails, the others are recorded.
func TestHelloBatchWrittenAloneWhenItFails(t *testing.T) {
	const n, bad = 5, 3
	f := newFixture(t, "FULL", "SN-ALONE-0000")
	serials, terminals := linkDevices(t, f, "SN-ALONE", n)
	rc := &readCounter{Store: f.st, refuseSeen: serials[bad]}
	f.svc.Store, f.svc.Gateway = rc, onlineGateway{}
	helloStorm(t, f, rc, serials, nil, func(i int, err error) {
		if i == bad {
			if err == nil {
				t.Errorf("the refused hello: no error")
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", serials[i], err)
			return
		}
		checkHelloStored(t, f, serials[i], terminals[i])
	})()
	// The held one, the batch of the others, then each of them alone.
	if got := rc.counts()["DevicesSeen"]; got != 2+n-1 {
		t.Errorf("%d hellos made %d writes, want %d", n, got, 2+n-1)
	}
	if hasEvent(t, f, terminals[bad], instore.EventTerminalOnline) {
		t.Error("the refused hello's terminal.online was stored")
	}
}

// helloStorm says hello (software version 2.0.0) for every device of
// serials at once: the first alone, its read held until the others
// queued behind it (a batch), hello i with ctxs[i] if set. It returns once
// they queued; release lets the batches run and returns once every hello
// did, each told to check.
func helloStorm(t *testing.T, f *fixture, rc *readCounter, serials []string, ctxs map[int]context.Context,
	check func(i int, err error)) (release func()) {
	t.Helper()
	hold := make(chan struct{})
	rc.mu.Lock()
	rc.holdSessions = hold
	rc.mu.Unlock()
	var wg sync.WaitGroup
	hello := func(i int) {
		ctx := ctxs[i]
		if ctx == nil {
			ctx = context.Background()
		}
		wg.Go(func() {
			check(i, f.svc.DeviceConnected(ctx, serials[i], instore.DeviceHello{Model: instore.ModelCountertop, SoftwareVersion: "2.0.0"}))
		})
	}
	hello(0)
	rc.waitHeld(t, &rc.holdSessions)
	for i := 1; i < len(serials); i++ {
		hello(i)
	}
	waitQueued(t, f, len(serials)-1)
	return func() {
		close(hold)
		wg.Wait()
	}
}

// waitQueued waits until want hellos wait for the batch being run.
func waitQueued(t *testing.T, f *fixture, want int) {
	t.Helper()
	testwait.ForNil(t, "the hellos to queue behind the held batch", func() error {
		if got := f.svc.QueuedHellos(); got != want {
			return fmt.Errorf("%d queued, want %d", got, want)
		}
		return nil
	})
}

// checkHelloStored checks that the hello of serial (software version
// 2.0.0) is stored, its device row and its terminal's terminal.online.
func checkHelloStored(t *testing.T, f *fixture, serial, terminal string) {
	t.Helper()
	if d, err := f.st.Device(context.Background(), serial); err != nil || d.SoftwareVersion != "2.0.0" {
		t.Errorf("%s after its hello: %+v, %v; want software version 2.0.0", serial, d, err)
	}
	if !hasEvent(t, f, terminal, instore.EventTerminalOnline) {
		t.Errorf("%s: DeviceConnected returned before its terminal.online event was stored", serial)
	}
}

// paymentsGateway is onlineGateway that notes the commands it is given,
// by serial number.
type paymentsGateway struct {
	onlineGateway
	mu   sync.Mutex
	sent map[string][]string
}

func (g *paymentsGateway) SendPayment(_ context.Context, serial string, t *instore.Transaction) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent == nil {
		g.sent = map[string][]string{}
	}
	g.sent[serial] = append(g.sent[serial], t.ID)
	return nil
}

// hasEvent reports whether the terminal has a stored event of typ (told
// or not yet).
func hasEvent(t *testing.T, f *fixture, terminalID string, typ instore.EventType) bool {
	t.Helper()
	if err := f.svc.SequenceEvents(context.Background()); err != nil {
		t.Error(err)
		return false
	}
	evs, err := f.st.ListEvents(context.Background(), instore.EventFilter{MerchantID: f.merchant, TerminalID: terminalID,
		Types: []instore.EventType{typ}, Limit: 10})
	if err != nil {
		t.Error(err)
		return false
	}
	return len(evs) == 1
}

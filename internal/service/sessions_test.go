package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
)

// TestSessionEndsWrittenInBatches: the ends of many sessions at once (a
// reconnect storm) are written in fewer transactions than ends, every
// device's terminal.offline event once and after its terminal.online, and
// each DeviceDisconnected returns only once its own event is stored.
func TestSessionEndsWrittenInBatches(t *testing.T) {
	const n = 60
	f := newFixture(t, "FULL", "SN-END-0000")
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
	serials := []string{"SN-END-0000"}
	for i, term := range ts {
		serial := fmt.Sprintf("SN-END-%04d", i+1)
		if _, _, err := ad.CreateDevice(ctx, serial, instore.ModelCountertop, m.CustomerID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.st.LinkTerminal(ctx, term.TerminalID, serial, time.Now()); err != nil {
			t.Fatal(err)
		}
		serials = append(serials, serial)
	}
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

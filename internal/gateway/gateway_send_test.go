package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestSilentTerminalTimesOut(t *testing.T) {
	h := newHarness(t, Config{PingInterval: 50 * time.Millisecond, PongTimeout: 100 * time.Millisecond})
	live := h.connect("SN-LIVE")
	liveDone := make(chan error, 1)
	go func() { // reading answers pings
		for {
			if _, _, err := live.conn.ReadMessage(); err != nil {
				liveDone <- err
				return
			}
		}
	}()

	silent := h.connect("SN-SILENT")
	// The silent terminal reads nothing, so it answers no ping.
	silent.conn.SetPingHandler(func(string) error { return nil })
	testwait.For(t, "the silent terminal to be disconnected", func() bool { return h.ev.count("disconnected SN-SILENT") == 1 })
	if h.g.Online("SN-SILENT") {
		t.Error("the silent terminal is still online")
	}
	silent.expectClose(protocol.CloseTimeout)

	if !h.g.Online("SN-LIVE") {
		t.Error("the terminal answering pings went offline")
	}
	h.g.Close()
	var ce *websocket.CloseError
	if err := <-liveDone; !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("live terminal read = %v, want close 1001", err)
	}
}

func TestInvalidFramesCloseOnlyTheirSession(t *testing.T) {
	h := newHarness(t, Config{})
	bystander := h.connect("SN-BYSTANDER")
	tests := []struct {
		name  string
		frame []byte
		code  int
	}{
		{"malformed json", []byte(`{"type":"ack",`), protocol.CloseMalformed},
		{"unknown type", []byte(`{"type":"dance","id":"1"}`), protocol.CloseMalformed},
		{"unknown envelope field", []byte(`{"type":"ack","id":"1","ref":"r","extra":true}`), protocol.CloseMalformed},
		{"bad field", []byte(`{"type":"progress","id":"1","ref":"r","data":{"stage":"DANCING"}}`), protocol.CloseMalformed},
		{"bad result", []byte(`{"type":"result","id":"1","ref":"r","data":{"statusId":0,"maskedPan":"4111111111111111"}}`), protocol.CloseMalformed},
		{"server type", []byte(`{"type":"purchase","id":"1","ref":"r","data":{"amount":1,"currency":"SEK","deadline":"2026-01-01T00:00:00Z"}}`), protocol.CloseMalformed},
		{"second hello", []byte(hello(1)), protocol.CloseMalformed},
		{"oversized", append(append([]byte(`{"type":"ack","id":"1","ref":"r","data":{"x":"`), bytes.Repeat([]byte("x"), protocol.MaxFrameBytes)...), `"}}`...), websocket.CloseMessageTooBig},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := fmt.Sprintf("SN-BAD%d", i)
			c := h.connect(serial)
			if err := c.conn.WriteMessage(websocket.TextMessage, tt.frame); err != nil {
				t.Fatal(err)
			}
			c.expectClose(tt.code)
			testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })

			// The others are still served.
			if err := h.g.SendLinkCode(context.Background(), "SN-BYSTANDER", fmt.Sprint(100000+i)); err != nil {
				t.Fatalf("SendLinkCode to the bystander: %v", err)
			}
			if env := bystander.next(); env.Type != protocol.TypeLinkCode {
				t.Errorf("bystander got %+v, want link-code", env)
			}
		})
	}
	if got := h.ev.Events("ack "); len(got) != 0 {
		t.Errorf("acks = %q, want none from invalid frames", got)
	}
}

func TestSend(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	const serial = "SN-SEND"
	c := h.connect(serial)

	deadline := time.Date(2026, 5, 1, 12, 0, 2, 0, time.FixedZone("CEST", 2*3600))
	vat, method := int64(250), 2
	purchase := &instore.Transaction{ID: "txn_p", Type: instore.TypePurchase, Amount: 1250, CashbackAmount: 200, VATAmount: &vat,
		Currency: "SEK", PaymentMethodID: &method, ECRReference: "R-1", DeadlineAt: &deadline}
	refund := &instore.Transaction{ID: "txn_r", Type: instore.TypeRefund, Amount: 500, Currency: "SEK", OriginalID: "txn_p"}
	if err := h.g.SendPayment(ctx, serial, purchase); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendPayment(ctx, serial, refund); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendCancel(ctx, serial, "eff_c", "txn_r", instore.CancelByECR); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendReversal(ctx, serial, "eff_r", "txn_p", instore.ReversalLateApproval); err != nil {
		t.Fatal(err)
	}
	reversal := &instore.Transaction{ID: "txn_v", Type: instore.TypeReversal, Amount: 1250, Currency: "SEK", OriginalID: "txn_p"}
	if err := h.g.SendPayment(ctx, serial, reversal); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendPrint(ctx, serial, "eff_p", "prt_1", []string{"Thank you", ""}); err != nil {
		t.Fatal(err)
	}

	type msg struct {
		Type, ID, Ref string
		Data          any
	}
	var got []msg
	ids := map[string]bool{}
	for range 6 {
		env := c.next()
		ids[env.ID] = true
		id := env.ID
		if !strings.HasPrefix(id, "eff_") {
			id = "" // the gateway's own
		}
		data := protocol.NewData(env.Type)
		if err := protocol.DecodeData(env, data); err != nil {
			t.Fatal(err)
		}
		got = append(got, msg{env.Type, id, env.Ref, data})
	}
	// The messages owed until confirmed go with the id the domain gives
	// (its effect's), so that every send of one has the same.
	want := []msg{
		{protocol.TypePurchase, "", "txn_p", &protocol.Payment{Amount: 1250, CashbackAmount: 200, VATAmount: &vat, Currency: "SEK",
			PaymentMethodID: &method, ECRReference: "R-1", Deadline: deadline.UTC()}},
		{protocol.TypeRefund, "", "txn_r", &protocol.Payment{Amount: 500, Currency: "SEK", Deadline: time.Time{}.UTC(), OriginalRef: "txn_p"}},
		{protocol.TypeCancel, "eff_c", "txn_r", &protocol.Cancel{Reason: instore.CancelByECR}},
		{protocol.TypeReversal, "eff_r", "txn_p", &protocol.Reversal{Reason: "LATE_APPROVAL"}},
		{protocol.TypeReversal, "", "txn_v", &protocol.Reversal{Reason: "ECR", OriginalRef: "txn_p"}},
		{protocol.TypePrint, "eff_p", "prt_1", &protocol.Print{Lines: []string{"Thank you", ""}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	// A print result and a confirm reach the domain.
	c.send(`{"type":"print-result","id":"pr-1","ref":"prt_1","data":{"statusId":2}}`)
	testwait.For(t, "print-result", func() bool { return len(h.ev.Events("print-result "+serial+" prt_1 2")) == 1 })
	c.send(`{"type":"confirm","id":"c-1","re":"eff_c","ref":"txn_r"}`)
	testwait.For(t, "confirm", func() bool { return len(h.ev.Events("confirm "+serial+" eff_c")) == 1 })
	if len(ids) != 6 {
		t.Errorf("message ids %v are not unique", ids)
	}

	if err := h.g.SendPayment(ctx, serial, &instore.Transaction{ID: "txn_x", Type: instore.TypeReversal, Amount: 1, Currency: "SEK"}); err == nil {
		t.Error("SendPayment(REVERSAL without its original) = nil, want an error")
	}
	if err := h.g.SendCancel(ctx, serial, "eff_x", "txn_r", "BORED"); err == nil || errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendCancel(bad reason) = %v, want a validation error", err)
	}
}

func TestSendOffline(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	tx := &instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, Amount: 1, Currency: "SEK"}
	for name, err := range map[string]error{
		"SendPayment":  h.g.SendPayment(ctx, "SN-NONE", tx),
		"SendCancel":   h.g.SendCancel(ctx, "SN-NONE", "eff_1", "txn_1", instore.CancelDeadline),
		"SendReversal": h.g.SendReversal(ctx, "SN-NONE", "eff_2", "txn_1", instore.ReversalLateApproval),
		"SendPrint":    h.g.SendPrint(ctx, "SN-NONE", "eff_3", "prt_1", []string{"x"}),
		"SendLinked":   h.g.SendLinked(ctx, "SN-NONE", "10000001"),
		"SendLinkCode": h.g.SendLinkCode(ctx, "SN-NONE", "123456"),
	} {
		if !errors.Is(err, instore.ErrOffline) {
			t.Errorf("%s to an offline device = %v, want ErrOffline", name, err)
		}
	}
	// Connected but no hello yet: still offline.
	h.open("SN-NOHELLO")
	if err := h.g.SendLinkCode(ctx, "SN-NOHELLO", "123456"); !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendLinkCode before hello = %v, want ErrOffline", err)
	}
}

func TestSendDoesNotWaitPastWriteTimeout(t *testing.T) {
	h := newHarness(t, Config{WriteTimeout: 50 * time.Millisecond})
	c := h.connect("SN-STUCK")
	s := h.g.session("SN-STUCK")
	if !s.wslot.tryTake() { // a write that never ends
		t.Fatal("the write slot is taken")
	}
	err := h.g.SendLinkCode(context.Background(), "SN-STUCK", "123456")
	if !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendLinkCode to a stuck session = %v, want ErrOffline", err)
	}
	s.wslot.release()
	testwait.For(t, "the stuck session to be dropped", func() bool { return h.ev.count("disconnected SN-STUCK") == 1 })
	c.conn.Close()
}

func TestClose(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := h.connect("SN-A"), h.connect("SN-B")
	pending := h.open("SN-PENDING") // no hello yet
	closed := make(chan struct{})
	go func() {
		h.g.Close()
		close(closed)
	}()
	for _, c := range []*client{a, b, pending} {
		c.expectClose(websocket.CloseGoingAway)
	}
	<-closed
	if n := h.g.Sessions(); n != 0 {
		t.Errorf("Sessions after Close = %d, want 0", n)
	}
	_, resp, err := h.dial("SN-A", secretOf("SN-A"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Close = %v, %v; want 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "urn:instore:problem:unavailable") {
		t.Errorf("503 body = %s, want the unavailable problem", body)
	}
	if got := len(h.ev.Events("disconnected ")); got != 2 {
		t.Errorf("DeviceDisconnected called %d times, want 2", got)
	}
}

// TestManyIdleSessions opens 500 idle sessions on loopback: all online,
// all closed cleanly by Close.
func TestManyIdleSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("500 connections")
	}
	const n = 500
	h := newHarness(t, Config{})
	clients := make([]*client, n)
	for i := range clients {
		c := h.open(fmt.Sprintf("SN-%04d", i))
		c.send(hello(protocol.Version))
		clients[i] = c
	}
	testwait.For(t, "all sessions", func() bool { return h.g.Sessions() == n })
	for i := range clients {
		if serial := fmt.Sprintf("SN-%04d", i); !h.g.Online(serial) {
			t.Fatalf("Online(%s) = false", serial)
		}
	}

	codes := make(chan int, n)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, _, err := c.conn.ReadMessage(); err != nil {
					var ce *websocket.CloseError
					if errors.As(err, &ce) {
						codes <- ce.Code
					} else {
						codes <- -1
					}
					return
				}
			}
		}()
	}
	h.g.Close()
	wg.Wait()
	close(codes)
	counts := map[int]int{}
	for code := range codes {
		counts[code]++
	}
	if diff := cmp.Diff(map[int]int{websocket.CloseGoingAway: n}, counts); diff != "" {
		t.Errorf("close codes mismatch (-want +got):\n%s", diff)
	}
	if got := h.g.Sessions(); got != 0 {
		t.Errorf("Sessions after Close = %d, want 0", got)
	}
	if got := len(h.ev.Events("disconnected ")); got != n {
		t.Errorf("DeviceDisconnected called %d times, want %d", got, n)
	}
}

// TerminalUpdateStatus records an update report; updateErr fails it.
func (r *recorder) TerminalUpdateStatus(ctx context.Context, serial, updateID string, u instore.UpdateReport) error {
	r.add("update-status %s %s %s %s %s", serial, updateID, u.Status, u.SoftwareVersion, u.Reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updateErr
}

// TestSendUpdate: an update command carries the package; linked carries the
// minimum software version the domain gives for the device.
func TestSendUpdate(t *testing.T) {
	minimum := map[string]string{"SN-UPD": "2.0.0"}
	h := newHarness(t, Config{MinSoftwareVersion: func(ctx context.Context, serial string) (string, error) {
		return minimum[serial], nil
	}})
	ctx := context.Background()
	for _, tc := range []struct {
		name, serial, want string
	}{
		{"with a minimum", "SN-UPD", `{"terminalId":"10000001","minSoftwareVersion":"2.0.0"}`},
		{"without a minimum", "SN-NOMIN", `{"terminalId":"10000001"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(tc.serial)
			if err := h.g.SendLinked(ctx, tc.serial, "10000001"); err != nil {
				t.Fatal(err)
			}
			if env := c.next(); env.Type != protocol.TypeLinked || string(env.Data) != tc.want {
				t.Errorf("linked = %s %s, want %s", env.Type, env.Data, tc.want)
			}
		})
	}

	c := h.connect("SN-UPD2")
	u := &instore.Update{ID: "upd_1", TerminalID: "10000001", PackageID: "countertop-2.0.0", Status: instore.UpdateScheduled}
	p := &instore.Package{ID: "countertop-2.0.0", Model: instore.ModelCountertop, Name: "Countertop app", Version: "2.0.0",
		Mandatory: true, SizeBytes: 1024, SHA256: strings.Repeat("ab", 32)}
	if err := h.g.SendUpdate(ctx, "SN-UPD2", u, p); err != nil {
		t.Fatal(err)
	}
	env := c.next()
	var got protocol.Update
	if err := protocol.DecodeData(env, &got); err != nil {
		t.Fatalf("DecodeData(%s) = %v", env.Data, err)
	}
	want := protocol.Update{PackageID: p.ID, Name: p.Name, Version: "2.0.0", SizeBytes: 1024, SHA256: p.SHA256, Mandatory: true}
	if env.Type != protocol.TypeUpdate || env.Ref != "upd_1" {
		t.Errorf("message = %s ref %s, want update ref upd_1", env.Type, env.Ref)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update data (-want +got):\n%s", diff)
	}
	if err := h.g.SendUpdate(ctx, "SN-OFFLINE", u, p); !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendUpdate(offline) = %v, want ErrOffline", err)
	}
}

// TestUpdateStatus: update-status reports reach the domain and are
// confirmed once recorded; a report the domain refuses is not confirmed
// and leaves the session up; a malformed one closes it.
func TestUpdateStatus(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-UPSTATUS"
	c := h.connect(serial)
	for _, tc := range []struct {
		name, frame, event string
	}{
		{"downloading", `{"type":"update-status","id":"u-1","ref":"upd_1","data":{"status":"DOWNLOADING"}}`,
			"update-status " + serial + " upd_1 DOWNLOADING  "},
		{"installed", `{"type":"update-status","id":"u-2","ref":"upd_1","data":{"status":"INSTALLED","softwareVersion":"2.0.0"}}`,
			"update-status " + serial + " upd_1 INSTALLED 2.0.0 "},
		{"failed", `{"type":"update-status","id":"u-3","ref":"upd_2","data":{"status":"FAILED","reason":"checksum mismatch"}}`,
			"update-status " + serial + " upd_2 FAILED  checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(tc.frame)
			confirm := c.next()
			if confirm.Type != protocol.TypeConfirm || confirm.Ref == "" {
				t.Errorf("answer = %+v, want a confirm", confirm)
			}
			if got := h.ev.count(tc.event); got != 1 {
				t.Errorf("event %q recorded %d times, want 1; events %q", tc.event, got, h.ev.Events("update-status"))
			}
		})
	}

	// Refused by the domain: no confirm, the session stays.
	h.ev.set(func(r *recorder) { r.updateErr = errors.New("store down") })
	c.send(`{"type":"update-status","id":"u-4","ref":"upd_3","data":{"status":"DOWNLOADING"}}`)
	testwait.For(t, "the refused report", func() bool { return h.ev.count("update-status "+serial+" upd_3 DOWNLOADING  ") == 1 })
	h.ev.set(func(r *recorder) { r.updateErr = nil })
	c.send(`{"type":"update-status","id":"u-5","ref":"upd_3","data":{"status":"DOWNLOADING"}}`)
	if env := c.next(); env.Type != protocol.TypeConfirm || env.Re != "u-5" {
		t.Errorf("after a refused report, answer = %+v, want the confirm of u-5 only", env)
	}

	for _, tc := range []struct{ name, frame string }{
		{"no data", `{"type":"update-status","id":"u-6","ref":"upd_1"}`},
		{"unknown status", `{"type":"update-status","id":"u-7","ref":"upd_1","data":{"status":"DONE"}}`},
		{"installed without version", `{"type":"update-status","id":"u-8","ref":"upd_1","data":{"status":"INSTALLED"}}`},
		{"failed without reason", `{"type":"update-status","id":"u-9","ref":"upd_1","data":{"status":"FAILED"}}`},
		{"no ref", `{"type":"update-status","id":"u-10","data":{"status":"DOWNLOADING"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(serial + "-" + strings.ReplaceAll(tc.name, " ", "-"))
			c.send(tc.frame)
			c.expectClose(protocol.CloseMalformed)
		})
	}
}

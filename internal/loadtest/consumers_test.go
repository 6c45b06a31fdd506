package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestPurchaseWithConsumers runs purchase --webhooks 1 --streams 1 on a
// server in this process, briefly: the lives with the consumers (a
// verifying receiver, a stream follower) against the same lives without
// them, in alternating rounds; every delivery verified, nothing out of
// order, no error. Then the webhooks scenario: the backlog drained by the
// node arrives whole, verified and in order. No figure is compared with a
// threshold.
func TestPurchaseWithConsumers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	// The in-process server trusts the receiver through SSL_CERT_FILE.
	t.Setenv("SSL_CERT_FILE", "")
	ctx := context.Background()
	r, err := Run(ctx, "purchase", Options{InProcess: true, Terminals: 2, Duration: time.Second, Rounds: 2,
		Webhooks: 1, Streams: 1, Synchronous: "NORMAL", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Consumers
	if c == nil || c.Webhooks != 1 || c.Streams != 1 {
		t.Fatalf("consumers %+v, want 1 webhook and 1 stream", c)
	}
	if r.Errors != 0 || r.ConsumerErrors != 0 || c.BadSignatures != 0 || c.OutOfOrder != 0 || c.StreamDisorder != 0 {
		t.Errorf("errors %d (consumers %d): %+v; notes %v", r.Errors, r.ConsumerErrors, c, r.Notes)
	}
	if c.Deliveries <= 0 || c.StreamEvents <= 0 {
		t.Errorf("the consumers got nothing: %+v", c)
	}
	if r.Ours.Count <= 0 || r.Baseline.Count <= 0 || r.Rounds != 2 || len(r.RoundRatios) != 2 || r.Ratio <= 0 {
		t.Errorf("ours %d lives, without %d, rounds %d %v, ratio %v", r.Ours.Count, r.Baseline.Count, r.Rounds, r.RoundRatios, r.Ratio)
	}
	if !strings.Contains(r.Ours.Name, "1 webhooks + 1 streams") || r.Target != consumersTarget {
		t.Errorf("ours %q, target %v", r.Ours.Name, r.Target)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "consumers:") {
		t.Errorf("table: %v\n%s", err, b.String())
	}

	w, err := Run(ctx, WebhooksScenario, Options{InProcess: true, Terminals: 2, MaxRequests: 60, Webhooks: 2,
		Synchronous: "NORMAL", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if w.Ours.Count <= 0 || w.Ours.Errors != 0 || w.Ours.Rate <= 0 || w.Baseline.Count != 60 || w.Baseline.Rate <= 0 || w.Met != nil {
		t.Errorf("webhooks: ours %+v, baseline %+v, met %v", w.Ours, w.Baseline, w.Met)
	}
	if wc := w.Consumers; wc == nil || wc.Deliveries != w.Ours.Count || wc.BadSignatures != 0 || wc.OutOfOrder != 0 {
		t.Errorf("webhooks: consumers %+v", wc)
	}
}

// TestConsumersOnlyInTheirWindows: the side with consumers enters before
// each of its windows and leaves after it, and the other side's requests
// never run between an enter and its leave.
func TestConsumersOnlyInTheirWindows(t *testing.T) {
	f := &fakeSides{}
	var mu sync.Mutex
	var on bool
	var enters, leaves, during int
	il := &interleave{warmup: 30 * time.Millisecond, ramp: 10 * time.Millisecond, duration: 160 * time.Millisecond, rounds: 4}
	without := f.op(0, 2, func() time.Duration { return time.Millisecond }, 0)
	fn := without.fn
	without.fn = func(ctx context.Context, w int) error {
		mu.Lock()
		if on {
			during++
		}
		mu.Unlock()
		return fn(ctx, w)
	}
	il.sides = [2]ilSide{{op: without}, {op: f.op(1, 2, func() time.Duration { return time.Millisecond }, 0),
		enter: func(context.Context) { mu.Lock(); on = true; enters++; mu.Unlock() },
		leave: func(context.Context) { mu.Lock(); on = false; leaves++; mu.Unlock() }}}
	res := il.run(context.Background())
	if enters != 4 || leaves != 4 {
		t.Errorf("%d enters, %d leaves, want one each per window of the side (4)", enters, leaves)
	}
	if during != 0 {
		t.Errorf("%d requests without the consumers ran while they were on", during)
	}
	if res.sides[0].Count <= 0 || res.sides[1].Count <= 0 {
		t.Errorf("counts %d, %d", res.sides[0].Count, res.sides[1].Count)
	}
}

// TestReceiver: the receiver answers 204 to deliveries signed with the
// endpoint's secret (the reference library's signatures), 400 to others,
// and counts those out of order and sent again; held, it answers once
// released.
func TestReceiver(t *testing.T) {
	rcv, err := newReceiver(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	if k, err := rcv.endpoint(secret, lagAll, 1); err != nil || k != 0 {
		t.Fatalf("endpoint %d, %v", k, err)
	}
	// Endpoint 1 has several deliveries in flight: in order per terminal.
	if k, err := rcv.endpoint(secret, lagAll, 3); err != nil || k != 1 {
		t.Fatalf("endpoint %d, %v", k, err)
	}
	var sendTo func(endpoint int, terminal, secret string, seq int64) int
	client, err := rcv.trustingClient(2)
	if err != nil {
		t.Fatal(err)
	}
	send := func(secret string, seq int64) int { return sendTo(0, "", secret, seq) }
	sendTo = func(endpoint int, terminal, secret string, seq int64) int {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		id := instore.EventID(seq)
		body := []byte(`{"id":"` + id + `","type":"transaction.final","createdAt":"2026-11-26T08:00:00.000000Z","data":{"terminalId":"` + terminal + `"}}`)
		req, err := signedDelivery(context.Background(), wh, fmt.Sprintf("%s/hook/%d", rcv.url, endpoint), id, time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, c := range []struct {
		secret string
		seq    int64
		want   int
	}{{secret, 1, 204}, {secret, 2, 204}, {secret, 2, 204}, {secret, 1, 204}, {"whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 3, 400}} {
		if got := send(c.secret, c.seq); got != c.want {
			t.Errorf("delivery %d: %d, want %d", i, got, c.want)
		}
	}
	if d, rep, ooo, bad := rcv.deliveries.Load(), rcv.repeats.Load(), rcv.outOfOrder.Load(), rcv.badSignatures.Load(); d != 4 || rep != 1 || ooo != 1 || bad != 1 {
		t.Errorf("deliveries %d, repeats %d, out of order %d, bad %d; want 4, 1, 1, 1", d, rep, ooo, bad)
	}
	// Per terminal: T2's 6 after T1's 7 is in order, T1's 5 after its 7 is
	// not.
	for _, c := range []struct {
		terminal string
		seq      int64
	}{{"T1", 7}, {"T2", 6}, {"T1", 5}} {
		if got := sendTo(1, c.terminal, secret, c.seq); got != 204 {
			t.Errorf("delivery of %s %d: %d", c.terminal, c.seq, got)
		}
	}
	if d, ooo := rcv.deliveries.Load(), rcv.outOfOrder.Load(); d != 7 || ooo != 2 {
		t.Errorf("per terminal: deliveries %d, out of order %d; want 7, 2", d, ooo)
	}
	rcv.holdAll()
	done := make(chan int)
	go func() { done <- send(secret, 4) }()
	testwait.For(t, "the receiver to hold the delivery", func() bool { return rcv.waiting.Load() == 1 })
	select {
	case <-done:
		t.Fatal("a held delivery was answered before the release")
	default:
	}
	rcv.release()
	if got := <-done; got != 204 {
		t.Errorf("released delivery: %d", got)
	}
}

// TestReadSSE parses a stream with comments, several data lines and a
// cut last message (not delivered).
func TestReadSSE(t *testing.T) {
	in := ": ping\nretry: 2000\n\nid: evt_1\nevent: a\ndata: {\"x\":\ndata: 1}\n\nid: evt_2\nevent: b\ndata: 2\n\nid: evt_3\ndata: cut"
	var got []string
	err := readSSE(strings.NewReader(in), func(id, event string, data []byte) {
		got = append(got, id+" "+event+" "+string(data))
	})
	want := []string{"evt_1 a {\"x\":\n1}", "evt_2 b 2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if err != io.ErrUnexpectedEOF {
		t.Errorf("end: %v, want io.ErrUnexpectedEOF", err)
	}
}

package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInterleavePlan: rounds alternate which side goes first (A B, B A,
// A B, B A), each side's first window follows the warm-up and the later
// ones the ramp, and both sides get the same total window time.
func TestInterleavePlan(t *testing.T) {
	il := &interleave{warmup: time.Second, ramp: 100 * time.Millisecond, duration: 10*time.Second + 3, rounds: 4}
	plan := il.plan()
	var order []int
	var total [2]time.Duration
	var firsts [2]int
	for i, p := range plan {
		order = append(order, p.side)
		total[p.side] += p.window
		if p.round != i/2 {
			t.Errorf("slot %d: round %d, want %d", i, p.round, i/2)
		}
		want := il.ramp
		if firsts[p.side] == 0 {
			want = il.warmup
		}
		firsts[p.side]++
		if p.lead != want {
			t.Errorf("slot %d (side %d): lead %v, want %v", i, p.side, p.lead, want)
		}
	}
	if got := fmt.Sprint(order); got != "[0 1 1 0 0 1 1 0]" {
		t.Errorf("order %s, want A B B A A B B A", got)
	}
	if total[0] != il.duration || total[1] != il.duration {
		t.Errorf("window time per side %v, want %v each", total, il.duration)
	}
	il.rounds = 1
	if plan := il.plan(); len(plan) != 2 || plan[0].side != 0 || plan[1].side != 1 || plan[0].window != il.duration || plan[1].lead != il.warmup {
		t.Errorf("one round: %+v, want the baseline's warm-up and window, then ours", plan)
	}

	// --max-requests: the windows' shares sum to the side's bound.
	il.rounds, il.max = 3, 10
	var sum int64
	for r := range 3 {
		sum += il.quota(r)
	}
	if sum != 10 {
		t.Errorf("quotas sum to %d, want 10", sum)
	}
	il.max = 2 // fewer requests than rounds: each window still ends
	if q := il.quota(0); q != 1 {
		t.Errorf("quota with max 2 over 3 rounds = %d, want 1", q)
	}
}

// call is one request of a fake op, as the op saw it.
type call struct {
	side       int
	start, end time.Time
	ok         bool
}

// fakeSides are two ops that record their calls and fail when the other
// side has a request in flight: the servers must never be loaded at once.
type fakeSides struct {
	mu       sync.Mutex
	calls    []call
	inflight [2]atomic.Int64
	overlaps atomic.Int64
}

func (f *fakeSides) op(side, workers int, latency func() time.Duration, failEvery int) op {
	var n atomic.Int64
	return op{name: fmt.Sprint("side ", side), unit: "req/s", workers: workers, fn: func(ctx context.Context, w int) error {
		f.inflight[side].Add(1)
		defer f.inflight[side].Add(-1)
		start := time.Now()
		if f.inflight[1-side].Load() != 0 {
			f.overlaps.Add(1)
		}
		time.Sleep(latency()) // the simulated operation's latency, not a wait for the code under test
		if f.inflight[1-side].Load() != 0 {
			f.overlaps.Add(1)
		}
		ok := failEvery == 0 || n.Add(1)%int64(failEvery) != 0
		f.mu.Lock()
		f.calls = append(f.calls, call{side: side, start: start, end: time.Now(), ok: ok})
		f.mu.Unlock()
		if !ok {
			return errors.New("a planned failure")
		}
		return nil
	}}
}

// TestInterleaveRun runs the scheduler with fake ops: the windows run in
// the planned order, never overlap, and the sides never have requests in
// flight at once; each side's figures are its totals over its own windows
// (requests completed inside them, over their time), and the per-round
// rates and ratios are those of the rounds.
func TestInterleaveRun(t *testing.T) {
	f := &fakeSides{}
	const rounds = 4
	il := &interleave{
		warmup: 40 * time.Millisecond, ramp: 15 * time.Millisecond, duration: 240 * time.Millisecond, rounds: rounds,
		sides: [2]ilSide{
			{op: f.op(0, 3, func() time.Duration { return time.Millisecond }, 0)},
			{op: f.op(1, 2, func() time.Duration { return 2 * time.Millisecond }, 7)},
		},
	}
	var started atomic.Int64
	var startedAt atomic.Pointer[time.Time]
	var profileFor time.Duration
	il.sides[1].onStart = func(ctx context.Context, d time.Duration) {
		now := time.Now()
		startedAt.Store(&now)
		started.Add(1)
		profileFor = d
	}
	res := il.run(context.Background())

	if n := f.overlaps.Load(); n != 0 {
		t.Errorf("%d requests ran while the other side had one in flight", n)
	}
	plan := il.plan()
	if len(res.spans) != len(plan) {
		t.Fatalf("%d windows ran, want %d", len(res.spans), len(plan))
	}
	win := il.duration / rounds
	for i, sp := range res.spans {
		if sp.side != plan[i].side || sp.round != plan[i].round {
			t.Errorf("window %d: side %d round %d, want side %d round %d", i, sp.side, sp.round, plan[i].side, plan[i].round)
		}
		if d := sp.end.Sub(sp.start); d != win {
			t.Errorf("window %d lasted %v, want %v", i, d, win)
		}
		if i > 0 && sp.start.Before(res.spans[i-1].end) {
			t.Errorf("window %d starts before window %d ends", i, i-1)
		}
	}
	// Ours (side 1) starts its profile once, at its first window, for
	// the time until its last window ends.
	if started.Load() != 1 {
		t.Errorf("onStart ran %d times, want once", started.Load())
	} else {
		first, last := res.spans[1], res.spans[len(res.spans)-2] // A B B A A B B A
		if at := *startedAt.Load(); at.Before(first.start) || at.After(first.end) {
			t.Errorf("onStart ran at %v, outside ours' first window", at)
		}
		// Planned: from our first window's start to our last's end (as it
		// ran, that is longer by the drains between the windows).
		want := plan[1].window
		for _, p := range plan[2:7] {
			want += p.lead + p.window
		}
		if profileFor != want || profileFor > last.end.Sub(first.start) {
			t.Errorf("onStart for %v, want %v (it ran %v)", profileFor, want, last.end.Sub(first.start))
		}
	}

	for s, side := range res.sides {
		if side.Seconds != il.duration.Seconds() {
			t.Errorf("side %d: %v s measured, want %v", s, side.Seconds, il.duration.Seconds())
		}
		// Count: the calls that completed, successfully, inside one of its
		// windows. The op notes its end just before the scheduler does:
		// calls that ended within a millisecond of a window's edge may go
		// either way.
		var inside, edge int64
		perRound := make([]int64, rounds)
		for _, c := range f.calls {
			if c.side != s || !c.ok {
				continue
			}
			for _, sp := range res.spans {
				if sp.side != s {
					continue
				}
				near := func(t time.Time) bool { return c.end.Sub(t).Abs() < time.Millisecond }
				if near(sp.start) || near(sp.end) {
					edge++
				} else if c.end.After(sp.start) && c.end.Before(sp.end) {
					inside++
					perRound[sp.round]++
				}
			}
		}
		if side.Count < inside || side.Count > inside+edge || inside == 0 {
			t.Errorf("side %d: count %d, want %d (+ up to %d at the edges)", s, side.Count, inside, edge)
		}
		if math.Abs(side.Rate-float64(side.Count)/side.Seconds) > 1e-9 {
			t.Errorf("side %d: rate %v, want count / seconds = %v", s, side.Rate, float64(side.Count)/side.Seconds)
		}
		if len(side.RoundRates) != rounds {
			t.Fatalf("side %d: %d round rates, want %d", s, len(side.RoundRates), rounds)
		}
		var sum float64
		for r, rate := range side.RoundRates {
			sum += rate * win.Seconds()
			if got := rate * win.Seconds(); got < float64(perRound[r]) || got > float64(perRound[r]+edge) {
				t.Errorf("side %d round %d: rate %v × %v = %v requests, want %d", s, r, rate, win, got, perRound[r])
			}
		}
		if math.Round(sum) != float64(side.Count) {
			t.Errorf("side %d: the rounds hold %v requests, the total %d", s, sum, side.Count)
		}
	}
	if res.sides[0].Errors != 0 || res.sides[1].Errors == 0 || res.sides[1].FirstError != "a planned failure" {
		t.Errorf("errors: %d, %d %q; want 0 for side 0, some for side 1", res.sides[0].Errors, res.sides[1].Errors, res.sides[1].FirstError)
	}
	if len(res.roundRatios) != rounds {
		t.Fatalf("%d round ratios, want %d", len(res.roundRatios), rounds)
	}
	for r, ratio := range res.roundRatios {
		if want := res.sides[1].RoundRates[r] / res.sides[0].RoundRates[r]; ratio != want {
			t.Errorf("round %d: ratio %v, want %v", r, ratio, want)
		}
	}
}

// TestInterleaveCancelsDrift: the machine slows down steadily over the
// run (every request, on either side, takes longer as time goes on). Two
// sides doing the same work must then come out about equal when
// interleaved; one window each (the baseline's first) shows the drift as a
// large difference, which is what interleaving is for.
func TestInterleaveCancelsDrift(t *testing.T) {
	measure := func(rounds int) float64 {
		il := &interleave{warmup: 30 * time.Millisecond, ramp: 10 * time.Millisecond, duration: 400 * time.Millisecond, rounds: rounds}
		var nominal time.Duration
		for _, p := range il.plan() {
			nominal += p.lead + p.window
		}
		t0 := time.Now()
		// 1 ms at the start, 5 ms at the end.
		latency := func() time.Duration {
			frac := min(float64(time.Since(t0))/float64(nominal), 1)
			return time.Millisecond + time.Duration(frac*float64(4*time.Millisecond))
		}
		f := &fakeSides{}
		il.sides = [2]ilSide{{op: f.op(0, 4, latency, 0)}, {op: f.op(1, 4, latency, 0)}}
		res := il.run(context.Background())
		return res.sides[1].Rate / res.sides[0].Rate
	}
	// Compared with each other, not with fixed bounds: the sleeps stretch
	// on a loaded machine, alike for both measurements (here 0.55-0.58
	// and 0.96-1.06 when written). A burst of load from another process
	// can still land on one measurement alone (once in CI: 0.80 and 1.28),
	// so the pair is measured up to three times; interleaving must win
	// one of them.
	var tries []string
	for range 3 {
		seq, inter := measure(1), measure(4)
		t.Logf("same work on both sides under a steady slow-down: ratio %.2f in one window each, %.2f in 4 interleaved rounds", seq, inter)
		if math.Abs(inter-1) < math.Abs(seq-1) {
			return
		}
		tries = append(tries, fmt.Sprintf("%.2f vs %.2f", inter, seq))
	}
	t.Errorf("the interleaved ratio was no closer to 1 than one window each in three tries: %v", tries)
}

// TestInterleaveMaxRequests: with a bound on the requests, each window
// ends at its share and the rates are over the shortened windows.
func TestInterleaveMaxRequests(t *testing.T) {
	f := &fakeSides{}
	il := &interleave{warmup: 10 * time.Millisecond, ramp: 5 * time.Millisecond, duration: 10 * time.Second, rounds: 2, max: 40,
		sides: [2]ilSide{
			{op: f.op(0, 2, func() time.Duration { return time.Millisecond }, 0)},
			{op: f.op(1, 2, func() time.Duration { return time.Millisecond }, 0)},
		}}
	start := time.Now()
	res := il.run(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the run took %v: the windows did not end at their share", d)
	}
	for s, side := range res.sides {
		// Each window's share is 20; a worker per window may finish one
		// more before it sees the end.
		if side.Count < 40 || side.Count > 40+2*2 || side.Seconds >= 1 || side.Rate <= 0 {
			t.Errorf("side %d: count %d in %.3f s, want 40 (+ up to 4) quickly", s, side.Count, side.Seconds)
		}
	}
	if len(res.roundRatios) != 2 || res.roundRatios[0] <= 0 || res.roundRatios[1] <= 0 {
		t.Errorf("round ratios %v", res.roundRatios)
	}
}

// TestRawClientRedialsStaleConnection: a kept-alive connection that the
// server closed while it was idle (an idle side of an interleaved run) is
// redialled without an error.
func TestRawClientRedialsStaleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	closed := make(chan struct{}, 3)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			// One answer (keep-alive, as far as the client knows), then
			// the server closes the idle connection.
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			conn.Close()
			closed <- struct{}{}
		}
	}()
	host := ln.Addr().String()
	c := newRawClient(host)
	defer c.Close()
	for i := range 3 {
		st, err := c.do(rawRequest(host, "/"), 5*time.Second)
		if err != nil || st != 200 || string(c.body) != "ok" {
			t.Fatalf("request %d: %d %q %v", i, st, c.body, err)
		}
		<-closed // the server closed the connection: the next request finds it stale
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one per request)", n)
	}
}

func TestTableShowsRoundRatios(t *testing.T) {
	r := &Result{Scenario: "metadata", Backend: "sqlite", Rounds: 4, Ratio: 0.8, RoundRatios: []float64{0.81, 0.79, 0.83, 0.77}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if want := "ratio per round: 0.81 0.79 0.83 0.77 (median 0.80, range 0.77-0.83)"; !strings.Contains(b.String(), want) {
		t.Errorf("the table has no %q:\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "4 interleaved rounds") {
		t.Errorf("the table does not say the rounds:\n%s", b.String())
	}
}

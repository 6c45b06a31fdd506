package crashtest

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sim"
)

// The offline approvals' run (store and forward): each cycle takes the
// virtual terminals' card networks down, sells a mix at or below the floor
// limit and above it, more than the offline queue holds, then brings the
// networks back and lets the forwards flow.
const (
	fwdCycles = 2
	fwdFloor  = 5000 // minor units: at or below it a sale is approved offline
	fwdQueue  = 3    // the offline queue's size
	fwdBelow  = 5    // sales at or below the floor per terminal and cycle: 2 more than the queue holds
	fwdAbove  = 2    // sales above it
)

// TestCrashForwards kills a real `instore serve` with SIGKILL while
// virtual terminals sell offline and then forward their offline
// approvals. The terminals (internal/sim, the code `instore terminal`
// runs) live in the test's process, so that they keep their offline queue
// across the server's kills and the test sets their card network as the
// sandbox does; the raw terminal approves offline too and forwards when
// the test says, which lets it kill the server right after a `forwarded`
// message went out, before its confirm came back. Each of fwdCycles
// cycles: the card networks go down, an ECR per terminal sells (a refund of
// each offline approval is tried while it is QUEUED: 409), a random kill;
// then the networks come back at random moments around another random
// kill, refunds race the forwards, and the raw terminal's forward is cut
// by its own kill. Then every offline approval a terminal made must be
// stored, in the forwarding state the terminal reported (none QUEUED),
// with exactly one FORWARDED or FORWARD_DECLINED timeline entry and one
// transaction.forwarded or transaction.forward_declined event; the sales
// the terminals ended OFFLINE_QUEUE_IS_FULL (7) and TERMINAL_IS_OFFLINE (9)
// are those the floor limit and the full queue make so; no refund of a
// DECLINED or QUEUED sale was accepted; nothing is PENDING.
func TestCrashForwards(t *testing.T) {
	crashTest(t, "kills it as offline approvals are forwarded", func(set settings) string {
		return fmt.Sprintf("%d cycles, %d terminals", fwdCycles, set.terminals)
	}, runForwards)
}

// fwdEnv is a store's run with offline approvals.
type fwdEnv struct {
	*simsEnv
	// want is what the terminals reported of each offline approval they
	// made: FORWARDED or DECLINED, by transaction.
	want map[string]instore.ForwardingState
	// full: the terminal's offline queue filled up in a cycle (by
	// terminal index).
	full map[int]bool
	// queuedRefunds are the keys of the refunds tried while their sale
	// was QUEUED.
	queuedRefunds []string
	chosen        int // chosen kills whose forward was not confirmed when the server died
	// rawSales are the raw terminal's offline approvals, by cycle.
	rawSales []string
}

func runForwards(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := &fwdEnv{simsEnv: newSimsEnv(t, ctx, set, bin, dbURL), want: map[string]instore.ForwardingState{}, full: map[int]bool{}}
	rng := f.seeded(7) // the streams 1 to 6 are the other crash tests'
	start := time.Now()
	for c := 1; c <= fwdCycles; c++ {
		f.sellOffline(ctx, c, rng)
		f.forward(ctx, c, rng)
	}
	f.awaitForwarded(ctx)
	rows := f.settleForwards(ctx)
	f.refundAtEnd(ctx, rows)
	f.checkForwards(ctx, f.settleForwards(ctx))
	t.Logf("%s: %d cycles in %s, %d offline approvals forwarded (%d declined), %d kills (%d right after a forward, before its confirm)",
		f.backend(), fwdCycles, time.Since(start).Round(time.Second), len(f.want), f.declined(), f.srv.starts-1, f.chosen)
}

// simsEnv is a paEnv whose virtual terminals run in this process.
type simsEnv struct {
	*paEnv
	sims []*sim.Terminal // the virtual terminals, by index (the raw terminal is the last of e.terms)
}

// newSimsEnv is newPAEnv with the virtual terminals run in this process
// (startSims) and the raw terminal last.
func newSimsEnv(t *testing.T, ctx context.Context, set settings, bin, dbURL string) *simsEnv {
	e := newCrashEnv(t, set, bin, dbURL)
	acc := e.provision(set.terminals + 1)
	e.startServer(ctx, acc)
	sims := e.startSims(ctx, acc.secrets[:set.terminals])
	e.startRaw(ctx, acc.secrets[set.terminals])
	return &simsEnv{paEnv: &paEnv{crashEnv: e, told: map[string]instore.TransactionStatus{}}, sims: sims}
}

// startSims runs a virtual terminal per secret in this process, on the
// gateway, links each, and returns them by index.
func (e *crashEnv) startSims(ctx context.Context, secrets []string) []*sim.Terminal {
	t := e.t
	var sims []*sim.Terminal
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	for i, secret := range secrets {
		logf, err := os.Create(filepath.Join(e.dir, serial(i, len(e.terms))+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		vt, err := sim.New(sim.Config{GatewayURL: e.srv.terminal(), SerialNumber: serial(i, len(e.terms)), Secret: secret,
			Delay: cardDelays[i%len(cardDelays)], BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second,
			Logger: slog.New(slog.NewJSONHandler(logf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, vt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			vt.Run(runCtx)
		}()
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		st, ok := vt.Await(wctx, func(s sim.State) bool { return s.LinkCode != "" })
		cancel()
		if !ok {
			t.Fatalf("terminal %d shows no link code within 15 s", i)
		}
		e.link(ctx, i, st.LinkCode)
	}
	return sims
}

// sellOffline takes every card network down and sells on each terminal,
// the raw one included, while the server is killed once at a random
// moment.
func (f *fwdEnv) sellOffline(ctx context.Context, cycle int, rng *mrand.Rand) {
	for _, vt := range f.sims {
		if err := vt.SetCardNetwork(false, fwdFloor, fwdQueue); err != nil {
			f.t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range f.sims {
		wg.Add(1)
		seed := rng.Uint64()
		go func() {
			defer wg.Done()
			f.sell(ctx, cycle, i, mrand.New(mrand.NewPCG(seed, 1)))
		}()
	}
	f.rawOffline(ctx, cycle)
	run := f.set.runMin + time.Duration(rng.Int64N(int64(f.set.runMax-f.set.runMin)))
	down := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
	sleep(ctx, run)
	f.restartAfter(ctx, down, fmt.Sprintf("cycle %d, offline sales", cycle))
	f.t.Logf("%s cycle %d: SIGKILL after %s of offline sales, %s down", f.backend(), cycle, run.Round(time.Millisecond), down.Round(time.Millisecond))
	wg.Wait()
}

// sell pays fwdBelow purchases at or below the floor limit (the limit
// itself among them) and fwdAbove above it, shuffled, on terminal i, each
// until it has a transaction (a new key while the terminal is busy or
// offline); of each approved offline, a refund is tried at once, which
// must be refused: the sale is QUEUED.
func (f *fwdEnv) sell(ctx context.Context, cycle, i int, rng *mrand.Rand) {
	amounts := []int64{fwdFloor}
	for len(amounts) < fwdBelow {
		amounts = append(amounts, 100*(1+rng.Int64N(fwdFloor/100)))
	}
	for range fwdAbove {
		amounts = append(amounts, fwdFloor+100*(1+rng.Int64N(50)))
	}
	rng.Shuffle(len(amounts), func(a, b int) { amounts[a], amounts[b] = amounts[b], amounts[a] })
	for n, amount := range amounts {
		key := fmt.Sprintf("fwd-c%d-t%d-%d", cycle, i, n)
		out, approved := f.runTaken(ctx, i, key, func(key string) paOp {
			return paOp{path: "/in-store/api/v1/purchase", key: key,
				body: map[string]any{"terminalId": f.terms[i], "amount": amount, "currency": "SEK"}}
		})
		if approved && rng.IntN(2) == 0 {
			f.refundQueued(ctx, i, out.ref, amount, key+"-refund")
		}
	}
}

// runTaken runs the request op makes of a key (paEnv.run) until the
// terminal takes it: while it is answered busy or offline (WP09, WP30,
// WP23: no transaction), again with a new key (key, then key-1, ...)
// after a pause, for up to keyBudget.
func (f *fwdEnv) runTaken(ctx context.Context, term int, key string, op func(key string) paOp) (outcome, bool) {
	start := time.Now()
	for try := 0; ; try++ {
		k := key
		if try > 0 {
			k = fmt.Sprintf("%s-%d", key, try)
		}
		out, approved := f.run(ctx, term, op(k))
		if out.kind != "refused" || !busyOrOffline(out.last.code) || time.Since(start) > keyBudget || ctx.Err() != nil {
			return out, approved
		}
		sleep(ctx, retryPause)
	}
}

// refundQueued tries a refund of a sale still QUEUED (its terminal's card
// network is down): it must be refused, 409 conflict.
func (f *fwdEnv) refundQueued(ctx context.Context, term int, ref string, amount int64, key string) {
	f.mu.Lock()
	f.queuedRefunds = append(f.queuedRefunds, key)
	f.mu.Unlock()
	out, _ := f.runTaken(ctx, term, key, func(key string) paOp { return refundOp(f.terms[term], ref, amount, key) })
	if a := out.last; out.kind != "refused" || a.status != 409 || a.code != "conflict" {
		f.led.violation("key %s: a refund of %s, an offline approval still QUEUED, was answered %s (%s), want 409 conflict", key, ref, a, out.kind)
	}
}

func refundOp(terminalID, ref string, amount int64, key string) paOp {
	return paOp{path: "/in-store/api/v1/refund", key: key, body: map[string]any{
		"terminalId": terminalID, "amount": amount, "currency": "SEK", "originalOnlineAPIRefId": ref}}
}

// forward brings the card networks back, each at a random moment in the
// first half second, while the server is killed once at a random moment
// in it; refunds of the offline approvals race the forwards. Before, the
// raw terminal's forward is cut by a kill of its own. Each terminal's
// queue is taken as it is (every sale of the cycle has ended): the first
// forward of some terminals is declined by the issuer.
func (f *fwdEnv) forward(ctx context.Context, cycle int, rng *mrand.Rand) {
	f.rawForward(ctx, cycle, cycle == 2)
	var wg sync.WaitGroup
	for i, vt := range f.sims {
		st, ok := vt.Await(ctx, func(s sim.State) bool { return !inTransaction(s.Screen) })
		if !ok {
			f.t.Fatalf("terminal %d is still in a transaction (%q)", i, st.Screen)
		}
		queued := st.CardNetwork.Queued
		declined := i == 0 || rng.IntN(2) == 0
		f.mu.Lock()
		for n, ref := range queued {
			f.want[ref] = instore.ForwardForwarded
			if n == 0 && declined {
				f.want[ref] = instore.ForwardDeclined
			}
		}
		f.full[i] = f.full[i] || len(queued) == fwdQueue
		f.mu.Unlock()
		after := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleep(ctx, after)
			vt.SetNextForward(declined)
			if err := vt.SetCardNetwork(true, 0, 0); err != nil {
				f.led.violation("terminal %d: card network up: %v", i, err)
			}
			f.raceRefunds(ctx, cycle, i, queued, mrand.New(mrand.NewPCG(seed, 2)))
		}()
	}
	run := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
	down := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
	sleep(ctx, run)
	f.restartAfter(ctx, down, fmt.Sprintf("cycle %d, forwards", cycle))
	f.t.Logf("%s cycle %d: SIGKILL %s into the forwards, %s down", f.backend(), cycle, run.Round(time.Millisecond), down.Round(time.Millisecond))
	wg.Wait()
}

// inTransaction reports whether a virtual terminal's screen shows a
// transaction in progress (its amount, or a stage of it).
func inTransaction(screen string) bool {
	return strings.Contains(screen, " - ") || screen == "Enter PIN" || screen == "Authorizing"
}

// raceRefunds tries to refund one or two of the offline approvals queued
// on terminal i as they are forwarded: each is refused (still QUEUED, or
// DECLINED) or accepted (FORWARDED); the checks find any accepted for a
// sale that ended DECLINED.
func (f *fwdEnv) raceRefunds(ctx context.Context, cycle, i int, queued []string, rng *mrand.Rand) {
	if len(queued) == 0 {
		return
	}
	for n := range 1 + rng.IntN(2) {
		ref := queued[rng.IntN(len(queued))]
		f.runTaken(ctx, i, fmt.Sprintf("fwd-c%d-t%d-race-%d", cycle, i, n), func(key string) paOp { return refundOp(f.terms[i], ref, 100, key) })
	}
}

// awaitForwarded waits, for up to keyBudget, until every terminal has
// forwarded its queue and seen each report confirmed.
func (f *fwdEnv) awaitForwarded(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, keyBudget)
	defer cancel()
	for i, vt := range f.sims {
		st, ok := vt.Await(wctx, func(s sim.State) bool {
			return len(s.CardNetwork.Queued) == 0 && len(s.CardNetwork.Unconfirmed) == 0
		})
		if !ok {
			f.t.Errorf("%s: terminal %d still has %d approvals queued and %d forwards unconfirmed %s after the last restart",
				f.backend(), i, len(st.CardNetwork.Queued), len(st.CardNetwork.Unconfirmed), keyBudget)
		}
	}
	ok := false
	for !ok && wctx.Err() == nil {
		ok = f.raw.unconfirmedCount() == 0
		if !ok {
			sleep(wctx, retryPause)
		}
	}
	if !ok {
		f.t.Errorf("%s: the raw terminal still has %d reports unconfirmed %s after the last restart", f.backend(), f.raw.unconfirmedCount(), keyBudget)
	}
}

func (f *fwdEnv) declined() int {
	n := 0
	for _, s := range f.want {
		if s == instore.ForwardDeclined {
			n++
		}
	}
	return n
}

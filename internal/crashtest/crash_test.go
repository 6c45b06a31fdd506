package crashtest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// The server's and terminals' time-outs, short so that a round's
// transactions end within seconds of a restart.
const (
	ackTimeout  = time.Second
	txDeadline  = 3 * time.Second
	idemWait    = 2 * time.Second
	defaultRuns = 3
	soakRuns    = 40
)

// cardDelays are the terminals' times to read a card, by index: with none,
// a purchase's life is mostly its POST, which a kill then often cuts; with
// one, transactions are PENDING when the server dies, and end after it
// restarts.
var cardDelays = []time.Duration{0, 300 * time.Millisecond, 100 * time.Millisecond}

// settings are the run's size, from the environment.
type settings struct {
	rounds, terminals int
	seed              uint64
	// A round's purchases run for a random time in [runMin, runMax) before
	// the kill.
	runMin, runMax time.Duration
	limit          time.Duration // the whole run of one store
}

func loadSettings(t *testing.T) settings {
	s := settings{rounds: defaultRuns, terminals: 3, runMin: 300 * time.Millisecond, runMax: 2 * time.Second}
	if os.Getenv("INSTORE_CRASH_SOAK") == "1" {
		s.rounds, s.terminals, s.runMax = soakRuns, 6, 8*time.Second
	}
	if v := os.Getenv("INSTORE_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("INSTORE_CRASH_ROUNDS=%q: want a number of rounds from 1", v)
		}
		s.rounds = n
	}
	s.seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("INSTORE_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("INSTORE_CRASH_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	// A round takes seconds; a stuck key adds keyBudget to its round.
	s.limit = 2*time.Minute + time.Duration(s.rounds)*(s.runMax+3*keyBudget)
	return s
}

// TestCrash kills a real `instore serve` with SIGKILL during concurrent
// purchases, restarts it on the same data, and checks the API's promises
// after each restart; then kills it at a chosen moment: after the terminal
// acknowledged a purchase, before the purchase's 201 was stored.
func TestCrash(t *testing.T) {
	crashTest(t, "kills it under load for about a minute", func(set settings) string {
		return fmt.Sprintf("%d rounds, %d terminals", set.rounds, set.terminals)
	}, runCrash)
}

func runCrash(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), set.limit)
	defer cancel()
	e := newCrashEnv(t, set, bin, dbURL)
	e.setup(ctx)
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	follower := e.follow(fctx)
	start := time.Now()
	rng := e.seeded(1)
	for round := 1; round <= set.rounds; round++ {
		e.randomRound(ctx, round, rng)
		e.check(ctx, fmt.Sprintf("round %d", round))
	}
	e.ackedThenKilled(ctx, "frozen")
	if e.postgres() {
		e.ackedThenKilled(ctx, "locked")
	}
	e.unconfirmedKilled(ctx)
	e.check(ctx, "the end")
	e.checkStream(ctx, follower, stopFollowing)
	named, acked := e.led.known()
	t.Logf("%s: %d rounds and the chosen kills in %s; %d transactions named to the ECR, %d acknowledged (201)",
		e.backend(), set.rounds, time.Since(start).Round(time.Second), len(named), len(acked))
}

func (e *crashEnv) backend() string {
	if e.postgres() {
		return "postgres"
	}
	return "sqlite"
}

// randomRound runs a worker per terminal process, each paying one purchase
// after another with a key of its own, kills the server at a random moment
// and starts it again on the same data while they go on, then lets each
// worker finish the purchase it is in and stops them.
func (e *crashEnv) randomRound(ctx context.Context, round int, rng *mrand.Rand) {
	phase, stop := context.WithCancel(ctx)
	wg, counts := e.startWorkers(rng, func(i int, rng *mrand.Rand, counts map[string]int) {
		e.work(ctx, phase, round, i, rng, counts)
	})
	run := e.set.runMin + time.Duration(rng.Int64N(int64(e.set.runMax-e.set.runMin)))
	down := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
	sleep(ctx, run)
	e.srv.kill9()
	sleep(ctx, down)
	if err := e.srv.start(ctx); err != nil {
		stop()
		e.t.Fatalf("round %d: restart: %v", round, err)
	}
	stop()
	wg.Wait()
	e.t.Logf("%s round %d: SIGKILL after %s of purchases, %s down; purchases: %v", e.backend(), round,
		run.Round(time.Millisecond), down.Round(time.Millisecond), sumCounts(counts))
}

// startWorkers runs work on a goroutine per terminal process i, each with
// its own random source seeded from rng and its own counts, and returns
// what to wait on and each worker's counts.
func (e *crashEnv) startWorkers(rng *mrand.Rand, work func(i int, rng *mrand.Rand, counts map[string]int)) (*sync.WaitGroup, []map[string]int) {
	var wg sync.WaitGroup
	counts := make([]map[string]int, len(e.procs))
	for i := range e.procs {
		wg.Add(1)
		seed := rng.Uint64()
		counts[i] = map[string]int{}
		go func() {
			defer wg.Done()
			work(i, mrand.New(mrand.NewPCG(seed, 1)), counts[i])
		}()
	}
	return &wg, counts
}

// sumCounts adds the workers' counts up.
func sumCounts(counts []map[string]int) map[string]int {
	total := map[string]int{}
	for _, c := range counts {
		for k, n := range c {
			total[k] += n
		}
	}
	return total
}

// work pays purchases on terminal i until phase ends; the one in progress
// is finished under ctx.
func (e *crashEnv) work(ctx, phase context.Context, round, i int, rng *mrand.Rand, counts map[string]int) {
	for n := 0; phase.Err() == nil; n++ {
		key := fmt.Sprintf("r%d-t%d-%d", round, i, n)
		// Amounts ending in 00: approved after the terminal's card delay.
		out := e.ecr.purchase(ctx, i, e.terms[i], 100*(1+rng.Int64N(900)), key)
		counts[out.kind]++
		switch out.kind {
		case "acked":
			st, ok := e.ecr.final(ctx, out.ref)
			if !ok {
				e.led.violation("key %s: its transaction %s is not final within %s", key, out.ref, keyBudget)
			} else if st == instore.StatusTerminalIsBusy {
				counts["busy"]++ // reported by check (checkBusy)
			}
		default:
			// Busy, offline while reconnecting, or given up: a new key
			// after a pause.
			sleep(ctx, retryPause)
		}
	}
}

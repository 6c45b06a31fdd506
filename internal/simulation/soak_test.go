package simulation

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSoak runs fresh seeds for INSTORE_SIM_DURATION (e.g. 3m in .ci/run,
// 8h for a soak) on INSTORE_SIM_WORKERS goroutines (default: one per
// core), from INSTORE_SIM_BASE (default: a random base, printed), and
// stops at the first broken invariant with its seed and the command that
// replays it.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("INSTORE_SIM_DURATION"))
	if err != nil || d <= 0 {
		t.Skip("set INSTORE_SIM_DURATION (e.g. 3m) to run fresh seeds for that long")
	}
	base := rand.Uint64() >> 20
	if b, err := strconv.ParseUint(os.Getenv("INSTORE_SIM_BASE"), 10, 64); err == nil {
		base = b
	}
	workers := envInt("INSTORE_SIM_WORKERS", runtimeCPUs())
	t.Logf("seeds from %d on %d workers for %v (INSTORE_SIM_BASE=%d repeats this run)", base, workers, d, base)
	var next, histories, steps atomic.Uint64
	var failed atomic.Bool
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		tpl, err := Prepare(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for time.Since(start) < d && !failed.Load() {
				seed := base + next.Add(1) - 1
				res, err := Run(Config{Seed: seed, Template: tpl})
				if err != nil {
					t.Error(err)
					failed.Store(true)
					return
				}
				histories.Add(1)
				steps.Add(uint64(res.Steps))
				if res.Failure != nil && !failed.Swap(true) {
					mu.Lock()
					t.Errorf("seed %d: %v\nreplay: INSTORE_SIM_SEED=%d go test ./internal/simulation -run TestReplay -v\n%s",
						seed, res.Failure, seed, strings.Join(Shorten(res), "\n"))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	h := histories.Load()
	t.Logf("%d histories, %d steps (%.0f per history), %.1f histories/s on %d workers", h, steps.Load(),
		float64(steps.Load())/float64(max(h, 1)), float64(h)/el.Seconds(), workers)
}

package simulation

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/instore-dev/instore/internal/mutant"
)

// run runs one seed and fails t with its replay command if an invariant
// broke.
func run(t *testing.T, tpl *Template, seed uint64, steps int) *Result {
	t.Helper()
	res, err := Run(Config{Seed: seed, Steps: steps, Template: tpl})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if res.Failure != nil {
		t.Errorf("seed %d: %v\nreplay: INSTORE_SIM_SEED=%d go test ./internal/simulation -run TestReplay -v\n%s",
			seed, res.Failure, seed, strings.Join(Shorten(res), "\n"))
	}
	return res
}

func TestSimulationShort(t *testing.T) {
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := envInt("INSTORE_SIM_HISTORIES", 8)
	base := uint64(envInt("INSTORE_SIM_BASE", 1))
	for i := range n {
		run(t, tpl, base+uint64(i), 0)
	}
}

func TestDeterministic(t *testing.T) {
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{7, 42} {
		a := run(t, tpl, seed, 0)
		for other := range uint64(3) { // what ran before in the process must not matter
			run(t, tpl, 1000+other, 0)
		}
		b := run(t, tpl, seed, 0)
		if a.Hash != b.Hash || len(a.Trace) != len(b.Trace) {
			for i := range min(len(a.Trace), len(b.Trace)) {
				if a.Trace[i] != b.Trace[i] {
					t.Fatalf("seed %d: traces part at line %d:\n%s\n%s", seed, i, a.Trace[i], b.Trace[i])
				}
			}
			t.Fatalf("seed %d: two runs differ: %s (%d lines) and %s (%d lines)", seed, a.Hash, len(a.Trace), b.Hash, len(b.Trace))
		}
		t.Logf("seed %d: %d steps, %d trace lines, %d sales, %d crashes, hash %s", seed, a.Steps, len(a.Trace), a.Sales, a.Crashes, a.Hash[:16])
	}
}

// TestSeeds runs the seeds that once failed (testdata/seeds.txt).
func TestSeeds(t *testing.T) {
	f, err := os.Open("testdata/seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seed, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("testdata/seeds.txt: %q: %v", line, err)
		}
		run(t, tpl, seed, 0)
	}
}

// TestReplay replays INSTORE_SIM_SEED and prints its whole trace.
func TestReplay(t *testing.T) {
	s := os.Getenv("INSTORE_SIM_SEED")
	if s == "" {
		t.Skip("set INSTORE_SIM_SEED to replay a seed")
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if m := os.Getenv("INSTORE_SIM_MUTANT"); m != "" {
		defer mutant.Set(mutant.Name(m))()
	}
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, tpl, seed, envInt("INSTORE_SIM_STEPS", 0))
	for _, l := range res.Trace {
		fmt.Println(l)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func runtimeCPUs() int { return runtime.GOMAXPROCS(0) }

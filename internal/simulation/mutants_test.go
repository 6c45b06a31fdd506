package simulation

import (
	"os"
	"testing"

	"github.com/instore-dev/instore/internal/mutant"
)

// TestMutants switches each named bug on (internal/mutant) and runs
// seeds until one history breaks an invariant: the simulation catches
// every one of them within its budget, and says with which seed.
func TestMutants(t *testing.T) {
	if os.Getenv("INSTORE_SIM_MUTANTS") == "" {
		t.Skip("set INSTORE_SIM_MUTANTS=1 to run every mutant (.ci/run does; a few minutes)")
	}
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	budget := envInt("INSTORE_SIM_MUTANT_SEEDS", 300)
	for _, m := range mutant.All {
		t.Run(string(m), func(t *testing.T) {
			restore := mutant.Set(m)
			defer restore()
			for seed := uint64(1); seed <= uint64(budget); seed++ {
				res, err := Run(Config{Seed: seed, Template: tpl})
				if err != nil {
					t.Fatal(err)
				}
				if res.Failure != nil {
					t.Logf("caught by seed %d at step %d: %s: %s", seed, res.Failure.Step, res.Failure.Invariant, res.Failure.Detail)
					return
				}
			}
			t.Errorf("not caught by seeds 1 to %d", budget)
		})
	}
}

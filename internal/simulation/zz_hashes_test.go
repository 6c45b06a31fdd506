package simulation

import (
	"fmt"
	"os"
	"testing"
)

func TestZZHashes(t *testing.T) {
	if os.Getenv("ZZ_HASHES") == "" {
		t.Skip()
	}
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 16; seed++ {
		res, err := Run(Config{Seed: seed, Template: tpl})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("HASH %d %s %d %v\n", seed, res.Hash, len(res.Trace), res.Failure)
	}
}

package simulation

import "testing"

// TestRelinks runs histories of seeds that relink (relink.go), from
// INSTORE_SIM_RELINK_BASE (118, a short history with three relinks and a
// lapse), skipping the seeds that do not (the other tests run those): by
// default until one finished a relink and saw a pre-auth lapse (six at
// most), so that every go test sees the device-swap rules at work, in
// half a second; with INSTORE_SIM_RELINK_SEEDS, that many histories (a
// soak of relinks). It fails if an invariant broke, or if no relink was
// finished or no pre-auth lapsed in all of them.
func TestRelinks(t *testing.T) {
	tpl, err := Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := envInt("INSTORE_SIM_RELINK_SEEDS", 0)
	ran, relinks, lapses := 0, 0, 0
	for seed := uint64(envInt("INSTORE_SIM_RELINK_BASE", 118)); ; seed++ {
		if want > 0 && ran == want || want == 0 && (ran == 6 || relinks > 0 && lapses > 0) {
			break
		}
		if newRelinks(seed, nil).every == 0 {
			continue
		}
		res := run(t, tpl, seed, 0)
		ran, relinks, lapses = ran+1, relinks+res.Relinks, lapses+res.Lapses
		t.Logf("seed %d: %d relinks, %d lapses, %d steps, %d crashes", seed, res.Relinks, res.Lapses, res.Steps, res.Crashes)
	}
	if relinks == 0 || lapses == 0 {
		t.Errorf("%d histories that relink finished %d relinks and saw %d pre-auths lapse: the device-swap rules were not exercised", ran, relinks, lapses)
	}
}

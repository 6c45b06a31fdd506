package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStoreCounters: each store counter reads its own value of its source.
func TestStoreCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterCommits(reg, func() (int64, int64) { return 1, 2 })
	RegisterPipelined(reg, func() (int64, int64, int64) { return 3, 4, 5 }, func() (int64, int64) { return 6, 7 })
	RegisterToldFlushes(reg, func() (int64, int64) { return 8, 9 })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
	}
	for name, want := range map[string]float64{
		"instore_store_durable_commits_total":      1,
		"instore_store_relaxed_commits_total":      2,
		"instore_store_pipelined_groups_total":     3,
		"instore_store_pipelined_statements_total": 4,
		"instore_store_pipelined_fallbacks_total":  5,
		"instore_store_read_groups_total":          6,
		"instore_store_grouped_reads_total":        7,
		"instore_store_told_flushes_total":         8,
		"instore_store_told_flush_failures_total":  9,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v", name, v, ok, want)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d metrics registered, want 9: %v", len(got), got)
	}
}

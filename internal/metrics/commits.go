package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterCommits registers instore_store_durable_commits_total and
// instore_store_relaxed_commits_total, the write transactions the store
// committed that were answered once on disk, and before (progress stages,
// Idempotency-Key claims, ...), read from commits at each scrape.
func RegisterCommits(reg prometheus.Registerer, commits func() (durable, relaxed int64)) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_durable_commits_total",
			Help: "Write transactions the store committed and answered once they were on disk.",
		}, func() float64 { d, _ := commits(); return float64(d) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_relaxed_commits_total",
			Help: "Write transactions the store committed and answered before they were on disk.",
		}, func() float64 { _, r := commits(); return float64(r) }))
}

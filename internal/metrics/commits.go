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

// RegisterPipelined registers instore_store_pipelined_groups_total,
// instore_store_pipelined_statements_total and
// instore_store_pipelined_fallbacks_total: PostgreSQL's groups of
// single-statement writes sent in one round trip as one transaction, the
// statements they held, and the groups run again statement by statement.
func RegisterPipelined(reg prometheus.Registerer, pipelined func() (groups, statements, fallbacks int64)) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_pipelined_groups_total",
			Help: "Groups of single-statement writes sent to PostgreSQL together, as one transaction.",
		}, func() float64 { g, _, _ := pipelined(); return float64(g) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_pipelined_statements_total",
			Help: "Single-statement writes sent to PostgreSQL in a group.",
		}, func() float64 { _, s, _ := pipelined(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_pipelined_fallbacks_total",
			Help: "Groups whose statements ran again one by one (a statement refused, or a connection found dead).",
		}, func() float64 { _, _, f := pipelined(); return float64(f) }))
}

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

// RegisterPipelined registers PostgreSQL's groups, read from pipelined and
// reads at each scrape: instore_store_pipelined_groups_total,
// instore_store_pipelined_statements_total and
// instore_store_pipelined_fallbacks_total (the groups of single-statement
// writes sent in one round trip as one transaction, the statements they
// held, the groups run again statement by statement), and
// instore_store_read_groups_total and instore_store_grouped_reads_total
// (the groups of short reads sent in one round trip, the reads they held).
func RegisterPipelined(reg prometheus.Registerer, pipelined func() (groups, statements, fallbacks int64), reads func() (groups, reads int64)) {
	pick := func(i int) func() float64 {
		return func() float64 {
			g, s, f := pipelined()
			rg, r := reads()
			return float64([]int64{g, s, f, rg, r}[i])
		}
	}
	for i, c := range []struct{ name, help string }{
		{"store_pipelined_groups_total", "Groups of single-statement writes sent to PostgreSQL together, as one transaction."},
		{"store_pipelined_statements_total", "Single-statement writes sent to PostgreSQL in a group."},
		{"store_pipelined_fallbacks_total", "Groups whose statements ran again one by one (a statement refused, or a connection found dead)."},
		{"store_read_groups_total", "Groups of short reads sent to PostgreSQL together, in one round trip."},
		{"store_grouped_reads_total", "Short reads sent to PostgreSQL in a group."},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: c.name, Help: c.help}, pick(i)))
	}
}

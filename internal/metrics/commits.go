package metrics

import "github.com/prometheus/client_golang/prometheus"

// counterFunc is a counter read from its source at each scrape.
type counterFunc struct {
	name, help string
	value      func() int64
}

// registerCounterFuncs registers each of cs as instore_NAME.
func registerCounterFuncs(reg prometheus.Registerer, cs ...counterFunc) {
	for _, c := range cs {
		value := c.value
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: c.name, Help: c.help},
			func() float64 { return float64(value()) }))
	}
}

// first and second return f's first or second result.
func first(f func() (int64, int64)) func() int64  { return func() int64 { a, _ := f(); return a } }
func second(f func() (int64, int64)) func() int64 { return func() int64 { _, b := f(); return b } }

// RegisterCommits registers instore_store_durable_commits_total and
// instore_store_relaxed_commits_total, the write transactions the store
// committed that were answered once on disk, and before (progress stages,
// Idempotency-Key claims, ...), read from commits at each scrape.
func RegisterCommits(reg prometheus.Registerer, commits func() (durable, relaxed int64)) {
	registerCounterFuncs(reg,
		counterFunc{"store_durable_commits_total", "Write transactions the store committed and answered once they were on disk.", first(commits)},
		counterFunc{"store_relaxed_commits_total", "Write transactions the store committed and answered before they were on disk.", second(commits)})
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
	pick := func(i int) func() int64 {
		return func() int64 { g, s, f := pipelined(); return []int64{g, s, f}[i] }
	}
	registerCounterFuncs(reg,
		counterFunc{"store_pipelined_groups_total", "Groups of single-statement writes sent to PostgreSQL together, as one transaction.", pick(0)},
		counterFunc{"store_pipelined_statements_total", "Single-statement writes sent to PostgreSQL in a group.", pick(1)},
		counterFunc{"store_pipelined_fallbacks_total", "Groups whose statements ran again one by one (a statement refused, or a connection found dead).", pick(2)},
		counterFunc{"store_read_groups_total", "Groups of short reads sent to PostgreSQL together, in one round trip.", first(reads)},
		counterFunc{"store_grouped_reads_total", "Short reads sent to PostgreSQL in a group.", second(reads)})
}

// RegisterToldFlushes registers instore_store_told_flushes_total and
// instore_store_told_flush_failures_total, read from flushes at each
// scrape: the WAL flushes the events' told horizon made itself on
// PostgreSQL, and those that failed.
func RegisterToldFlushes(reg prometheus.Registerer, flushes func() (flushes, failed int64)) {
	registerCounterFuncs(reg,
		counterFunc{"store_told_flushes_total", "WAL flushes the event horizon made itself on PostgreSQL, for events waiting on a quiet database.", first(flushes)},
		counterFunc{"store_told_flush_failures_total", "The event horizon's own WAL flushes that failed (each tried again 250 ms later).", second(flushes)})
}

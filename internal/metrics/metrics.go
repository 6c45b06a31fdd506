// Package metrics holds the service's Prometheus metrics beyond the HTTP
// ones (internal/httpapi): transactions as they end, terminals online and
// gateway sessions, the database pools and the build. Every metric is
// listed with its labels in docs/operations.md, "Metrics"; example alert
// rules are in deploy/prometheus/alerts.yaml.
//
// Label values are bounded: a transaction type, a final status and an
// error code come from the fixed code lists (codes.json), never from a
// request.
package metrics

import (
	"database/sql"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/instore-dev/instore"
)

// Namespace prefixes every metric of the service.
const Namespace = "instore"

// NoCode is the code label of a transaction that ended without an error
// code.
const NoCode = "none"

// Buckets of the transaction histograms, in seconds: an acknowledgement
// takes a round trip to the terminal (the ack time-out is 10 s by
// default); a result waits for a cardholder (the deadline is 120 s after
// the ack by default).
var (
	AckBuckets    = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	ResultBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 180, 300}
)

// Transactions counts the transactions that end and times them. It is the
// Service's instore.Observer.
type Transactions struct {
	ended        *prometheus.CounterVec
	ack, result  *prometheus.HistogramVec
	lateReversed *prometheus.CounterVec
	// fwdDeclined counts offline approvals declined when forwarded.
	fwdDeclined prometheus.Counter

	// byType caches the histograms' observers by transaction type, which
	// the service fixes (PURCHASE, REFUND, REVERSAL).
	byType sync.Map // string -> typeObservers
}

type typeObservers struct{ ack, result prometheus.Observer }

var _ instore.Observer = (*Transactions)(nil)

// NewTransactions registers the transaction metrics with reg.
func NewTransactions(reg prometheus.Registerer) *Transactions {
	m := &Transactions{
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "transactions_ended_total",
			Help: "Transactions that reached their final status, by type, final status and error code (none: no error code).",
		}, []string{"type", "status", "code"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "transaction_ack_seconds",
			Help:    "Time from a transaction's creation to the terminal's acknowledgement, observed when the transaction ends, by type.",
			Buckets: AckBuckets,
		}, []string{"type"}),
		result: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "transaction_result_seconds",
			Help:    "Time from a transaction's creation to its final status, by type.",
			Buckets: ResultBuckets,
		}, []string{"type"}),
		lateReversed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "late_approvals_reversed_total",
			Help: "Transactions the service had ended (WP25, WP36) that their terminal approved later: reversed on the terminal, now REVERSED, by type.",
		}, []string{"type"}),
		fwdDeclined: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "forward_declined_total",
			Help: "Offline approvals the issuer declined when their terminal forwarded them: the customer left with the goods, the merchant was not paid.",
		}),
	}
	reg.MustRegister(m.ended, m.ack, m.result, m.lateReversed, m.fwdDeclined)
	// The series an alert divides by exist from the start, at zero.
	for _, typ := range []instore.TransactionType{instore.TypePurchase, instore.TypeRefund, instore.TypeReversal} {
		m.lateReversed.WithLabelValues(string(typ))
		m.observers(typ)
	}
	return m
}

func (m *Transactions) observers(typ instore.TransactionType) typeObservers {
	if o, ok := m.byType.Load(typ); ok {
		return o.(typeObservers)
	}
	o := typeObservers{ack: m.ack.WithLabelValues(string(typ)), result: m.result.WithLabelValues(string(typ))}
	m.byType.Store(typ, o)
	return o
}

// TransactionEnded counts e and observes its durations.
func (m *Transactions) TransactionEnded(e instore.TransactionEnd) {
	typ := e.Transaction.Type
	code := e.ErrorCode
	if code == "" {
		code = NoCode
	}
	m.ended.WithLabelValues(string(typ), e.Status, code).Inc()
	o := m.observers(typ)
	if e.Acknowledged {
		o.ack.Observe(e.AckDuration.Seconds())
	}
	o.result.Observe(e.Duration.Seconds())
}

// LateApprovalReversed counts a late approval reversed.
func (m *Transactions) LateApprovalReversed(t *instore.Transaction) {
	m.lateReversed.WithLabelValues(string(t.Type)).Inc()
}

// ForwardDeclined counts an offline approval declined when forwarded
// (instore.ForwardObserver).
func (m *Transactions) ForwardDeclined(*instore.Transaction) { m.fwdDeclined.Inc() }

var _ instore.ForwardObserver = (*Transactions)(nil)

// Gateway is what the gateway metrics read, at scrape time.
type Gateway interface {
	// Sessions is the number of devices online (said hello).
	Sessions() int
	// Connections is the number of open WebSocket connections.
	Connections() int
}

// RegisterGateway registers the gauges of terminals online and gateway
// connections, read from g at every scrape.
func RegisterGateway(reg prometheus.Registerer, g Gateway) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "terminals_online",
			Help: "Terminal devices online: connected to this node's gateway and authenticated (hello).",
		}, func() float64 { return float64(g.Sessions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "gateway_sessions",
			Help: "Open WebSocket connections of this node's terminal gateway, those that have not said hello yet included.",
		}, func() float64 { return float64(g.Connections()) }),
	)
}

// RegisterDB registers the statistics of each connection pool
// (go_sql_* with the label db_name, the pool's name).
func RegisterDB(reg prometheus.Registerer, pools map[string]*sql.DB) {
	names := make([]string, 0, len(pools))
	for name := range pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		reg.MustRegister(collectors.NewDBStatsCollector(pools[name], name))
	}
}

// RegisterBuildInfo registers instore_build_info, always 1, whose labels
// say which build runs.
func RegisterBuildInfo(reg prometheus.Registerer, version, commit, goVersion string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "The build that runs: always 1, with its version, commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": orUnknown(version), "commit": orUnknown(commit), "goversion": goVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testmetrics"
	"github.com/instore-dev/instore/internal/testwait"
)

// scrape reads /metrics from the ops listener as Prometheus would, and
// parses it (which checks the exposition format).
func (e *env) scrape(t *testing.T) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, body := e.do(t, "GET", e.srv.URL("ops")+"/metrics", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return body, mfs
}

// value is the value of the sample of family name whose labels include
// want (a counter's, a gauge's, a histogram's count); found false when
// there is none.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, found bool) {
	m := testmetrics.Find(mfs[name], want)
	switch {
	case m == nil:
		return 0, false
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	}
	return m.GetUntyped().GetValue(), true
}

// waitMetric scrapes until the sample reaches want (bounded).
func (e *env) waitMetric(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	testwait.ForNil(t, fmt.Sprintf("%s%v = %v", name, labels, want), func() error {
		_, mfs := e.scrape(t)
		if v, ok := value(mfs, name, labels); v != want {
			return fmt.Errorf("%s%v = %v (found %v)", name, labels, v, ok)
		}
		return nil
	})
}

// repoFile reads a file of the repository.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMetricsWhilePurchasesRun reads /metrics around a purchase, a refund,
// a declined purchase, one the terminal never acknowledges (WP25) and one
// it never answers (WP36, with a status request long-polling it and a
// console stream open meanwhile), and checks the counters' values and
// labels, the gauges, the log's one line per ended transaction, that every
// metric is documented, and, where promtool is installed, `promtool check
// metrics` and `promtool check rules` on the example alerts.
func TestMetricsWhilePurchasesRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		ck, clock := newClock()
		metricsWhilePurchasesRun(t, ck, startSandbox(t, mutate, clock, func(c *server.Config) { c.Version, c.Commit = "v9.9.9", "0123abc" }))
	})
}

func metricsWhilePurchasesRun(t *testing.T, ck *clocktest.Clock, s *sandbox) {
	term := s.terminals[0]
	ended := func(typ, status, code string) map[string]string {
		return map[string]string{"type": typ, "status": status, "code": code}
	}

	orig := s.approved(t, map[string]any{"terminalId": term, "amount": 5000, "currency": "SEK"})
	refund := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 2000, "currency": "SEK",
		"originalOnlineAPIRefId": orig.OnlineAPIRefID}, nil).tx(t, 201)
	if got := s.final(t, refund.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
		t.Fatalf("refund ended %d", got.StatusID)
	}
	declined := s.purchase(t, term, 1011).tx(t, 201)
	s.final(t, declined.OnlineAPIRefID)
	advanceDuring(t, ck, testAck, func() reply { return s.purchase(t, term, 1091) }).problem(t, 504, "WP25")

	// A purchase the terminal acknowledges and never answers: while it
	// waits for its deadline, a status request long-polls it and a
	// console stream is open.
	stuck := s.purchase(t, term, 1092).tx(t, 201)
	polled := make(chan txJSON, 1)
	poll := mustRequest(t, "GET", s.online+"/in-store/api/v1/transaction/"+stuck.OnlineAPIRefID+"?wait=30", s.auth(s.token, s.key))
	go func() {
		resp, err := http.DefaultClient.Do(poll)
		var tx txJSON
		if err == nil {
			tx = decodeTx(resp)
		}
		polled <- tx
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := http.DefaultClient.Do(mustRequest(t, "GET", s.online+"/console/events", s.auth(s.token, s.key)).WithContext(ctx))
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET /console/events = %v %v", stream, err)
	}
	s.waitMetric(t, "instore_long_polls_waiting", nil, 1)
	s.waitMetric(t, "instore_event_streams_open", nil, 1)
	advance(t, ck, testDeadline)
	if tx := <-polled; tx.StatusID != instore.StatusTechnicalError || tx.ErrorCode != "WP36" {
		t.Fatalf("long-polled transaction = %+v, want TECHNICAL_ERROR WP36", tx)
	}
	cancel()
	stream.Body.Close()
	s.waitMetric(t, "instore_long_polls_waiting", nil, 0)
	s.waitMetric(t, "instore_event_streams_open", nil, 0)

	body, mfs := s.scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"instore_transactions_ended_total", ended("PURCHASE", "APPROVED", "none"), 1},
		{"instore_transactions_ended_total", ended("REFUND", "APPROVED", "none"), 1},
		{"instore_transactions_ended_total", ended("PURCHASE", "TRANSACTION_DECLINED", "none"), 1},
		{"instore_transactions_ended_total", ended("PURCHASE", "TECHNICAL_ERROR", "WP25"), 1},
		{"instore_transactions_ended_total", ended("PURCHASE", "TECHNICAL_ERROR", "WP36"), 1},
		// Acknowledged: the approved, declined and stuck purchases.
		{"instore_transaction_ack_seconds", map[string]string{"type": "PURCHASE"}, 3},
		{"instore_transaction_ack_seconds", map[string]string{"type": "REFUND"}, 1},
		{"instore_transaction_result_seconds", map[string]string{"type": "PURCHASE"}, 4},
		{"instore_transaction_result_seconds", map[string]string{"type": "REFUND"}, 1},
		{"instore_late_approvals_reversed_total", map[string]string{"type": "PURCHASE"}, 0},
		{"instore_terminals_online", nil, 3},
		{"instore_gateway_sessions", nil, 3},
		{"instore_event_streams_total", nil, 1},
		{"instore_build_info", map[string]string{"version": "v9.9.9", "commit": "0123abc"}, 1},
	} {
		if got, ok := value(mfs, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n := len(mfs["instore_transactions_ended_total"].GetMetric()); n != 5 {
		t.Errorf("instore_transactions_ended_total has %d series, want 5:\n%s", n, grepLines(body, "instore_transactions_ended_total"))
	}
	// Every status request waited (s.final long-polls): none is in the
	// latency histogram, all are long-polls.
	if polls, _ := value(mfs, "instore_long_polls_total", nil); polls < 4 {
		t.Errorf("instore_long_polls_total = %v, want at least 4", polls)
	}
	for _, route := range []string{"GET /in-store/api/v1/transaction/{onlineAPIRefId}", "GET /console/events"} {
		if _, ok := value(mfs, "instore_http_request_duration_seconds", map[string]string{"route": route}); ok {
			t.Errorf("the latency histogram has the waiting route %s", route)
		}
	}
	if _, ok := value(mfs, "instore_http_request_duration_seconds", map[string]string{"route": "POST /in-store/api/v1/purchase", "code": "201"}); !ok {
		t.Errorf("the latency histogram lacks the purchases")
	}
	// The store's counters: every life committed durably; a group holds
	// more than one statement (or read); a failed flush was a flush.
	store := func(name string) float64 {
		t.Helper()
		v, ok := value(mfs, "instore_store_"+name, nil)
		if !ok {
			t.Errorf("no instore_store_%s", name)
		}
		return v
	}
	if d := store("durable_commits_total"); d < 5 {
		t.Errorf("instore_store_durable_commits_total = %v, want at least one a life (5)", d)
	}
	store("relaxed_commits_total")
	for _, g := range [][2]string{{"pipelined_groups_total", "pipelined_statements_total"}, {"read_groups_total", "grouped_reads_total"}} {
		if groups, held := store(g[0]), store(g[1]); held < 2*groups || (s.cfg.DatabaseURL == "" && held != 0) {
			t.Errorf("instore_store_%s = %v, instore_store_%s = %v: want at least two a group (none on SQLite)", g[0], groups, g[1], held)
		}
	}
	if flushes, failed := store("told_flushes_total"), store("told_flush_failures_total"); failed > flushes || (s.cfg.DatabaseURL == "" && flushes != 0) {
		t.Errorf("instore_store_told_flushes_total = %v, failures %v: want failures among the flushes (none on SQLite)", flushes, failed)
	}
	pools := []string{"writer", "reader"}
	if s.cfg.DatabaseURL != "" {
		pools = append(pools, "relaxed")
	}
	for _, pool := range pools {
		if _, ok := value(mfs, "go_sql_open_connections", map[string]string{"db_name": pool}); !ok {
			t.Errorf("no go_sql_open_connections of the %s pool", pool)
		}
	}

	// The log: one line per ended transaction, no terminal ID in clear.
	s.srv.Close()
	logs := s.logs.String()
	if n := strings.Count(logs, `"msg":"transaction ended"`); n != 5 {
		t.Errorf("%d transaction ended lines, want 5", n)
	}
	for _, id := range s.terminals {
		if strings.Contains(logs, id) {
			t.Errorf("the log holds terminal ID %s in clear", id)
		}
	}

	// Every instore_ metric is documented, and the example alerts use
	// only metrics that exist.
	ops := repoFile(t, "docs/operations.md")
	for name := range mfs {
		if strings.HasPrefix(name, "instore_") && !strings.Contains(ops, "`"+name+"`") {
			t.Errorf("docs/operations.md does not list %s", name)
		}
	}
	rules := repoFile(t, "deploy/prometheus/alerts.yaml")
	for _, name := range regexp.MustCompile(`\b(?:instore|go_sql)_[a-z_]+`).FindAllString(rules, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && mfs[b] != nil {
				base = b
			}
		}
		if mfs[base] == nil {
			t.Errorf("deploy/prometheus/alerts.yaml uses %s, which /metrics does not have", name)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus): promtool check metrics and check rules skipped")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join("..", "..", "deploy", "prometheus", "alerts.yaml")).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules deploy/prometheus/alerts.yaml: %v\n%s", err, out)
	}
}

func mustRequest(t *testing.T, method, u string, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	must(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// decodeTx decodes a transaction answer (zero on an error).
func decodeTx(resp *http.Response) txJSON {
	defer resp.Body.Close()
	var tx txJSON
	if resp.StatusCode == 200 {
		json.NewDecoder(resp.Body).Decode(&tx)
	}
	return tx
}

func grepLines(body []byte, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, prefix) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// TestOpsListener: the ops listener answers health, readiness and
// metrics; readiness fails once the store is closed, health does not.
func TestOpsListener(t *testing.T) {
	e := start(t, nil)
	e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key))
	ops := e.srv.URL("ops")
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ready"`, "/metrics": `instore_http_request_duration_seconds_bucket{code="200",route="GET /in-store/api/v1/metadata",surface="online"`} {
		resp, body := e.do(t, "GET", ops+path, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d, want 200 containing %s; got %.300s", path, resp.StatusCode, want, body)
		}
	}
	// Once the store is closed, readiness fails and health does not.
	e.srv.Store.Close()
	if resp, body := e.do(t, "GET", ops+"/readyz", nil, nil); resp.StatusCode != 503 {
		t.Errorf("GET /readyz with the store closed = %d %s, want 503", resp.StatusCode, body)
	}
	if resp, _ := e.do(t, "GET", ops+"/healthz", nil, nil); resp.StatusCode != 200 {
		t.Errorf("GET /healthz = %d, want 200", resp.StatusCode)
	}
}

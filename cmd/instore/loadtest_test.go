package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// asBinaryEnv makes the test binary act as the instore binary: `instore
// loadtest` starts its server and baselines as child processes of
// os.Executable(), which in a test is this test binary.
const asBinaryEnv = "INSTORE_TEST_AS_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(asBinaryEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestLoadtestScenarios runs every scenario briefly with small numbers and
// checks its JSON object: the fields are there and the values sane. No
// figure is compared with a threshold: the machine's speed is not the
// test's business.
func TestLoadtestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers as child processes")
	}
	t.Setenv(asBinaryEnv, "1")
	type tc struct {
		name string
		args []string
	}
	cases := []tc{
		// Metadata windows of 0.5 s: on a loaded machine a shorter one may
		// see no request complete, and the ratio must be > 0 here.
		{"metadata", []string{"metadata", "--clients", "4", "--duration", "500ms"}},
		{"metadata-rounds", []string{"metadata", "--clients", "2", "--rounds", "3", "--duration", "1500ms"}},
		{"purchase", []string{"purchase", "--terminals", "3", "--sqlite-synchronous", "NORMAL"}},
		{"purchase-rounds", []string{"purchase", "--terminals", "3", "--rounds", "2", "--duration", "1s"}},
		{"sessions", []string{"sessions", "--sessions", "200"}},
		// 1 s: in 300 ms on a loaded machine (CI beside other work) no
		// purchase may complete, and its rate must be > 0 here.
		{"mixed", []string{"mixed", "--terminals", "3", "--clients", "2", "--readers", "2", "--duration", "1s"}},
		// A pre-auth life is three transactions: 1 s for some to complete.
		{"preauth", []string{"preauth", "--terminals", "2", "--sqlite-synchronous", "NORMAL", "--duration", "1s"}},
	}
	if u := os.Getenv("INSTORE_TEST_DATABASE_URL"); u != "" {
		cases = append(cases, tc{"purchase-postgres", []string{"purchase", "--terminals", "2", "--database-url", u}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"loadtest", "--duration", "300ms", "--json"}, c.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("instore %s = exit %d\n%s", strings.Join(args, " "), code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one JSON line, got %d:\n%s", len(lines), stdout.String())
			}
			var r map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
				t.Fatalf("%v: %s", err, lines[0])
			}
			want := []string{"scenario", "rate", "baselineRate", "ratio", "p50Ms", "p90Ms", "p99Ms", "p999Ms", "errors", "serverRssBytes", "serverCpuPercent"}
			if c.args[0] == "sessions" {
				want = append(want, "bytesPerSession", "baselineBytesPerSession")
			}
			num := func(k string) float64 {
				v, ok := r[k].(float64)
				if !ok {
					t.Errorf("%s = %v, want a number", k, r[k])
				}
				return v
			}
			for _, k := range want {
				if _, ok := r[k]; !ok {
					t.Errorf("no %q in %s", k, lines[0])
				}
			}
			if r["scenario"] != c.args[0] {
				t.Errorf("scenario = %v, want %s", r["scenario"], c.args[0])
			}
			for _, k := range []string{"rate", "baselineRate", "ratio", "p50Ms", "serverRssBytes"} {
				if v := num(k); !(v > 0) {
					t.Errorf("%s = %v, want > 0", k, v)
				}
			}
			if e := num("errors"); e != 0 {
				t.Errorf("errors = %v, want 0:\n%s", e, lines[0])
			}
			if p50, p99, p999 := num("p50Ms"), num("p99Ms"), num("p999Ms"); p99 < p50 || p999 < p99 {
				t.Errorf("percentiles out of order: p50 %v, p99 %v, p99.9 %v", p50, p99, p999)
			}
			if c.name == "metadata-rounds" || c.name == "purchase-rounds" {
				// Interleaved: a ratio per round, each of ours over the
				// baseline's rate in that round.
				rr, _ := r["roundRatios"].([]any)
				n := 3
				if c.name == "purchase-rounds" {
					n = 2
				}
				if len(rr) != n || num("rounds") != float64(n) {
					t.Errorf("rounds %v, roundRatios %v: want %d of them", r["rounds"], r["roundRatios"], n)
				}
				for _, v := range rr {
					if f, _ := v.(float64); !(f > 0) {
						t.Errorf("a round's ratio is %v, want > 0", v)
					}
				}
			}
			switch c.args[0] {
			case "sessions":
				for _, k := range []string{"bytesPerSession", "baselineBytesPerSession"} {
					if v := num(k); !(v > 0) {
						t.Errorf("%s = %v, want > 0", k, v)
					}
				}
				// The reconnect storm: every session back, on both sides.
				st, _ := r["storm"].(map[string]any)
				for _, side := range []string{"ours", "baseline"} {
					s, _ := st[side].(map[string]any)
					if c, _ := s["count"].(float64); c != 200 || s["errors"] != 0.0 {
						t.Errorf("storm %s: %v sessions back, errors %v; want 200, 0", side, s["count"], s["errors"])
					}
				}
				if v, _ := st["ratio"].(float64); !(v > 0) {
					t.Errorf("storm ratio = %v, want > 0", st["ratio"])
				}
			case "purchase", "mixed":
				// A purchase life is at least its creation and its result.
				if v := num("commitsPerLife"); v < 2 {
					t.Errorf("commitsPerLife = %v, want >= 2", v)
				}
			case "preauth":
				// Three transactions, each created and ended; every
				// completed pre-auth checked in the store.
				if v := num("commitsPerLife"); v < 6 {
					t.Errorf("commitsPerLife = %v, want >= 6", v)
				}
				if v := num("preAuthsChecked"); !(v > 0) {
					t.Errorf("preAuthsChecked = %v, want > 0", v)
				}
			}
		})
	}
}

// TestLoadtestTable: without --json the result is a table with the ratio.
func TestLoadtestTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers as child processes")
	}
	t.Setenv(asBinaryEnv, "1")
	var stdout, stderr bytes.Buffer
	args := []string{"loadtest", "metadata", "--duration", "200ms", "--clients", "2"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, s := range []string{"bare net/http", "instore", "p99.9 ms", "server RSS", "ratio ", "target >= 0.8"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("the table has no %q:\n%s", s, stdout.String())
		}
	}
}

func TestLoadtestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"loadtest", "nosuch"}, 2, "unknown scenario"},
		{[]string{"loadtest"}, 2, "requires at least 1 arg"},
		{[]string{"loadtest", "metadata", "--target", "http://10.1.2.3:8080"}, 1, "not a loopback address"},
		{[]string{"loadtest", "metadata", "--duration", "11m"}, 1, "bound"},
		{[]string{"loadtest", "metadata", "--duration", "300ms", "--rounds", "10"}, 1, "under 50ms"},
		{[]string{"loadtest", "metadata", "--rounds", "-1"}, 1, "negative"},
		{[]string{"loadtest", "sessions", "--sessions", "50000"}, 1, "at most"},
		{[]string{"loadtest", "purchase", "--sqlite-synchronous", "OFF"}, 1, "FULL or NORMAL"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("instore %s = exit %d %q, want exit %d with %q", strings.Join(c.args, " "), code, stderr.String(), c.code, c.msg)
		}
	}
}

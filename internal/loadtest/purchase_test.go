package loadtest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counted wraps an op and counts its successful calls.
func counted(o op, name string, n *atomic.Int64) op {
	fn := o.fn
	o.name = name
	o.fn = func(ctx context.Context, w int) error {
		err := fn(ctx, w)
		if err == nil {
			n.Add(1)
		}
		return err
	}
	return o
}

// TestPurchaseInterleaved runs the purchase measurement as runPurchase
// builds it (purchaseInterleave, setPurchase) with fake ops: raw commits
// on side 0, purchase lives and mixed's two parts on side 1. The commits
// and our requests (the parts' included) never run at once, the windows
// follow the plan (the commits first in round 1), the commits' side has no
// server figures (the server idles in its windows), and the baseline is
// the commits per second over the commits' windows divided by the commits
// per life, in total and in each round.
func TestPurchaseInterleaved(t *testing.T) {
	for _, rounds := range []int{1, 4} {
		t.Run(fmt.Sprint(rounds, " rounds"), func(t *testing.T) {
			o := &Options{Warmup: 40 * time.Millisecond, Duration: 240 * time.Millisecond, Rounds: rounds, Log: io.Discard}
			e := &env{o: o, backend: "sqlite", srv: &serverProc{kind: "in-process"}}
			f := &fakeSides{}
			var nCommits, nLives, nMeta, nStatus atomic.Int64
			commits := counted(f.op(0, 2, func() time.Duration { return 300 * time.Microsecond }, 0), "raw commits", &nCommits)
			commits.unit = "commits/s"
			lives := counted(f.op(1, 4, func() time.Duration { return 3 * time.Millisecond }, 0), "instore", &nLives)
			lives.unit = "lives/s"
			parts := []op{
				counted(f.op(1, 2, func() time.Duration { return time.Millisecond }, 0), "metadata", &nMeta),
				counted(f.op(1, 2, func() time.Duration { return time.Millisecond }, 0), "status reads", &nStatus),
			}
			il := e.purchaseInterleave(commits, lives, parts)
			if il.ramp != o.Warmup || il.warmup != o.Warmup || il.duration != o.Duration || il.rounds != rounds {
				t.Errorf("interleave %+v, want the options' warm-up, duration and rounds", il)
			}
			res := il.run(context.Background())

			if n := f.overlaps.Load(); n != 0 {
				t.Errorf("%d requests ran while the other side had one in flight", n)
			}
			// No call of a side completed in a window of the other.
			f.mu.Lock()
			for _, c := range f.calls {
				for _, sp := range res.spans {
					if sp.side != c.side && c.end.After(sp.start) && c.start.Before(sp.end) {
						t.Errorf("a call of side %d (%v-%v) ran in a window of side %d", c.side, c.start, c.end, sp.side)
					}
				}
			}
			f.mu.Unlock()
			plan := il.plan()
			if len(res.spans) != len(plan) || res.spans[0].side != 0 {
				t.Fatalf("windows %+v, want %d starting with the commits", res.spans, len(plan))
			}
			for i, sp := range res.spans {
				if sp.side != plan[i].side || sp.round != plan[i].round {
					t.Errorf("window %d: side %d round %d, want side %d round %d", i, sp.side, sp.round, plan[i].side, plan[i].round)
				}
			}
			if res.sides[0].ServerRSSBytes != 0 || res.sides[0].ServerCPU != 0 {
				t.Errorf("the commits' side has server figures: %+v", res.sides[0])
			}
			if res.sides[1].ServerRSSBytes <= 0 {
				t.Errorf("ours has no server RSS: %+v", res.sides[1])
			}
			// Ours counts the lives alone; the parts and the commits count
			// apart, each no more than completed.
			for _, c := range []struct {
				s    Side
				name string
				n    int64
			}{{res.sides[0], "raw commits", nCommits.Load()}, {res.sides[1], "instore", nLives.Load()}} {
				if c.s.Name != c.name || c.s.Count <= 0 || c.s.Count > c.n {
					t.Errorf("side %q: count %d, want %q with 1 to %d", c.s.Name, c.s.Count, c.name, c.n)
				}
			}
			if len(res.parts[0]) != 0 || len(res.parts[1]) != 2 {
				t.Fatalf("parts %+v, want two of ours", res.parts)
			}
			for k, want := range []int64{nMeta.Load(), nStatus.Load()} {
				p := res.parts[1][k]
				if p.Name != parts[k].name || p.Count <= 0 || p.Count > want || p.Seconds != res.sides[1].Seconds {
					t.Errorf("part %d: %+v, want %q, 1 to %d requests over ours' windows", k, p, parts[k].name, want)
				}
			}

			const perLife = 6.5
			r := &Result{Scenario: "purchase"}
			r.setPurchase(res, perLife)
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
			if r.RawCommitRate != res.sides[0].Rate || r.CommitsPerLife != perLife || !near(r.BaselineRate, res.sides[0].Rate/perLife) {
				t.Errorf("raw %v, per life %v, baseline %v; want %v, %v, %v", r.RawCommitRate, r.CommitsPerLife, r.BaselineRate,
					res.sides[0].Rate, perLife, res.sides[0].Rate/perLife)
			}
			if r.Baseline.Rate != r.BaselineRate || r.Baseline.Unit != "lives/s" || r.Baseline.Count != res.sides[0].Count || r.Baseline.Name != "raw commits / 6.50" {
				t.Errorf("baseline side %+v", r.Baseline)
			}
			if r.Ours.Count != res.sides[1].Count || len(r.Parts) != 2 || r.Parts[0].Name != "metadata" {
				t.Errorf("ours %+v, parts %+v", r.Ours, r.Parts)
			}
			if !near(r.Ratio, res.sides[1].Rate/(res.sides[0].Rate/perLife)) || r.Ratio <= 0 {
				t.Errorf("ratio %v, want ours over commits / per life = %v", r.Ratio, res.sides[1].Rate/(res.sides[0].Rate/perLife))
			}
			if r.Rounds != rounds || len(r.RoundRatios) != rounds || len(r.Baseline.RoundRates) != rounds {
				t.Fatalf("rounds %d, ratios %v, baseline's rates %v: want %d", r.Rounds, r.RoundRatios, r.Baseline.RoundRates, rounds)
			}
			for i := range rounds {
				if !near(r.Baseline.RoundRates[i], res.sides[0].RoundRates[i]/perLife) {
					t.Errorf("round %d: baseline %v lives/s, want %v commits/s / %v", i, r.Baseline.RoundRates[i], res.sides[0].RoundRates[i], perLife)
				}
				want := res.sides[1].RoundRates[i] / (res.sides[0].RoundRates[i] / perLife)
				if !near(r.RoundRatios[i], want) || !near(r.RoundRatios[i], res.roundRatios[i]*perLife) || r.RoundRatios[i] <= 0 {
					t.Errorf("round %d: ratio %v, want %v", i, r.RoundRatios[i], want)
				}
			}
			if rounds == 1 && !near(r.RoundRatios[0], r.Ratio) {
				t.Errorf("one round: its ratio %v is not the ratio %v", r.RoundRatios[0], r.Ratio)
			}
			if res.sides[0].RoundRates[0] == r.Baseline.RoundRates[0] {
				t.Error("setPurchase changed the measurement's round rates in place")
			}
		})
	}
}

// TestCommitBaselineLeavesTheStoreAlone: the raw commits go to a table of
// their own (SQLite: a file of the data directory; PostgreSQL: the run's
// schema), which the commits per life, counted in the store's transactions,
// do not see; close removes it.
func TestCommitBaselineLeavesTheStoreAlone(t *testing.T) {
	eachBackend(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		o := Options{DatabaseURL: dbURL, Synchronous: "NORMAL", Log: io.Discard}
		if err := o.defaults("purchase"); err != nil {
			t.Fatal(err)
		}
		e, err := newEnv(ctx, &o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.close()
		if err := e.seed(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// A completed purchase of six commits, as the server leaves it.
		store, err := e.storeDB("_busy_timeout=5000")
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		now := time.Now().UnixMicro()
		ph := "?, ?, ?, ?, ?"
		if e.backend == "postgres" {
			ph = "$1, $2, $3, $4, $5"
		}
		if _, err := store.ExecContext(ctx, `INSERT INTO transactions (id, merchant_id, terminal_id, type, amount, currency,
			status_id, progress, version, created_at, completed_at) VALUES (`+ph+`, 'SEK', 0, '{}', 6, 1, 2)`,
			"txn_test_"+e.runID, e.merchantID, e.devices[0].terminalID, "PURCHASE", now); err != nil {
			t.Fatal(err)
		}
		count := func() {
			t.Helper()
			if lives, perLife, err := e.countCommits(ctx); err != nil || lives != 1 || perLife != 6 {
				t.Errorf("countCommits = %d lives, %v per life, %v; want 1 and 6", lives, perLife, err)
			}
		}
		count()

		c, err := e.newCommitBaseline(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		if c.op.workers != e.commitWriters() || c.op.unit != "commits/s" {
			t.Errorf("op %q: %d workers in %s, want %d", c.op.name, c.op.workers, c.op.unit, e.commitWriters())
		}
		if strings.Contains(c.table, "transactions") {
			t.Errorf("the commits' table is %s", c.table)
		}
		const n = 40
		var wg sync.WaitGroup
		for w := range c.op.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n / c.op.workers {
					if err := c.op.fn(ctx, w); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want := n / c.op.workers * c.op.workers
		var raw *sql.DB
		if e.backend == "postgres" {
			raw = store
			var schema string
			if err := store.QueryRowContext(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = $1", c.table).Scan(&schema); err != nil || schema != e.schema {
				t.Errorf("the commits' table is in schema %q (%v), want the run's %q", schema, err, e.schema)
			}
		} else {
			if filepath.Dir(c.path) != e.dataDir || filepath.Base(c.path) == "instore.db" {
				t.Errorf("the commits' file is %s, want a file of its own in %s", c.path, e.dataDir)
			}
			var tables int
			if err := store.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'loadtest_commits_%'").Scan(&tables); err != nil || tables != 0 {
				t.Errorf("%d commit tables in the store's database (%v)", tables, err)
			}
			if raw, err = sql.Open("sqlite", c.path+"?_query_only=on"); err != nil {
				t.Fatal(err)
			}
		}
		var rows int
		if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.table).Scan(&rows); err != nil || rows != want {
			t.Errorf("%d rows in %s (%v), want %d", rows, c.table, err, want)
		}
		if raw != store {
			raw.Close()
		}
		count()

		c.close()
		if e.backend == "postgres" {
			var n int
			if err := store.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = $1", c.table).Scan(&n); err != nil || n != 0 {
				t.Errorf("after close: %d tables %s (%v)", n, c.table, err)
			}
		} else if _, err := os.Stat(c.path); !os.IsNotExist(err) {
			t.Errorf("after close: %s: %v", c.path, err)
		}
		count()
	})
}

// eachBackend runs f as a subtest on SQLite (dbURL ""), then on the
// PostgreSQL of INSTORE_TEST_DATABASE_URL when it is set.
func eachBackend(t *testing.T, f func(t *testing.T, dbURL string)) {
	backends := []string{""}
	if u := os.Getenv("INSTORE_TEST_DATABASE_URL"); u != "" {
		backends = append(backends, u)
	}
	for _, dbURL := range backends {
		name := "sqlite"
		if dbURL != "" {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { f(t, dbURL) })
	}
}

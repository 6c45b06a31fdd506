package crashtest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// captureKills is how many times TestCrashCaptures kills the server.
const captureKills = 4

// TestCrashCaptures kills a real `instore serve` with SIGKILL at random
// moments while an ECR per terminal process opens pre-auths, increments
// some, captures them (alone, racing a void, racing a second capture),
// voids others and refunds captured ones (a second refund asking past
// what is left), every request retried with its Idempotency-Key across the
// kills. Then, on the quiet store (preauth_test.go, checkPreAuths): no
// pre-auth captured twice, none both captured and voided, each
// authorisation what its approved operations make it, captures within the
// tolerance, refunds within the capture, every end the ECR was told stored
// as told, one transaction per key, nothing PENDING.
func TestCrashCaptures(t *testing.T) {
	crashTest(t, "kills it under load", func(set settings) string {
		return fmt.Sprintf("%d kills, %d terminals", captureKills, set.terminals)
	}, runCaptures)
}

func runCaptures(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newPAEnv(t, ctx, set, bin, dbURL)
	rng := p.seeded(3) // TestCrash has the streams 1 and 2
	phase, stop := context.WithCancel(ctx)
	wg, counts := p.startWorkers(rng, func(i int, rng *mrand.Rand, counts map[string]int) {
		p.captureWork(ctx, phase, i, rng, counts)
	})
	for k := 1; k <= captureKills; k++ {
		run := set.runMin + time.Duration(rng.Int64N(int64(set.runMax-set.runMin)))
		down := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
		sleep(ctx, run)
		p.restartAfter(ctx, down, fmt.Sprintf("kill %d", k))
		t.Logf("%s: SIGKILL %d after %s, %s down", p.backend(), k, run.Round(time.Millisecond), down.Round(time.Millisecond))
	}
	stop()
	wg.Wait()
	// A transaction PENDING at the last kill ends within its deadline of
	// the restart.
	rows := p.settle(ctx, keyBudget, true)
	p.checkPreAuths(ctx, "after the kills", rows)
	t.Logf("%s: the ECRs ran %v; the store holds %s", p.backend(), sumCounts(counts), tally(rows))
}

// captureWork runs pre-auths on terminal i until phase ends; the one in
// progress is finished under ctx.
func (p *paEnv) captureWork(ctx, phase context.Context, i int, rng *mrand.Rand, counts map[string]int) {
	for n := 0; phase.Err() == nil; n++ {
		k := fmt.Sprintf("cap-t%d-%d", i, n)
		// Amounts ending in 00: approved by the terminals.
		authorized := 100 * (10 + rng.Int64N(90))
		pre := p.preAuthorize(ctx, i, authorized, k+"-preauth")
		if pre == "" {
			counts["not pre-authorised"]++
			sleep(ctx, retryPause)
			continue
		}
		if rng.IntN(2) == 0 {
			inc := 100 * (1 + rng.Int64N(20))
			if _, ok := p.run(ctx, i, preAuthOp("increment", pre, inc, k+"-increment")); ok {
				authorized += inc
			}
		}
		capture := func(key string) paOp {
			limit := instore.CaptureLimit(authorized, instore.DefaultCaptureTolerance)
			return preAuthOp("capture", pre, 100*((authorized+rng.Int64N(limit-authorized+1))/100), key)
		}
		switch rng.IntN(5) {
		case 0, 1:
			counts["capture"]++
			p.run(ctx, i, capture(k+"-capture"))
		case 2:
			counts["capture against void"]++
			p.race(ctx, i, capture(k+"-capture"), preAuthOp("void", pre, 0, k+"-void"))
		case 3:
			counts["two captures"]++
			p.race(ctx, i, capture(k+"-capture"), capture(k+"-capture-2"))
		default:
			counts["void"]++
			p.run(ctx, i, preAuthOp("void", pre, 0, k+"-void"))
		}
		a := p.authorization(ctx, pre)
		if a == nil || a.State != instore.AuthCaptured || rng.IntN(3) == 0 {
			continue
		}
		counts["refunds"]++
		refund := func(amount int64, key string) paOp {
			return paOp{path: "/in-store/api/v1/refund", key: key, body: map[string]any{
				"terminalId": p.terms[i], "amount": amount, "currency": "SEK", "originalOnlineAPIRefId": pre}}
		}
		first := 100 * (1 + rng.Int64N(a.CapturedAmount/100))
		p.run(ctx, i, refund(first, k+"-refund"))
		// The rest and 1.00 more: past what is left once the first is
		// approved.
		p.run(ctx, i, refund(a.CapturedAmount-first+100, k+"-refund-2"))
	}
}

// tally counts the rows by type, authorisation state and status, for the
// log.
func tally(rows []paRow) string {
	n := map[string]int{}
	for _, r := range rows {
		k := r.typ
		if r.byTimer {
			k = "TIMER " + k
		}
		if r.authState != "" {
			k += " " + r.authState
		}
		n[fmt.Sprintf("%s (status %d)", k, r.status)]++
	}
	var out []string
	for k, c := range n {
		out = append(out, fmt.Sprintf("%d %s", c, k))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

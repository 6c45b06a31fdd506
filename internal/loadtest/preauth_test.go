package loadtest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPreAuthLives drives the preauth scenario's life on a server in this
// process: three lives on each of two terminals, then the store read
// directly: every pre-auth APPROVED and CAPTURED, authorised for the
// pre-auth plus the increment and captured for the capture's total, with
// one approved INCREMENT and one approved CAPTURE (its tip apart); the
// commits per life as the store's versions less the pairs; the tool's own
// check finds them whole, and finds a pre-auth whose captured amount is
// wrong. Then the scenario briefly, as `instore loadtest preauth` runs it
// (with PostgreSQL too when INSTORE_TEST_DATABASE_URL is set). No figure
// is compared with a threshold.
func TestPreAuthLives(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, dbURL string) {
		o := Options{InProcess: true, Terminals: 2, DatabaseURL: dbURL, Synchronous: "NORMAL", Log: io.Discard}
		if err := o.defaults(PreAuthScenario); err != nil {
			t.Fatal(err)
		}
		o.preauth = true
		e, err := newEnv(ctx, &o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.close()
		stop, err := e.serveTerminals(ctx, o.Terminals)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		var counts lifeCounts
		lives := e.purchaseOp(&http.Client{Timeout: time.Minute}, &refRing{}, &counts)
		const each = 3
		var wg sync.WaitGroup
		for w := range lives.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if err := lives.fn(ctx, w); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want := int64(each * lives.workers)
		if n := counts.lives.Load(); n != want {
			t.Fatalf("%d lives, want %d", n, want)
		}
		// A POST for each of the three (an increment or a capture may
		// be final by its 201: no wait then).
		if r := counts.requests.Load(); r < 3*want {
			t.Errorf("%d requests for %d lives, want at least 3 each", r, want)
		}

		db, err := e.storeDB("_busy_timeout=5000")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ph := placeholder(e.backend)
		rows, err := db.QueryContext(ctx, `SELECT p.id, p.status_id, p.auth_state, p.authorized_amount, p.captured_amount, p.version,
			i.status_id, i.amount, i.version, c.status_id, c.amount, c.tip_amount, c.version
			FROM transactions p
			JOIN transactions i ON i.original_id = p.id AND i.type = 'INCREMENT'
			JOIN transactions c ON c.original_id = p.id AND c.type = 'CAPTURE'
			WHERE p.type = 'PRE_AUTH' AND p.merchant_id = `+ph, e.merchantID)
		if err != nil {
			t.Fatal(err)
		}
		var seen, versions int64
		for rows.Next() {
			var id, state string
			var pStatus, authorized, captured, pVer, iStatus, iAmount, iVer, cStatus, cAmount, cTip, cVer int64
			if err := rows.Scan(&id, &pStatus, &state, &authorized, &captured, &pVer,
				&iStatus, &iAmount, &iVer, &cStatus, &cAmount, &cTip, &cVer); err != nil {
				t.Fatal(err)
			}
			seen++
			versions += pVer + iVer + cVer
			if pStatus != 0 || state != "CAPTURED" || authorized != 12500 || captured != 13000 {
				t.Errorf("pre-auth %d: status %d, %s, authorised %d, captured %d; want 0, CAPTURED, 12500, 13000", seen, pStatus, state, authorized, captured)
			}
			if iStatus != 0 || iAmount != 2500 || cStatus != 0 || cAmount != 12500 || cTip != 500 {
				t.Errorf("pre-auth %d: increment status %d of %d, capture status %d of %d + tip %d; want 0 of 2500, 0 of 12500 + 500",
					seen, iStatus, iAmount, cStatus, cAmount, cTip)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if seen != want {
			t.Fatalf("%d pre-auths with an increment and a capture in the store, want %d", seen, want)
		}
		// The increment's and the capture's approvals each change the
		// pre-auth in their own commit.
		if n, perLife, err := e.countCommits(ctx); err != nil || n != want || perLife != float64(versions-2*want)/float64(want) {
			t.Errorf("countCommits = %d lives, %v per life, %v; want %d, %v", n, perLife, err, want, float64(versions-2*want)/float64(want))
		}
		if checked, bad, err := e.checkPreAuths(ctx); err != nil || checked != want || bad != 0 {
			t.Errorf("checkPreAuths = %d checked, %d bad, %v; want %d, 0", checked, bad, err, want)
		}
		if _, err := db.ExecContext(ctx, `UPDATE transactions SET captured_amount = 12999 WHERE id = (SELECT MIN(id) FROM transactions
			WHERE type = 'PRE_AUTH' AND merchant_id = `+ph+`)`, e.merchantID); err != nil {
			t.Fatal(err)
		}
		if checked, bad, err := e.checkPreAuths(ctx); err != nil || checked != want || bad != 1 {
			t.Errorf("after a wrong captured amount: checkPreAuths = %d checked, %d bad, %v; want %d, 1", checked, bad, err, want)
		}
	})

	r, err := Run(ctx, PreAuthScenario, Options{InProcess: true, Terminals: 2, Duration: time.Second, Rounds: 2,
		Synchronous: "NORMAL", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scenario != PreAuthScenario || r.Errors != 0 || r.Ours.Count <= 0 || r.PreAuthsChecked < r.Ours.Count || r.Ratio <= 0 || len(r.RoundRatios) != 2 {
		t.Errorf("preauth: scenario %q, errors %d, %d lives, %d checked, ratio %v %v; notes %v",
			r.Scenario, r.Errors, r.Ours.Count, r.PreAuthsChecked, r.Ratio, r.RoundRatios, r.Notes)
	}
	if r.CommitsPerLife <= nominalCommitsPerLife || r.RequestsPerLife < 3 {
		t.Errorf("%v commits and %v requests per life: a pre-auth life is three transactions", r.CommitsPerLife, r.RequestsPerLife)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "pre-auths checked") || !strings.Contains(b.String(), "commits per life") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}

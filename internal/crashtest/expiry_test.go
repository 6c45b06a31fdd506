package crashtest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// The expiry's times: a validity of seconds (allowed with --sandbox, whose
// sweep then runs every validity), and the grace within which an expired
// pre-auth must have ended once the server runs: an expiry VOID cut by a
// kill ends at its ack time-out or deadline, and the sweep sends the next
// within a validity; the expiries of one terminal's pre-auths come within
// a second, and a VOID refused because the terminal runs another's (WP09)
// waits for the next sweep, so each of them may take a sweep more.
const (
	expiryValidity = 4 * time.Second
	// expiryPreAuths is how many pre-auths each terminal process opens.
	expiryPreAuths = 3
	expiryGrace    = ackTimeout + txDeadline + (expiryPreAuths+1)*expiryValidity + 2*time.Second
)

// TestCrashPreAuthExpiry kills the server around the moments its pre-auths
// expire. The server runs with --sandbox --preauth-validity 4s. The raw
// terminal holds one pre-auth: when the service's expiry VOID of it
// arrives, the terminal acknowledges it, the server is killed, and the
// terminal approves the VOID (its result resent after the restart). Each
// terminal process holds three more, opened one after the other; the ECR
// captures or voids one of each near its expiry, racing the service; the
// server is killed twice more at random moments among the expiries, down
// for up to 1.5 s (some expire while it is down). Then every pre-auth must
// have ended EXPIRED, or CAPTURED or VOIDED where the ECR came first, none
// OPEN, within its expiry (or the restart after it) plus expiryGrace,
// each EXPIRED one by exactly one approved TIMER void made at or after
// its expiry; and checkPreAuths' promises hold.
func TestCrashPreAuthExpiry(t *testing.T) {
	crashTest(t, "kills it as pre-auths expire", func(set settings) string {
		return fmt.Sprintf("validity %s, grace %s", expiryValidity, expiryGrace)
	}, runExpiry)
}

func runExpiry(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newPAEnv(t, ctx, set, bin, dbURL, "--sandbox", "--preauth-validity", expiryValidity.String())
	rng := p.seeded(5) // TestCrash has the streams 1 and 2, TestCrashCaptures 3 and 4
	rawTerm := len(p.terms) - 1
	raw := p.preAuthorize(ctx, rawTerm, 30000, "exp-raw")
	if raw == "" {
		t.Fatal("the raw terminal's pre-auth was not approved")
	}
	held := p.raw.hold() // the next command: the expiry's VOID

	wg, _ := p.startWorkers(rng, func(i int, rng *mrand.Rand, _ map[string]int) { p.expiryWork(ctx, i, rng) })
	// The raw terminal's: killed during the expiry's VOID, acknowledged.
	select {
	case cmd := <-held:
		if err := p.raw.ack(cmd); err != nil {
			t.Fatalf("ack the expiry's void: %v", err)
		}
		p.srv.kill9()
		p.raw.finish(cmd.Ref, instore.StatusApproved)
		p.restartAfter(ctx, time.Duration(rng.Int64N(int64(time.Second))), "the kill during the expiry's void")
		t.Logf("%s: SIGKILL as the raw terminal acknowledged the expiry's void %s", p.backend(), cmd.Ref)
	case <-time.After(expiryValidity + keyBudget):
		t.Fatalf("the expiry's void of %s never reached the raw terminal", raw)
	}
	// Two kills at random moments among the other expiries.
	for k := 1; k <= 2; k++ {
		run := time.Duration(rng.Int64N(int64(expiryValidity / 2)))
		down := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
		sleep(ctx, run)
		p.restartAfter(ctx, down, fmt.Sprintf("kill %d", k))
		t.Logf("%s: SIGKILL %d %s later, %s down", p.backend(), k, run.Round(time.Millisecond), down.Round(time.Millisecond))
	}
	wg.Wait()

	rows := p.settle(ctx, p.lastDue(p.rows(ctx)), false)
	timers := p.checkPreAuths(ctx, "the expiries", rows)
	p.checkExpired(rows, timers)
	t.Logf("%s: the store holds %s", p.backend(), tally(rows))
}

// expiryWork opens expiryPreAuths pre-auths on terminal i one after the
// other, then captures or voids one of them near its expiry, racing the
// service's VOID.
func (p *paEnv) expiryWork(ctx context.Context, i int, rng *mrand.Rand) {
	var pres []string
	for n := 0; n < expiryPreAuths; n++ {
		if pre := p.preAuthorize(ctx, i, 100*(10+rng.Int64N(90)), fmt.Sprintf("exp-t%d-%d", i, n)); pre != "" {
			pres = append(pres, pre)
		}
	}
	if len(pres) == 0 {
		return
	}
	pre := pres[rng.IntN(len(pres))]
	a := p.authorization(ctx, pre)
	for a == nil && ctx.Err() == nil {
		sleep(ctx, retryPause) // the server is down
		a = p.authorization(ctx, pre)
	}
	if a == nil {
		return
	}
	// From a second before its expiry to a fifth of a second after.
	sleep(ctx, time.Until(a.ExpiresAt.Add(-time.Second+time.Duration(rng.Int64N(int64(1200*time.Millisecond))))))
	op := preAuthOp("void", pre, 0, fmt.Sprintf("exp-t%d-void", i))
	if rng.IntN(2) == 0 {
		op = preAuthOp("capture", pre, a.AuthorizedAmount, fmt.Sprintf("exp-t%d-capture", i))
	}
	p.run(ctx, i, op)
}

// due is the latest a pre-auth expiring at exp may end: its expiry, or the
// restart after it when the server was down then, plus expiryGrace.
func (p *paEnv) due(exp time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := exp
	for _, d := range p.downs {
		if !exp.Before(d[0]) && exp.Before(d[1]) {
			from = d[1]
		}
	}
	return from.Add(expiryGrace)
}

// lastDue is how long from now the last pre-auth of rows may take to end.
func (p *paEnv) lastDue(rows []paRow) time.Duration {
	var last time.Time
	for _, r := range rows {
		if r.typ == string(instore.TypePreAuth) && r.authState != "" {
			if d := p.due(r.expires); d.After(last) {
				last = d
			}
		}
	}
	return max(time.Until(last), keyBudget)
}

// checkExpired checks that every approved pre-auth ended, none OPEN, an
// EXPIRED one by one TIMER void approved (in time, or late: a VOID's
// late approval releases the hold) or by its lapse, within its due time.
func (p *paEnv) checkExpired(rows []paRow, timers map[string][]paRow) {
	failed := 0
	for _, pre := range rows {
		if pre.typ != string(instore.TypePreAuth) || pre.authState == "" {
			continue
		}
		var released []time.Time // when each timer void that released it, or its lapse, did
		for _, v := range timers[pre.id] {
			if at, ok := v.released(); ok {
				released = append(released, at)
			} else {
				failed++
			}
		}
		if pre.lapses > 0 {
			released = append(released, pre.lapsed)
		}
		switch {
		case pre.authState == string(instore.AuthOpen):
			p.t.Errorf("%s (INSTORE_CRASH_SEED=%d): pre-auth %s is still OPEN %s after its expiry (%d timer voids, none approved)",
				p.backend(), p.set.seed, pre.id, time.Since(pre.expires).Round(time.Millisecond), len(timers[pre.id]))
		case pre.authState == string(instore.AuthExpired) && len(released) != 1:
			p.t.Errorf("%s: pre-auth %s is EXPIRED with %d timer voids approved (in time or late) or lapses, want 1", p.backend(), pre.id, len(released))
		case pre.authState == string(instore.AuthExpired) && released[0].After(p.due(pre.expires)):
			p.t.Errorf("%s (INSTORE_CRASH_SEED=%d): pre-auth %s expired at %s and ended EXPIRED only at %s, past its grace (%s from the expiry or the restart after it)",
				p.backend(), p.set.seed, pre.id, pre.expires.Format(time.RFC3339Nano), released[0].Format(time.RFC3339Nano), expiryGrace)
		}
	}
	p.t.Logf("%s: %d timer voids that did not approve (cut by a kill: ended WP25 or WP36), each sent again by the sweep", p.backend(), failed)
}

// lapsePreAuths is how many pre-auths the raw terminal opens before its
// terminal ID is linked to another device.
const lapsePreAuths = 3

// TestCrashPreAuthLapse kills the server around the expiries of pre-auths
// whose terminal ID was linked to another device since (a replaced
// terminal). The raw terminal opens lapsePreAuths pre-auths one after the
// other (--sandbox --preauth-validity 4s); then terminal 0's ID is
// unlinked and its device linked to the raw terminal's ID, which unlinks
// the raw device, the only one that holds them. The server is killed
// three times, each within 300 ms of one of their expiries, down for up
// to 1.5 s. Then each must have ended EXPIRED by its lapse (one AUTHORIZATION
// entry by the TIMER, lifecycle.EventAuthLapsed) within its expiry (or
// the restart after it) plus expiryGrace, no VOID made for any (the
// device linked now does not hold them), and checkPreAuths' promises hold:
// a kill before the lapse's commit leaves the pre-auth OPEN for the next
// sweep, one after it leaves it EXPIRED, never both or neither.
func TestCrashPreAuthLapse(t *testing.T) {
	crashTest(t, "kills it as pre-auths of a replaced terminal lapse", func(set settings) string {
		return fmt.Sprintf("%d pre-auths, validity %s, grace %s", lapsePreAuths, expiryValidity, expiryGrace)
	}, runLapse)
}

func runLapse(t *testing.T, set settings, bin, dbURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := newPAEnv(t, ctx, set, bin, dbURL, "--sandbox", "--preauth-validity", expiryValidity.String())
	rng := p.seeded(11) // the streams 1 to 10 are the other crash tests'
	rawTerm := len(p.terms) - 1
	var pres []string
	for n := range lapsePreAuths {
		pre := p.preAuthorize(ctx, rawTerm, 100*(10+rng.Int64N(90)), fmt.Sprintf("lapse-%d", n))
		if pre == "" {
			t.Fatalf("pre-auth %d on the raw terminal was not approved", n)
		}
		pres = append(pres, pre)
	}
	// The raw terminal's ID gets terminal 0's device: the raw device, the
	// one that holds the pre-auths, is unlinked.
	body := []byte(fmt.Sprintf(`{"terminalId":%q}`, p.terms[0]))
	if a := p.ecr.do(ctx, "POST", "/in-store/api/v1/terminal/unlink", body, ""); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("unlink terminal 0: %s", a)
	}
	code, err := p.procs[0].linkCode(ctx)
	if err != nil {
		t.Fatalf("terminal 0's device after its unlink: %v", err)
	}
	p.link(ctx, rawTerm, code)

	var expiries []time.Time
	for _, pre := range pres {
		a := p.authorization(ctx, pre)
		if a == nil {
			t.Fatalf("pre-auth %s has no authorisation", pre)
		}
		expiries = append(expiries, a.ExpiresAt)
	}
	// Three kills, each within 300 ms of a pre-auth's expiry, where the
	// timer or the sweep decides its lapse (at once if that moment passed).
	for k := 1; k <= 3; k++ {
		at := expiries[rng.IntN(len(expiries))].Add(time.Duration(rng.Int64N(int64(600*time.Millisecond))) - 300*time.Millisecond)
		down := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
		sleep(ctx, time.Until(at))
		p.restartAfter(ctx, down, fmt.Sprintf("kill %d", k))
		t.Logf("%s: SIGKILL %d at %s, %s down", p.backend(), k, at.Format("15:04:05.000"), down.Round(time.Millisecond))
	}

	rows := p.settle(ctx, p.lastDue(p.rows(ctx)), false)
	timers := p.checkPreAuths(ctx, "the lapses", rows)
	p.checkExpired(rows, timers)
	lapsed := 0
	for _, r := range rows {
		switch {
		case r.typ == "VOID":
			t.Errorf("%s (INSTORE_CRASH_SEED=%d): VOID %s of %s was made; no device linked now holds the pre-auth", p.backend(), set.seed, r.id, r.original)
		case r.typ == "PRE_AUTH" && r.lapses == 1:
			lapsed++
		}
	}
	if lapsed != len(pres) {
		t.Errorf("%s (INSTORE_CRASH_SEED=%d): %d of the %d pre-auths lapsed; %s", p.backend(), set.seed, lapsed, len(pres), tally(rows))
	}
	t.Logf("%s: the store holds %s", p.backend(), tally(rows))
}

package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// What TestCrashCaptures and TestCrashPreAuthExpiry share: an ECR that
// pre-authorises and acts on its pre-auths with Idempotency-Keys, and the
// checks of the pre-authorisation's promises on the store after the kills.

// paEnv is a store's run with pre-authorisations: the crash environment,
// and the final status the ECR was told of each transaction.
type paEnv struct {
	*crashEnv
	mu   sync.Mutex
	told map[string]instore.TransactionStatus // by onlineAPIRefId
	// downs are the intervals the server was down, for the expiry's bound.
	downs [][2]time.Time
}

// newPAEnv provisions a store (PostgreSQL at dbURL, or SQLite) and starts
// the server with serveArgs, its terminal processes and the raw terminal.
func newPAEnv(t *testing.T, ctx context.Context, set settings, bin, dbURL string, serveArgs ...string) *paEnv {
	e := newCrashEnv(t, set, bin, dbURL, serveArgs...)
	e.setup(ctx)
	return &paEnv{crashEnv: e, told: map[string]instore.TransactionStatus{}}
}

// crashTest skips under -short (the test builds the binary and then does
// whatItDoes), loads the settings and logs the seed with what the test is
// made of (runs), builds the binary and runs run on each store
// (forEachStore).
func crashTest(t *testing.T, whatItDoes string, runs func(settings) string, run func(t *testing.T, set settings, bin, dbURL string)) {
	t.Helper()
	if testing.Short() {
		t.Skip("the crash test builds the binary and " + whatItDoes + "; run it without -short")
	}
	set := loadSettings(t)
	t.Logf("seed %d (INSTORE_CRASH_SEED=%d repeats the kill moments), %s", set.seed, set.seed, runs(set))
	bin := buildInstore(t, t.TempDir())
	forEachStore(t, func(t *testing.T, dbURL string) { run(t, set, bin, dbURL) })
}

// forEachStore runs run on SQLite, then on a fresh schema of PostgreSQL
// when INSTORE_TEST_DATABASE_URL is set.
func forEachStore(t *testing.T, run func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { run(t, "") })
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		if u == "" {
			t.Skip("INSTORE_TEST_DATABASE_URL is not set")
		}
		run(t, u)
	})
}

// restartAfter kills the server (SIGKILL), leaves it down for down and
// starts it again on the same data.
func (p *paEnv) restartAfter(ctx context.Context, down time.Duration, label string) {
	p.srv.kill9()
	killed := time.Now()
	sleep(ctx, down)
	if err := p.srv.start(ctx); err != nil {
		p.t.Fatalf("%s: restart: %v", label, err)
	}
	p.mu.Lock()
	p.downs = append(p.downs, [2]time.Time{killed, p.srv.upSince})
	p.mu.Unlock()
}

// paOp is one request of the ECR: a path of the Online API, its body and
// its Idempotency-Key.
type paOp struct {
	path string
	body map[string]any
	key  string
}

func preAuthOp(path, pre string, amount int64, key string) paOp {
	body := map[string]any{"onlineAPIRefId": pre}
	if amount > 0 {
		body["amount"] = amount
	}
	return paOp{path: "/in-store/api/v1/" + path, body: body, key: key}
}

// run sends op on terminal term (as send: retried with its key) and
// follows a created transaction to its final status, which it notes as
// told to the ECR. approved is whether that status is APPROVED.
func (p *paEnv) run(ctx context.Context, term int, op paOp) (out outcome, approved bool) {
	body, _ := json.Marshal(op.body)
	out = p.ecr.send(ctx, term, op.path, body, op.key)
	switch out.kind {
	case "acked":
		st, ok := p.ecr.final(ctx, out.ref)
		if !ok {
			p.led.violation("key %s: its transaction %s is not final within %s", op.key, out.ref, keyBudget)
			return out, false
		}
		p.note(out.ref, st)
		return out, st == instore.StatusApproved
	case "failed":
		p.note(out.ref, instore.StatusTechnicalError)
	case "refused":
		// The pre-auth's rules (409 conflict), the terminal busy or
		// offline, a capture or refund past its limit (400): definitive,
		// no transaction. Anything else is not expected.
		if a := out.last; !(a.status == http.StatusConflict && (a.code == "conflict" || busyOrOffline(a.code)) || a.status == http.StatusBadRequest) {
			p.led.violation("key %s (%s): unexpected answer %s %s", op.key, op.path, a, a.body)
		}
	case "stuck":
		p.led.violation("key %s (%s): no definitive answer in %d attempts over %s; the last: %s", op.key, op.path, out.attempts, keyBudget, out.last)
	}
	return out, false
}

// note keeps the final status the ECR was told of ref: a failure it was
// answered (WP25, WP23) counts as TECHNICAL_ERROR.
func (p *paEnv) note(ref string, st instore.TransactionStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told[ref] = st
}

// race sends the ops at once on terminal term (a capture against a void,
// two captures of one pre-auth), each retried with its own key.
func (p *paEnv) race(ctx context.Context, term int, ops ...paOp) {
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(ctx, term, op)
		}()
	}
	wg.Wait()
}

// preAuthorize opens a pre-auth of amount on terminal term; "" when it was
// not approved.
func (p *paEnv) preAuthorize(ctx context.Context, term int, amount int64, key string) string {
	out, ok := p.run(ctx, term, paOp{path: "/in-store/api/v1/preauthorization", key: key,
		body: map[string]any{"terminalId": p.terms[term], "amount": amount, "currency": "SEK"}})
	if !ok {
		return ""
	}
	return out.ref
}

// authorization reads a pre-auth's authorisation through the API (nil: it
// has none, or the server did not answer).
func (p *paEnv) authorization(ctx context.Context, pre string) *instore.Authorization {
	a := p.ecr.do(ctx, "GET", "/in-store/api/v1/transaction/"+pre, nil, "")
	var v struct {
		Authorization *instore.Authorization `json:"authorization"`
	}
	if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil {
		return nil
	}
	return v.Authorization
}

// paRow is a transaction of the pre-authorisation's family as stored.
type paRow struct {
	id, typ, original, authState string
	status                       instore.TransactionStatus
	amount, tip                  int64
	authorized, captured         int64
	expires, created, completed  time.Time
	byTimer                      bool
	// lateApproved is when the terminal approved it after the service
	// had ended it (timeline LATE_APPROVAL; zero: never): a VOID's late
	// approval releases its pre-auth (docs/decisions.md).
	lateApproved time.Time
	// lapses counts a pre-auth's lapses (an AUTHORIZATION entry by the
	// TIMER that ended it EXPIRED without a void: its terminal ID is linked
	// to another device), the last at lapsed.
	lapses int
	lapsed time.Time
}

// lapseDetail begins the detail of a lapse's timeline entry
// (lifecycle.EventAuthLapsed).
const lapseDetail = "expired without a void"

// released reports whether r, a VOID, released its pre-auth, and when:
// approved in time, or late.
func (r paRow) released() (time.Time, bool) {
	switch {
	case r.status == instore.StatusApproved:
		return r.completed, true
	case !r.lateApproved.IsZero():
		return r.lateApproved, true
	}
	return time.Time{}, false
}

func (r paRow) total() int64 { return r.amount + r.tip }

// rows reads every transaction that is not a purchase.
func (p *paEnv) rows(ctx context.Context) []paRow {
	var out []paRow
	p.scanRows(ctx, `SELECT id, type, status_id, COALESCE(original_id, ''), amount, tip_amount,
		COALESCE(auth_state, ''), authorized_amount, captured_amount, COALESCE(auth_expires_at, 0), by_timer,
		created_at, COALESCE(completed_at, 0),
		COALESCE((SELECT MAX(e.at) FROM transaction_events e WHERE e.transaction_id = transactions.id AND e.kind = 'LATE_APPROVAL'), 0),
		(SELECT COUNT(*) FROM transaction_events e WHERE e.transaction_id = transactions.id AND e.kind = 'AUTHORIZATION'
			AND e.actor = 'TIMER' AND e.detail LIKE '`+lapseDetail+`%'),
		COALESCE((SELECT MAX(e.at) FROM transaction_events e WHERE e.transaction_id = transactions.id AND e.kind = 'AUTHORIZATION'
			AND e.actor = 'TIMER' AND e.detail LIKE '`+lapseDetail+`%'), 0)
		FROM transactions WHERE type <> 'PURCHASE' ORDER BY created_at, id`, func(rs *sql.Rows) error {
		var r paRow
		var expires, created, completed, late, lapsed int64
		if err := rs.Scan(&r.id, &r.typ, &r.status, &r.original, &r.amount, &r.tip, &r.authState, &r.authorized, &r.captured,
			&expires, &r.byTimer, &created, &completed, &late, &r.lapses, &lapsed); err != nil {
			return err
		}
		r.expires, r.created, r.completed = time.UnixMicro(expires), time.UnixMicro(created), time.UnixMicro(completed)
		if late != 0 {
			r.lateApproved = time.UnixMicro(late)
		}
		if lapsed != 0 {
			r.lapsed = time.UnixMicro(lapsed)
		}
		out = append(out, r)
		return nil
	})
	return out
}

// settle waits, for up to bound, until no transaction is PENDING and no
// pre-auth OPEN that must not be (open: whether an OPEN one may stay), and
// returns the rows then.
func (p *paEnv) settle(ctx context.Context, bound time.Duration, open bool) []paRow {
	return untilSettled(ctx, bound, func() []paRow { return p.rows(ctx) }, func(rows []paRow) bool {
		busy := false
		for _, r := range rows {
			busy = busy || r.status == instore.StatusPending || !open && r.authState == string(instore.AuthOpen)
		}
		return busy
	})
}

// checkPreAuths checks the promises on the quiet store: nothing PENDING;
// per pre-auth at most one approved CAPTURE, never both captured and
// voided, its authorisation what its approved operations make it, the
// capture within the tolerance, the refunds within the capture, every
// TIMER void at or after its expiry; every transaction the ECR was told
// the end of stored with that end; every transaction the ECR's keys
// created named by their answers, and no key with two. It returns the
// timer voids of each pre-auth.
func (p *paEnv) checkPreAuths(ctx context.Context, label string, rows []paRow) map[string][]paRow {
	var bad []string
	byID := map[string]paRow{}
	kids := map[string][]paRow{}
	for _, r := range rows {
		byID[r.id] = r
		if r.original != "" {
			kids[r.original] = append(kids[r.original], r)
		}
		if r.status == instore.StatusPending {
			bad = append(bad, fmt.Sprintf("%s %s is still PENDING after the settle time", r.typ, r.id))
		}
	}
	timers := map[string][]paRow{}
	for _, pre := range rows {
		if pre.typ != string(instore.TypePreAuth) {
			continue
		}
		bad = append(bad, checkPreAuth(pre, kids[pre.id])...)
		for _, k := range kids[pre.id] {
			if k.byTimer {
				timers[pre.id] = append(timers[pre.id], k)
			}
		}
	}
	p.mu.Lock()
	for ref, st := range p.told {
		r, ok := byID[ref]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("transaction %s, whose end (status %d) the ECR was told, is not in the store", ref, st))
		case (st == instore.StatusApproved) != (r.status == instore.StatusApproved):
			bad = append(bad, fmt.Sprintf("%s %s: the ECR was told status %d, the store holds %d", r.typ, ref, st, r.status))
		}
	}
	p.mu.Unlock()
	named, _ := p.led.known()
	for _, r := range rows {
		if _, ok := named[r.id]; !ok && !r.byTimer && p.first("unnamed", r.id) {
			bad = append(bad, fmt.Sprintf("%s %s (status %d) is named by no answer the ECR got for its keys (keys without a definitive answer: %s)",
				r.typ, r.id, r.status, strings.Join(p.led.stuckSoFar(), ", ")))
		}
	}
	bad = append(bad, p.checkKeyColumn(ctx, named)...)
	p.report(label, append(bad, p.led.takeViolations()...))
	return timers
}

// checkPreAuth checks one pre-auth against the transactions naming it.
func checkPreAuth(pre paRow, kids []paRow) []string {
	var bad []string
	say := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("pre-auth %s (%s): ", pre.id, pre.authState)+fmt.Sprintf(format, args...))
	}
	approved := map[string][]paRow{}
	var refunded int64
	authorized := pre.total()
	for _, k := range kids {
		if k.typ == string(instore.TypeRefund) && (k.status == instore.StatusApproved || k.status == instore.StatusPending) {
			refunded += k.amount
		}
		if _, released := k.released(); k.status != instore.StatusApproved && !(k.typ == string(instore.TypeVoid) && released) {
			continue // a VOID approved late counts: it released the hold
		}
		kind := k.typ
		if k.byTimer {
			kind = "TIMER VOID"
			if k.created.Before(pre.expires) {
				say("the service voided it at %s, before its expiry %s", k.created.Format(time.RFC3339Nano), pre.expires.Format(time.RFC3339Nano))
			}
		}
		approved[kind] = append(approved[kind], k)
		if k.typ == string(instore.TypeIncrement) {
			authorized += k.amount
		}
	}
	if pre.status != instore.StatusApproved {
		if pre.authState != "" || len(approved) > 0 || refunded > 0 {
			say("a pre-auth in status %d has an authorisation or approved operations: %v", pre.status, approved)
		}
		return bad
	}
	caps, voids, timers := approved["CAPTURE"], approved["VOID"], approved["TIMER VOID"]
	if len(caps) > 1 {
		say("captured %d times: %s and %s", len(caps), caps[0].id, caps[1].id)
	}
	if len(caps)+len(voids)+len(timers)+pre.lapses > 1 {
		say("%d approved captures, %d voids, %d timer voids, %d lapses: at most one of all", len(caps), len(voids), len(timers), pre.lapses)
	}
	if pre.lapses > 0 && pre.lapsed.Before(pre.expires) {
		say("it lapsed at %s, before its expiry %s", pre.lapsed.Format(time.RFC3339Nano), pre.expires.Format(time.RFC3339Nano))
	}
	want := instore.AuthOpen
	switch {
	case len(caps) > 0:
		want = instore.AuthCaptured
		if pre.captured != caps[0].total() {
			say("capturedAmount %d, its approved capture %s took %d", pre.captured, caps[0].id, caps[0].total())
		}
	case len(voids) > 0:
		want = instore.AuthVoided
	case len(timers) > 0, pre.lapses > 0:
		want = instore.AuthExpired
	}
	if pre.authState != string(want) {
		say("its approved operations make it %s", want)
	}
	if pre.authorized != authorized {
		say("authorizedAmount %d; its total and approved increments make %d", pre.authorized, authorized)
	}
	if limit := instore.CaptureLimit(pre.authorized, instore.DefaultCaptureTolerance); pre.captured > limit {
		say("capturedAmount %d is past the tolerance's %d", pre.captured, limit)
	}
	if refunded > pre.captured {
		say("refunds of %d (approved or pending) exceed the captured %d", refunded, pre.captured)
	}
	return bad
}

// TestCheckPreAuth shows that checkPreAuth finds each broken promise it is
// for, on stored rows made up here (the crash tests find none).
func TestCheckPreAuth(t *testing.T) {
	exp := time.Unix(1000, 0)
	pre := paRow{id: "pre", typ: "PRE_AUTH", authState: "CAPTURED", amount: 1000, authorized: 1500, captured: 1800, expires: exp}
	kid := func(typ string, status instore.TransactionStatus, amount int64) paRow {
		return paRow{id: typ, typ: typ, original: "pre", status: status, amount: amount, created: exp.Add(-time.Second)}
	}
	inc, capture := kid("INCREMENT", instore.StatusApproved, 500), kid("CAPTURE", instore.StatusApproved, 1800)
	timer := kid("VOID", instore.StatusApproved, 1500)
	timer.byTimer = true
	over := pre
	over.captured = 1801
	lateVoid := kid("VOID", instore.StatusTechnicalError, 1500)
	lateVoid.lateApproved = exp
	voided := paRow{id: "pre", typ: "PRE_AUTH", authState: "VOIDED", amount: 1500, authorized: 1500, expires: exp.Add(time.Hour)}
	lapsed := paRow{id: "pre", typ: "PRE_AUTH", authState: "EXPIRED", amount: 1500, authorized: 1500, expires: exp, lapses: 1, lapsed: exp}
	early := lapsed
	early.lapsed = exp.Add(-time.Millisecond)
	twice := lapsed
	twice.lapses = 2
	lapsedOpen := lapsed
	lapsedOpen.authState = "OPEN"
	cases := []struct {
		name string
		pre  paRow
		kids []paRow
		bad  bool
	}{
		{"captured once, refunded in part", pre, []paRow{inc, capture, kid("REFUND", instore.StatusApproved, 1800)}, false},
		{"captured twice", pre, []paRow{inc, capture, capture}, true},
		{"captured and voided", pre, []paRow{inc, capture, kid("VOID", instore.StatusApproved, 1500)}, true},
		{"refunded past the capture", pre, []paRow{inc, capture, kid("REFUND", instore.StatusApproved, 1000), kid("REFUND", instore.StatusPending, 900)}, true},
		{"an increment lost", pre, []paRow{capture}, true},
		{"captured past the tolerance", over, []paRow{inc, kid("CAPTURE", instore.StatusApproved, 1801)}, true},
		{"voided by the timer before its expiry", paRow{id: "pre", typ: "PRE_AUTH", authState: "EXPIRED", amount: 1500, authorized: 1500, expires: exp}, []paRow{timer}, true},
		{"captured with no approved capture", pre, []paRow{inc, kid("CAPTURE", instore.StatusTechnicalError, 1800)}, true},
		{"voided by a void approved late", voided, []paRow{lateVoid}, false},
		{"captured and voided by a void approved late", pre, []paRow{inc, capture, lateVoid}, true},
		{"lapsed at its expiry", lapsed, nil, false},
		{"lapsed before its expiry", early, nil, true},
		{"lapsed twice", twice, nil, true},
		{"lapsed and still OPEN", lapsedOpen, nil, true},
		{"lapsed and voided by the timer", lapsed, []paRow{func() paRow { v := timer; v.created = exp; return v }()}, true},
		{"captured by a capture approved late", pre, []paRow{inc, func() paRow { c := capture; c.status, c.lateApproved = instore.StatusReversed, exp; return c }()}, true},
	}
	for _, c := range cases {
		if got := checkPreAuth(c.pre, c.kids); (len(got) > 0) != c.bad {
			t.Errorf("%s: checkPreAuth = %q, want a finding: %t", c.name, got, c.bad)
		}
	}
}

package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
)

const (
	// keyBudget bounds how long the ECR repeats one request with one
	// Idempotency-Key before it gives up on it: the server's death and
	// restart, the terminals' reconnects and a transaction's deadline fit
	// in it many times over.
	keyBudget = 20 * time.Second
	// retryPause is the pause between two attempts.
	retryPause = 100 * time.Millisecond
)

// answer is what one HTTP request got.
type answer struct {
	err      error // no HTTP answer at all
	status   int
	ref      string                    // onlineAPIRefId of a transaction or a problem
	code     string                    // a problem's errorCode, or its type's name
	detail   string                    // a problem's detail
	statusID instore.TransactionStatus // a transaction's statusId
	replayed bool
	body     []byte
	// retryAfter and problem: its Retry-After header, and whether it is a
	// problem body (application/problem+json).
	retryAfter string
	problem    bool
}

func (a answer) String() string {
	switch {
	case a.err != nil:
		return "network error: " + a.err.Error()
	case a.code != "":
		return fmt.Sprintf("%d %s", a.status, a.code)
	default:
		return fmt.Sprint(a.status)
	}
}

// own reports whether the answer names the transaction its request created:
// a 201, or the problems of a purchase whose transaction was created and
// then failed (WP25: not acknowledged; WP23: the terminal went offline
// before the command reached it). WP09 and WP30 name the transaction
// another request runs on the terminal.
func (a answer) own() bool {
	return a.err == nil && a.ref != "" && (a.status == http.StatusCreated || a.code == "WP25" || a.code == "WP23")
}

// retry reports whether the ECR sends the request again with the same key:
// no answer, a 5xx that is not a definitive WP25, or 409 conflict about
// the key (the first request with it still runs, or died with the server),
// told by its detail from the conflict of a pre-auth's rules (not OPEN, a
// capture or void in flight), which is definitive.
func (a answer) retry() bool {
	return a.err != nil || a.status >= 500 && a.code != "WP25" ||
		a.status == http.StatusConflict && a.code == "conflict" && strings.Contains(a.detail, "Idempotency-Key")
}

// ecr is the cash register: it pays with Idempotency-Key, retries as the
// API says it may, and keeps a ledger of every answer.
type ecr struct {
	api apitest.Caller // the Online API, as the merchant
	led *ledger
	// budget replaces keyBudget when set (a database failover is longer
	// than a node's restart).
	budget time.Duration
	// seen, when set, is given every answer.
	seen func(answer)
}

// newECR returns the cash register of the merchant with the subscription
// key and access token, calling the Online API at base.
func newECR(base, key, token string, led *ledger) *ecr {
	return &ecr{api: apitest.Caller{Client: &http.Client{Timeout: 30 * time.Second}, Base: base, Key: key, Token: token}, led: led}
}

// keyBudget is how long the ECR repeats one request with one key.
func (e *ecr) keyBudget() time.Duration {
	if e.budget > 0 {
		return e.budget
	}
	return keyBudget
}

func (e *ecr) do(ctx context.Context, method, path string, body []byte, idemKey string) answer {
	extra := map[string]string{"Accept": "application/json"}
	if idemKey != "" {
		extra["Idempotency-Key"] = idemKey
	}
	resp, b, err := e.api.Send(ctx, method, path, body, extra)
	if err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: b,
		retryAfter: resp.Header.Get("Retry-After"), problem: resp.Header.Get("Content-Type") == "application/problem+json"}
	if e.seen != nil {
		defer func() { e.seen(a) }()
	}
	var v struct {
		Ref       string                    `json:"onlineAPIRefId"`
		StatusID  instore.TransactionStatus `json:"statusId"`
		Type      string                    `json:"type"`
		ErrorCode string                    `json:"errorCode"`
		Detail    string                    `json:"detail"`
	}
	json.Unmarshal(b, &v)
	a.ref, a.statusID, a.code, a.detail = v.Ref, v.StatusID, v.ErrorCode, v.Detail
	if resp.StatusCode >= 400 && a.code == "" {
		a.code = strings.TrimPrefix(v.Type, "urn:instore:problem:")
		if a.code == "" {
			a.code = "?"
		}
	}
	return a
}

// token gets an access token with the client credentials.
func token(ctx context.Context, base, clientID, secret string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 || tok.AccessToken == "" {
		return "", fmt.Errorf("token: status %d", resp.StatusCode)
	}
	return tok.AccessToken, nil
}

// outcome is how a purchase ended for the ECR.
type outcome struct {
	kind     string // "acked" (201), "failed" (its transaction failed: WP25, WP23), "refused" (no transaction), "stuck" (no definitive answer)
	ref      string
	last     answer
	attempts int
}

// purchase pays amount on a terminal with key, repeating the request with
// the same key while the answers say it may (answer.retry), for up to
// keyBudget.
func (e *ecr) purchase(ctx context.Context, term int, terminalID string, amount int64, key string) outcome {
	out := e.purchaseQuiet(ctx, term, terminalID, amount, key)
	if out.kind == "stuck" {
		e.led.violation("key %s (terminal %d): no definitive answer in %d attempts over %s; the last: %s", key, term, out.attempts, e.keyBudget(), out.last)
	}
	return out
}

// purchaseQuiet is purchase for a caller that reports a stuck key itself.
func (e *ecr) purchaseQuiet(ctx context.Context, term int, terminalID string, amount int64, key string) outcome {
	body, _ := json.Marshal(map[string]any{"terminalId": terminalID, "amount": amount, "currency": "SEK"})
	out := e.send(ctx, term, "/in-store/api/v1/purchase", body, key)
	// Busy (WP09, WP30) or offline (WP23 before the transaction was
	// created): no transaction. Anything else is not expected here.
	if a := out.last; out.kind == "refused" && (a.status != http.StatusConflict || !busyOrOffline(a.code)) {
		e.led.violation("key %s: unexpected answer %s", key, a)
	}
	return out
}

// busyOrOffline reports whether a 409's code says the terminal could not
// take the request now (WP09, WP30: busy; WP23: offline).
func busyOrOffline(code string) bool { return code == "WP09" || code == "WP30" || code == "WP23" }

// send posts body to path with key (terminal term, for the ledger),
// repeating the request with the same key while the answers say it may
// (answer.retry), for up to keyBudget: the outcome is "acked" (201),
// "failed" (answer.own), "refused" (any other definitive answer) or
// "stuck".
func (e *ecr) send(ctx context.Context, term int, path string, body []byte, key string) outcome {
	start := time.Now()
	for attempts := 1; ; attempts++ {
		a := e.do(ctx, "POST", path, body, key)
		e.led.answer(key, term, a)
		switch {
		case a.err == nil && a.status == http.StatusCreated:
			return outcome{kind: "acked", ref: a.ref, last: a}
		case a.own():
			return outcome{kind: "failed", ref: a.ref, last: a}
		case !a.retry():
			return outcome{kind: "refused", last: a}
		}
		if time.Since(start) > e.keyBudget() || ctx.Err() != nil {
			e.led.stuck(key)
			return outcome{kind: "stuck", last: a, attempts: attempts}
		}
		sleep(ctx, retryPause)
	}
}

// final long-polls a transaction until it is final; 0 and false when it is
// still PENDING after keyBudget.
func (e *ecr) final(ctx context.Context, ref string) (instore.TransactionStatus, bool) {
	start := time.Now()
	for time.Since(start) < e.keyBudget() && ctx.Err() == nil {
		a := e.do(ctx, "GET", "/in-store/api/v1/transaction/"+ref+"?wait=5", nil, "")
		if a.err == nil && a.status == http.StatusOK && a.statusID != instore.StatusPending {
			return a.statusID, true
		}
		if a.err != nil || a.status != http.StatusOK {
			sleep(ctx, retryPause)
		}
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ledger is what the ECR learned: for each Idempotency-Key the transaction
// its answers named, and what contradicts the API's promises.
type ledger struct {
	mu         sync.Mutex
	keys       map[string]*keyLog
	refs       map[string]string // transaction -> the key whose answers named it
	stuckKeys  []string
	violations apitest.Notes
}

type keyLog struct {
	term  int
	ref   string // the transaction its answers named
	acked bool   // a 201 named it
}

func newLedger() *ledger {
	return &ledger{keys: map[string]*keyLog{}, refs: map[string]string{}}
}

func (l *ledger) answer(key string, term int, a answer) {
	if !a.own() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		k = &keyLog{term: term}
		l.keys[key] = k
	}
	if k.ref != "" && k.ref != a.ref {
		l.violations.Addf("key %s has two transactions: its answers named %s, then %s (%s)", key, k.ref, a.ref, a)
	} else if other, ok := l.refs[a.ref]; ok && other != key {
		l.violations.Addf("transaction %s was named by two keys, %s and %s", a.ref, other, key)
	}
	if k.ref == "" {
		k.ref = a.ref
		l.refs[a.ref] = key
	}
	if a.status == http.StatusCreated {
		k.acked = true
	}
}

// stuck notes a key the ECR gave up on without a definitive answer.
func (l *ledger) stuck(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stuckKeys = append(l.stuckKeys, key)
}

func (l *ledger) violation(format string, args ...any) { l.violations.Addf(format, args...) }

// takeViolations returns the violations found since the last call.
func (l *ledger) takeViolations() []string { return l.violations.Take() }

// known returns the transactions the answers named, and those of them a 201
// acknowledged.
func (l *ledger) known() (named map[string]string, acked []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	named = map[string]string{}
	for ref, key := range l.refs {
		named[ref] = key
		if l.keys[key].acked {
			acked = append(acked, ref)
		}
	}
	sort.Strings(acked)
	return named, acked
}

func (l *ledger) stuckSoFar() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.stuckKeys...)
}

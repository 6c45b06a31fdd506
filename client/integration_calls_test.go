package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestIntegrationErrors(t *testing.T) {
	e := startDemo(t, nil)
	ctx := t.Context()
	c, t0, t1, t2 := e.c, e.terms[0], e.terms[1], e.terms[2]
	badToken := e.newClient(t, func(cfg *client.Config) { cfg.Online.AccessToken = "not-a-token" })
	approved := payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1250, Currency: "SEK"})
	payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1300, Currency: "SEK"})
	conflictKey := client.IdempotencyKey("it-conflict-1")
	mustOK[*client.Transaction](t, "Purchase with key")(c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 100, Currency: "SEK"}, conflictKey))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, approved.OnlineAPIRefID, nil))

	var busyRef string
	// purchase is the call of a case that is only a purchase.
	purchase := func(p client.PurchaseParams, opts ...client.CallOption) func() error {
		return func() error {
			_, err := c.Purchase(ctx, p, opts...)
			return err
		}
	}
	cases := []struct {
		name       string
		call       func() error
		wantStatus int
		wantCode   string
		wantID     int    // errorId, 0 when no WP code applies
		wantField  string // first field error, if any
	}{
		{"unauthorized", func() error { _, err := badToken.Terminals(ctx); return err }, 401, instore.EUnauthorized, 0, ""},
		{"validation", purchase(client.PurchaseParams{TerminalID: t0, Currency: "SEK"}), 400, instore.EValidation, 0, "/amount"},
		{"WP16 terminal of another merchant", func() error { _, err := c.Terminal(ctx, "99999999"); return err }, 403, instore.WP16, 16, ""},
		{"WP04 unknown transaction", func() error { _, err := c.Transaction(ctx, "txn_unknown", 0); return err }, 404, instore.WP04, 4, ""},
		{"WP22 unknown payment method", purchase(client.PurchaseParams{TerminalID: t0, Amount: 100, Currency: "SEK", PaymentMethodID: client.Int(9)}),
			400, instore.WP22, 22, ""},
		{"WP18 nothing to cancel", func() error { _, err := c.Cancel(ctx, t0); return err }, 409, instore.WP18, 18, ""},
		{"WP26 range over 30 days", func() error {
			now := time.Now()
			_, err := c.Transactions(ctx, client.ListParams{From: now.Add(-40 * 24 * time.Hour), To: now})
			return err
		}, 400, instore.WP26, 26, ""},
		{"WP27 older than 90 days", func() error {
			now := time.Now()
			_, err := c.Transactions(ctx, client.ListParams{From: now.Add(-100 * 24 * time.Hour), To: now.Add(-95 * 24 * time.Hour)})
			return err
		}, 400, instore.WP27, 27, ""},
		{"not-reversible: not the latest", func() error {
			_, err := c.Reversal(ctx, client.ReversalParams{OnlineAPIRefID: approved.OnlineAPIRefID})
			return err
		}, 409, instore.ENotReversible, 0, ""},
		{"idempotency-conflict", purchase(client.PurchaseParams{TerminalID: t0, Amount: 200, Currency: "SEK"}, conflictKey),
			422, instore.EIdempotencyConflict, 0, ""},
		{"link-code-invalid", func() error { _, err := c.LinkTerminal(ctx, t0, "000000"); return err }, 400, instore.ELinkCodeInvalid, 0, ""},
		{"not-found print job", func() error { _, err := c.PrintJob(ctx, "prt_unknown"); return err }, 404, instore.ENotFound, 0, ""},
		{"WP09 terminal busy", func() error {
			tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t1, Amount: 1092, Currency: "SEK"})
			if err != nil {
				return err
			}
			busyRef = tx.OnlineAPIRefID
			_, err = c.Purchase(ctx, client.PurchaseParams{TerminalID: t1, Amount: 100, Currency: "SEK"})
			return err
		}, 409, instore.WP09, 9, ""},
		{"WP30 acknowledged, then offline", func() error {
			mustOK[*client.SandboxDevice](t, "SandboxOffline")(c.SandboxOffline(ctx, t1))
			waitOnline(t, c, t1, false)
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t1, Amount: 100, Currency: "SEK"})
			mustOK[*client.SandboxDevice](t, "SandboxOnline")(c.SandboxOnline(ctx, t1))
			waitOnline(t, c, t1, true)
			mustOK[*client.Transaction](t, "Cancel")(c.Cancel(ctx, t1))
			mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, busyRef, nil))
			return err
		}, 409, instore.WP30, 30, ""},
		{"WP25 no acknowledgement", purchase(client.PurchaseParams{TerminalID: t0, Amount: 1091, Currency: "SEK"}), 504, instore.WP25, 25, ""},
		{"WP02 unlink of an unlinked terminal", func() error {
			mustOK[*client.Terminal](t, "UnlinkTerminal")(c.UnlinkTerminal(ctx, t2))
			_, err := c.UnlinkTerminal(ctx, t2)
			return err
		}, 409, instore.WP02, 2, ""},
		{"WP01 purchase on an unlinked terminal", purchase(client.PurchaseParams{TerminalID: t2, Amount: 100, Currency: "SEK"}), 409, instore.WP01, 1, ""},
		{"WP03 merchant inactive", func() error {
			if err := admin.New(e.d.Server.Store).SetMerchantActive(ctx, e.info.MerchantID, false); err != nil {
				t.Fatal(err)
			}
			var err error
			testwait.For(t, "the auth cache to forget the merchant", func() bool {
				_, err = c.Terminals(ctx)
				return err != nil
			})
			return err
		}, 403, instore.WP03, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v, want a *client.Error", err)
			}
			if e.StatusCode != tc.wantStatus || e.Code() != tc.wantCode || e.ErrorID != tc.wantID {
				t.Errorf("error = %d %s (id %d), want %d %s (id %d): %v", e.StatusCode, e.Code(), e.ErrorID, tc.wantStatus, tc.wantCode, tc.wantID, err)
			}
			if e.RequestID == "" || !strings.HasPrefix(e.Type, client.ProblemTypePrefix) {
				t.Errorf("error lacks requestId or type: %+v", e)
			}
			if tc.wantID != 0 {
				want, _ := (&instore.Metadata{ErrorCodes: instore.DefaultMetadata().ErrorCodes}).ErrorCode(tc.wantCode)
				if e.Title != want.Description {
					t.Errorf("title = %q, want the code's description %q", e.Title, want.Description)
				}
			}
			if tc.wantField != "" && (len(e.Errors) == 0 || e.Errors[0].Field != tc.wantField) {
				t.Errorf("field errors = %+v, want %s first", e.Errors, tc.wantField)
			}
			if tc.wantCode == instore.WP09 && e.OnlineAPIRefID != busyRef {
				t.Errorf("WP09 names %q, want the running %q", e.OnlineAPIRefID, busyRef)
			}
		})
	}
}

// TestIntegrationIdempotentRetry loses the first answer to a purchase on
// the way back: the SDK retries with the same Idempotency-Key, the service
// replays its first answer, and only one transaction exists.
func TestIntegrationIdempotentRetry(t *testing.T) {
	e := startDemo(t, nil)
	ctx := t.Context()
	t0 := e.terms[0]
	e.rec.dropFirst(http.MethodPost, client.Prefix+"/purchase")
	tx, err := e.c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 4200, Currency: "SEK"})
	if err != nil {
		t.Fatalf("Purchase with its first answer lost: %v", err)
	}
	xs := e.rec.exchanges(http.MethodPost, client.Prefix+"/purchase")
	if len(xs) != 2 {
		t.Fatalf("purchase requests = %d, want 2 (the lost one and its retry)", len(xs))
	}
	if xs[0].key == "" || xs[1].key != xs[0].key {
		t.Errorf("Idempotency-Keys = %q, %q; want one key reused", xs[0].key, xs[1].key)
	}
	if !xs[0].dropped || xs[0].status != 201 || xs[1].status != 201 || !xs[1].replayed {
		t.Errorf("exchanges = %+v, want a lost 201 then its replay", xs)
	}
	page := mustOK[*client.TransactionPage](t, "Transactions")(e.c.Transactions(ctx, client.ListParams{TerminalID: t0}))
	if len(page.Transactions) != 1 || page.Transactions[0].OnlineAPIRefID != tx.OnlineAPIRefID {
		t.Errorf("transactions on %s = %d, want exactly the one purchase %s", t0, len(page.Transactions), tx.OnlineAPIRefID)
	}
	if final := mustOK[*client.Transaction](t, "WaitForFinal")(e.c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)); !final.Approved() {
		t.Errorf("purchase ended %s", final.Status)
	}

	// A 4xx is never retried.
	e.c.Cancel(ctx, t0)
	if n := len(e.rec.exchanges(http.MethodPost, client.Prefix+"/cancel")); n != 1 {
		t.Errorf("cancel requests after WP18 = %d, want 1", n)
	}
}

// TestIntegrationCallOptions drives the call options against the service:
// IdempotencyKey sends the caller's key on one call only, SaveResponse
// returns the answer's metadata (request id, Idempotent-Replayed, the key
// sent, the attempts), and every request names the SDK and its version in
// User-Agent.
func TestIntegrationCallOptions(t *testing.T) {
	e := startDemo(t, nil)
	ctx := t.Context()
	c, t0 := e.c, e.terms[0]
	purchases := func() []exchange { return e.rec.exchanges(http.MethodPost, client.Prefix+"/purchase") }
	p := client.PurchaseParams{TerminalID: t0, Amount: 2100, Currency: "SEK"}

	var r client.Response
	tx := mustOK[*client.Transaction](t, "Purchase")(c.Purchase(ctx, p, client.IdempotencyKey("it-order-7"), client.SaveResponse(&r)))
	sent := purchases()[0]
	if sent.key != "it-order-7" {
		t.Errorf("Idempotency-Key sent = %q, want it-order-7", sent.key)
	}
	want := client.Response{StatusCode: 201, RequestID: sent.requestID, IdempotencyKey: "it-order-7", Attempts: 1}
	if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(client.Response{}, "Header")); diff != "" || r.RequestID == "" {
		t.Errorf("SaveResponse of the first purchase (-want +got):\n%s", diff)
	}
	if r.Header.Get("Location") == "" && r.Header.Get("Content-Type") == "" {
		t.Errorf("SaveResponse kept no header: %v", r.Header)
	}
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil))

	// The same key again: the first answer, replayed.
	var again client.Response
	tx2 := mustOK[*client.Transaction](t, "Purchase again")(c.Purchase(ctx, p, client.IdempotencyKey("it-order-7"), client.SaveResponse(&again)))
	if tx2.OnlineAPIRefID != tx.OnlineAPIRefID || again.StatusCode != 201 || !again.Replayed || again.RequestID != purchases()[1].requestID || again.IdempotencyKey != "it-order-7" {
		t.Errorf("purchase with the same key = %s, %+v; want %s replayed", tx2.OnlineAPIRefID, again, tx.OnlineAPIRefID)
	}

	// The option is for one call: the next call without it gets a key of
	// its own, which SaveResponse shows; the option wins over the
	// (deprecated) context key.
	ctxKey := client.WithIdempotencyKey(ctx, "it-context-key")
	var own client.Response
	tx3 := mustOK[*client.Transaction](t, "Purchase with the context key")(c.Purchase(ctxKey, client.PurchaseParams{TerminalID: t0, Amount: 2200, Currency: "SEK"}, client.IdempotencyKey("it-order-8"), client.SaveResponse(&own)))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, tx3.OnlineAPIRefID, nil))
	tx4 := mustOK[*client.Transaction](t, "Purchase without a key")(c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 2300, Currency: "SEK"}, client.SaveResponse(&own)))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, tx4.OnlineAPIRefID, nil))
	xs := purchases()
	if got := []string{xs[2].key, xs[3].key}; got[0] != "it-order-8" || len(got[1]) != 32 || own.IdempotencyKey != got[1] || own.Replayed {
		t.Errorf("keys sent = %q, SaveResponse = %+v; want it-order-8, then a random key that SaveResponse shows", got, own)
	}

	// A GET: no key; an error answer: its status and request id too, the
	// same as the *Error's.
	var meta client.Response
	mustOK[*client.Metadata](t, "Metadata")(c.Metadata(ctx, client.SaveResponse(&meta)))
	if meta.StatusCode != 200 || meta.IdempotencyKey != "" || meta.RequestID == "" || meta.Attempts != 1 {
		t.Errorf("SaveResponse of Metadata = %+v", meta)
	}
	var refused client.Response
	_, err := c.Cancel(ctx, t0, client.SaveResponse(&refused))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.ErrorCode != instore.WP18 || refused.StatusCode != 409 || refused.RequestID != ce.RequestID || refused.IdempotencyKey == "" {
		t.Errorf("Cancel with nothing running = %v, SaveResponse %+v; want WP18 with the same status and request id", err, refused)
	}
	// The Access API takes the options as well.
	var acc client.Response
	mustOK[*client.TerminalInfo](t, "GetTerminalInfo")(c.GetTerminalInfo(ctx, t0, client.SaveResponse(&acc)))
	if acc.StatusCode != 200 || acc.RequestID == "" {
		t.Errorf("SaveResponse of GetTerminalInfo = %+v", acc)
	}

	// A lost answer: two attempts, the second a replay of the first.
	e.rec.dropFirst(http.MethodPost, client.Prefix+"/purchase")
	var retried client.Response
	tx5 := mustOK[*client.Transaction](t, "Purchase with its answer lost")(c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 2400, Currency: "SEK"}, client.SaveResponse(&retried)))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, tx5.OnlineAPIRefID, nil))
	if retried.Attempts != 2 || !retried.Replayed || retried.StatusCode != 201 {
		t.Errorf("SaveResponse after a lost answer = %+v, want 2 attempts, the last replayed", retried)
	}

	// User-Agent: the SDK and its version, after the program's own name.
	if client.Version == "" {
		t.Errorf("client.Version is empty")
	}
	for _, x := range e.rec.exchanges(http.MethodGet, client.Prefix+"/metadata") {
		if x.userAgent != "instore-go/"+client.Version {
			t.Errorf("User-Agent = %q, want instore-go/%s", x.userAgent, client.Version)
		}
	}
	till := e.newClient(t, func(cfg *client.Config) { cfg.UserAgent = "till/2.1" })
	mustOK[[]*client.Terminal](t, "Terminals")(till.Terminals(ctx))
	xs = e.rec.exchanges(http.MethodGet, client.Prefix+"/terminals")
	if got := xs[len(xs)-1].userAgent; got != "till/2.1 instore-go/"+client.Version {
		t.Errorf("User-Agent with Config.UserAgent = %q, want till/2.1 instore-go/%s", got, client.Version)
	}
}

func TestIntegrationTokenRefresh(t *testing.T) {
	e := startDemo(t, nil)
	ctx := t.Context()
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := e.newClient(t, func(cfg *client.Config) {
		cfg.Online = client.Credentials{SubscriptionKey: e.info.SubscriptionKey, ClientID: e.info.ClientID, ClientSecret: e.info.ClientSecret}
		cfg.Now = clock
	})
	tokens := func() int { return len(e.rec.exchanges(http.MethodPost, "/oauth2/token")) }
	steps := []struct {
		name    string
		advance time.Duration
		want    int
	}{
		{"the first call fetches a token", 0, 1},
		{"the token is reused", 30 * time.Minute, 1},
		{"near its expiry it is renewed", 29*time.Minute + 30*time.Second, 2},
		{"the renewed token is reused", time.Minute, 2},
	}
	for _, st := range steps {
		mu.Lock()
		now = now.Add(st.advance)
		mu.Unlock()
		if _, err := c.Terminals(ctx); err != nil {
			t.Fatalf("%s: Terminals: %v", st.name, err)
		}
		if got := tokens(); got != st.want {
			t.Errorf("%s: token requests = %d, want %d", st.name, got, st.want)
		}
	}
	// Wrong client credentials: the token endpoint's 401 as an *Error.
	bad := e.newClient(t, func(cfg *client.Config) {
		cfg.Online = client.Credentials{SubscriptionKey: e.info.SubscriptionKey, ClientID: e.info.ClientID, ClientSecret: "wrong"}
	})
	_, err := bad.Metadata(ctx)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 401 || ce.Route != "/oauth2/token" {
		t.Errorf("Metadata with a wrong client secret = %v, want the token endpoint's 401", err)
	}
}

func TestIntegrationRateLimit(t *testing.T) {
	e := startDemo(t, func(cfg *server.Config) { cfg.RateLimit, cfg.RateBurst = 1, 1 })
	ctx := t.Context()
	for i := range 2 {
		if _, err := e.c.Metadata(ctx); err != nil {
			t.Fatalf("Metadata %d under the rate limit: %v", i, err)
		}
	}
	xs := e.rec.exchanges(http.MethodGet, client.Prefix+"/metadata")
	var statuses []int
	for _, x := range xs {
		statuses = append(statuses, x.status)
	}
	if !slices.Contains(statuses, 429) || statuses[len(statuses)-1] != 200 {
		t.Errorf("metadata statuses = %v, want a 429 retried after Retry-After into a 200", statuses)
	}
}

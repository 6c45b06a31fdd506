package client_test

// The integration suite: the whole service (internal/demo: store, Online
// API, Access API, terminal gateway, virtual terminals) started in-process
// on port 0 and driven only through the SDK. Every response is validated
// against the OpenAPI documents.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// Time-outs short enough that WP25 and the sandbox rules run in seconds,
// long enough that a transaction the test cancels is still running.
const (
	itAck      = time.Second
	itDeadline = 20 * time.Second
)

// recorder is a RoundTripper that keeps what went over the wire.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []exchange
	// drop, when it returns true for a request, loses the answer after
	// the server produced it, as a broken connection does.
	drop func(r *http.Request, n int) bool
}

type exchange struct {
	method, path, key    string
	userAgent, requestID string
	status               int
	replayed             bool
	dropped              bool
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rec.next.RoundTrip(r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	x := exchange{method: r.Method, path: r.URL.Path, key: r.Header.Get("Idempotency-Key"), userAgent: r.Header.Get("User-Agent")}
	if resp != nil {
		x.status, x.replayed = resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
		x.requestID = resp.Header.Get("X-Request-Id")
	}
	if err == nil && rec.drop != nil && rec.drop(r, len(rec.log)) {
		resp.Body.Close()
		x.dropped = true
		rec.log = append(rec.log, x)
		return nil, errors.New("connection reset by peer")
	}
	rec.log = append(rec.log, x)
	return resp, err
}

func (rec *recorder) exchanges(method, path string) []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []exchange
	for _, x := range rec.log {
		if x.method == method && x.path == path {
			out = append(out, x)
		}
	}
	return out
}

// itEnv is a running demo and SDK clients for it.
type itEnv struct {
	d    *demo.Demo
	info demo.Info
	c    *client.Client
	rec  *recorder
	// online validates Online API answers; access Access API answers
	// (nil until api/access-api.yaml exists).
	online, access *apitest.Validator
	terms          []string
}

func startDemo(t *testing.T, mutate func(*server.Config)) *itEnv {
	t.Helper()
	cfg := testserver.Config(t.TempDir())
	cfg.TokenTTL, cfg.AckTimeout, cfg.TransactionDeadline, cfg.PrintTimeout, cfg.SimDelay = time.Hour, itAck, itDeadline, 5*time.Second, 0
	if mutate != nil {
		mutate(&cfg)
	}
	d, err := demo.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("demo.Start: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	e := &itEnv{d: d, info: d.Info(), online: apitest.NewValidator(t, api.OnlineYAML)}
	if doc, err := os.ReadFile("../api/access-api.yaml"); err == nil {
		e.access = apitest.NewValidator(t, doc)
	}
	e.rec = &recorder{next: &surfaceValidator{t: t, env: e}}
	for _, term := range e.info.Terminals {
		e.terms = append(e.terms, term.TerminalID)
	}
	e.c = e.newClient(t, nil)
	// The virtual terminals connect to the gateway after the start.
	for _, id := range e.terms {
		waitOnline(t, e.c, id, true)
	}
	return e
}

// surfaceValidator validates each answer against the document of the
// surface it came from.
type surfaceValidator struct {
	t   *testing.T
	env *itEnv
	on  http.RoundTripper
	acc http.RoundTripper
	mu  sync.Mutex
}

func (s *surfaceValidator) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if s.on == nil {
		s.on = s.env.online.Transport(s.t, http.DefaultTransport)
		s.acc = http.DefaultTransport
		if s.env.access != nil {
			s.acc = s.env.access.Transport(s.t, http.DefaultTransport)
		}
	}
	s.mu.Unlock()
	if strings.HasPrefix(s.env.info.AccessAPIBaseURL, r.URL.Scheme+"://"+r.URL.Host) {
		return s.acc.RoundTrip(r)
	}
	return s.on.RoundTrip(r)
}

// newClient returns an SDK client of the demo's merchant (and customer)
// over the recording, validating transport; mutate adjusts its Config.
func (e *itEnv) newClient(t *testing.T, mutate func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		OnlineAPIURL: e.info.OnlineAPIBaseURL,
		Online:       client.Credentials{SubscriptionKey: e.info.SubscriptionKey, AccessToken: e.info.AccessToken},
		AccessAPIURL: e.info.AccessAPIBaseURL,
		Access:       client.Credentials{SubscriptionKey: e.info.AccessSubscriptionKey, AccessToken: e.info.AccessAccessToken},
		HTTPClient:   &http.Client{Transport: e.rec},
		RetryDelay:   10 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

func mustOK[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// payFinal purchases and waits for the final status.
func payFinal(t *testing.T, c *client.Client, p client.PurchaseParams) *client.Transaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := c.Purchase(ctx, p)
	if err != nil {
		t.Fatalf("Purchase(%d on %s): %v", p.Amount, p.TerminalID, err)
	}
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)
	if err != nil {
		t.Fatalf("WaitForFinal(%s): %v", tx.OnlineAPIRefID, err)
	}
	return final
}

func TestIntegrationOnlineAPI(t *testing.T) {
	e := startDemo(t, nil)
	ctx := context.Background()
	c, t0, t1, t2 := e.c, e.terms[0], e.terms[1], e.terms[2]

	meta := mustOK[*client.Metadata](t, "Metadata")(c.Metadata(ctx))
	if diff := cmp.Diff(instore.DefaultMetadata(), *meta); diff != "" {
		t.Errorf("Metadata (-want +got):\n%s", diff)
	}
	doc := mustOK[[]byte](t, "OpenAPIDocument")(c.OpenAPIDocument(ctx))
	if string(doc) != string(api.OnlineYAML) {
		t.Errorf("OpenAPIDocument is not api/online-api.yaml")
	}

	terms := mustOK[[]*client.Terminal](t, "Terminals")(c.Terminals(ctx))
	var models []string
	for _, term := range terms {
		if !term.Linked || term.Model == nil {
			t.Fatalf("demo terminal %s not linked", term.TerminalID)
		}
		models = append(models, *term.Model)
	}
	if !cmp.Equal(models, instore.Models) {
		t.Errorf("terminal models = %v, want %v", models, instore.Models)
	}
	if term := mustOK[*client.Terminal](t, "Terminal")(c.Terminal(ctx, t0)); term.TerminalID != t0 || !term.Online {
		t.Errorf("Terminal(%s) = %+v", t0, term)
	}

	// A purchase, followed to its end with the long-poll.
	tx := mustOK[*client.Transaction](t, "Purchase")(c.Purchase(ctx, client.PurchaseParams{
		TerminalID: t0, Amount: 1250, Currency: "SEK", ECRReference: "order-1", VATAmount: client.Int64(250),
	}))
	if tx.Type != instore.TypePurchase || tx.AcknowledgedAt == nil || tx.ECRReference != "order-1" || tx.Amount != 1250 {
		t.Errorf("Purchase answered %s %s acknowledged %v reference %q, want an acknowledged purchase of order-1", tx.Type, tx.Status, tx.AcknowledgedAt, tx.ECRReference)
	}
	var versions []int64
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, func(t *client.Transaction) { versions = append(versions, t.Version) })
	if err != nil {
		t.Fatalf("WaitForFinal: %v", err)
	}
	if !final.Approved() || final.Progress != instore.ProgressFinal || final.Result == nil || len(final.Result.Receipt.Customer) == 0 {
		t.Errorf("final purchase = %+v, want APPROVED with a receipt", final)
	}
	if len(versions) == 0 || versions[len(versions)-1] != final.Version || !slices.IsSorted(versions) {
		t.Errorf("versions seen = %v, want increasing and ending at %d", versions, final.Version)
	}
	if got := mustOK[*client.Transaction](t, "Transaction")(c.Transaction(ctx, tx.OnlineAPIRefID, 0)); got.Version != final.Version {
		t.Errorf("Transaction = version %d, want %d", got.Version, final.Version)
	}

	// Its events, as pages: created first, final last.
	checkPurchaseEvents(t, tx.OnlineAPIRefID, eventsOf(t, c, client.EventQuery{TerminalID: t0, Limit: 2}, tx.OnlineAPIRefID))
	// A cursor beyond the newest event: the stream answers 400 at once
	// (not a stream that waits in silence), naming the newest.
	for _, err := range c.FollowEvents(ctx, client.EventQuery{After: "evt_9999999999999999"}) {
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != 400 || ce.Code() != instore.EValidation {
			t.Errorf("FollowEvents after evt_9999999999999999: %v, want a 400 validation error", err)
		}
		break
	}

	// Its receipt on the terminal's printer, and the job read back.
	job := mustOK[*client.PrintJob](t, "Print receipt")(c.Print(ctx, client.PrintParams{TerminalID: t0, OnlineAPIRefID: tx.OnlineAPIRefID, Copy: instore.CopyCustomer}))
	if job.Status != "SUCCESS" {
		t.Errorf("print receipt = %s, want SUCCESS", job.Status)
	}
	if got := mustOK[*client.PrintJob](t, "PrintJob")(c.PrintJob(ctx, job.PrintID)); got.PrintID != job.PrintID || got.Status != job.Status {
		t.Errorf("PrintJob = %+v, want %+v", got, job)
	}
	// The PIN pad has no printer.
	if job := mustOK[*client.PrintJob](t, "Print lines")(c.Print(ctx, client.PrintParams{TerminalID: t2, Lines: []string{"Hello"}})); job.Status != "ERROR" {
		t.Errorf("print on the PIN pad = %s, want ERROR", job.Status)
	}
	// The sandbox printer control.
	mustOK[*client.SandboxDevice](t, "SandboxNextPrint")(c.SandboxNextPrint(ctx, t0, instore.PrintOutOfPaper))
	if job := mustOK[*client.PrintJob](t, "Print lines")(c.Print(ctx, client.PrintParams{TerminalID: t0, Lines: []string{"Hello"}})); job.Status != "OUT_OF_PAPER" {
		t.Errorf("print after SandboxNextPrint(2) = %s, want OUT_OF_PAPER", job.Status)
	}

	// The sandbox install control (Access API updates): set and cleared.
	mustOK[*client.SandboxDevice](t, "SandboxNextInstall")(c.SandboxNextInstall(ctx, t0, true, ""))
	mustOK[*client.SandboxDevice](t, "SandboxNextInstall")(c.SandboxNextInstall(ctx, t0, false, ""))

	// Reversal of the latest purchase: the purchase becomes REVERSED.
	rev := mustOK[*client.Transaction](t, "Reversal")(c.Reversal(ctx, client.ReversalParams{OnlineAPIRefID: tx.OnlineAPIRefID}))
	if rev.Type != instore.TypeReversal || string(rev.Reverses) != tx.OnlineAPIRefID {
		t.Errorf("Reversal = %+v", rev)
	}
	if rf := mustOK[*client.Transaction](t, "WaitForFinal reversal")(c.WaitForFinal(ctx, rev.OnlineAPIRefID, nil)); !rf.Approved() {
		t.Errorf("reversal ended %s", rf.Status)
	}
	if orig := mustOK[*client.Transaction](t, "Transaction")(c.Transaction(ctx, tx.OnlineAPIRefID, 0)); orig.StatusID != instore.StatusReversed || string(orig.ReversedBy) != rev.OnlineAPIRefID {
		t.Errorf("original after reversal = %s reversedBy %q", orig.Status, orig.ReversedBy)
	}

	// A refund of part of an approved purchase, and one without original.
	sale := payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 2000, Currency: "SEK"})
	ref := mustOK[*client.Transaction](t, "Refund")(c.Refund(ctx, client.RefundParams{TerminalID: t0, Amount: 500, Currency: "SEK", OriginalOnlineAPIRefID: sale.OnlineAPIRefID}))
	if ref.Type != instore.TypeRefund {
		t.Errorf("Refund type = %s", ref.Type)
	}
	if rf := mustOK[*client.Transaction](t, "WaitForFinal refund")(c.WaitForFinal(ctx, ref.OnlineAPIRefID, nil)); !rf.Approved() {
		t.Errorf("refund ended %s", rf.Status)
	}
	free := mustOK[*client.Transaction](t, "Refund")(c.Refund(ctx, client.RefundParams{TerminalID: t0, Amount: 300, Currency: "SEK"}))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, free.OnlineAPIRefID, nil))

	// Declined by amount, and by the sandbox's next outcome.
	if got := payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1011, Currency: "SEK"}); got.StatusID != instore.StatusTransactionDeclined {
		t.Errorf("purchase of 10.11 = %s, want TRANSACTION_DECLINED", got.Status)
	}
	mustOK[*client.SandboxDevice](t, "SandboxNextOutcome")(c.SandboxNextOutcome(ctx, t0, instore.StatusWrongPIN))
	if got := payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1000, Currency: "SEK"}); got.StatusID != instore.StatusWrongPIN {
		t.Errorf("purchase after SandboxNextOutcome(12) = %s, want WRONG_PIN", got.Status)
	}

	// Cancel a purchase the terminal never answers (amount ...92).
	// CancelTransaction naming another transaction cancels nothing (WP18).
	slow := mustOK[*client.Transaction](t, "Purchase 92")(c.Purchase(ctx, client.PurchaseParams{TerminalID: t1, Amount: 1092, Currency: "SEK"}))
	if _, err := c.CancelTransaction(ctx, t1, free.OnlineAPIRefID); !client.IsCode(err, instore.WP18) {
		t.Errorf("CancelTransaction of an ended transaction = %v, want WP18", err)
	}
	cancelled := mustOK[*client.Transaction](t, "CancelTransaction")(c.CancelTransaction(ctx, t1, slow.OnlineAPIRefID))
	if cancelled.OnlineAPIRefID != slow.OnlineAPIRefID {
		t.Errorf("Cancel returned %s, want %s", cancelled.OnlineAPIRefID, slow.OnlineAPIRefID)
	}
	if got := mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, slow.OnlineAPIRefID, nil)); got.StatusID != instore.StatusAbortedByCashier || got.ErrorCode != instore.WP37 || got.ErrorID != 37 {
		t.Errorf("cancelled purchase = %s %s, want ABORTED_BY_CASHIER WP37", got.Status, got.ErrorCode)
	}
	// Its timeline says what happened, the cancel included.
	var kinds []instore.TimelineKind
	for _, e := range mustOK[[]client.TransactionEvent](t, "TransactionEvents")(c.TransactionEvents(ctx, slow.OnlineAPIRefID)) {
		if e.Kind != instore.EventProgress {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []instore.TimelineKind{instore.EventCreated, instore.EventAcknowledged, instore.EventCancelRequested, instore.EventResult}; !slices.Equal(kinds, want) {
		t.Errorf("TransactionEvents = %v, want %v", kinds, want)
	}
	if _, err := c.TransactionEvents(ctx, "txn_unknown"); !client.IsCode(err, instore.WP04) {
		t.Errorf("TransactionEvents(unknown) = %v, want WP04", err)
	}

	// Listing: pages of two on t0, and every transaction by iteration.
	var paged []string
	p := client.ListParams{TerminalID: t0, Limit: 2}
	for {
		page := mustOK[*client.TransactionPage](t, "Transactions")(c.Transactions(ctx, p))
		if len(page.Transactions) > 2 {
			t.Fatalf("page of %d, want at most 2", len(page.Transactions))
		}
		for _, tx := range page.Transactions {
			paged = append(paged, tx.OnlineAPIRefID)
		}
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	if len(paged) != 7 {
		t.Errorf("transactions on %s = %d, want 7 (purchase, reversal, sale, 2 refunds, 2 declined)", t0, len(paged))
	}
	var all []string
	for tx, err := range c.AllTransactions(ctx, client.ListParams{Limit: 3}) {
		if err != nil {
			t.Fatalf("AllTransactions: %v", err)
		}
		all = append(all, tx.OnlineAPIRefID)
	}
	if len(all) != 8 || !slices.IsSortedFunc(all, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("AllTransactions = %d refs %v, want 8, newest first", len(all), all)
	}
	declined := instore.StatusTransactionDeclined
	if page := mustOK[*client.TransactionPage](t, "Transactions by status")(c.Transactions(ctx, client.ListParams{StatusID: &declined})); len(page.Transactions) != 1 {
		t.Errorf("declined transactions = %d, want 1", len(page.Transactions))
	}

	// Unlink, then link again with the code the device shows.
	if term := mustOK[*client.Terminal](t, "UnlinkTerminal")(c.UnlinkTerminal(ctx, t1)); term.Linked {
		t.Errorf("after unlink: linked")
	}
	code := ""
	testwait.For(t, "the unlinked mobile device to show a link code", func() bool {
		for _, d := range mustOK[[]*client.SandboxDevice](t, "SandboxDevices")(c.SandboxDevices(ctx)) {
			if d.Model == instore.ModelMobile && d.LinkCode != "" {
				code = d.LinkCode
			}
		}
		return code != ""
	})
	if term := mustOK[*client.Terminal](t, "LinkTerminal")(c.LinkTerminal(ctx, t1, code)); !term.Linked {
		t.Errorf("after link: not linked")
	}

	// Offline and back.
	mustOK[*client.SandboxDevice](t, "SandboxOffline")(c.SandboxOffline(ctx, t2))
	waitOnline(t, c, t2, false)
	if _, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t2, Amount: 100, Currency: "SEK"}); !client.IsCode(err, instore.WP23) {
		t.Errorf("purchase on an offline terminal = %v, want WP23", err)
	}
	mustOK[*client.SandboxDevice](t, "SandboxOnline")(c.SandboxOnline(ctx, t2))
	waitOnline(t, c, t2, true)

	// The client-credentials client covers the token endpoint.
	cc := e.newClient(t, func(cfg *client.Config) {
		cfg.Online = client.Credentials{SubscriptionKey: e.info.SubscriptionKey, ClientID: e.info.ClientID, ClientSecret: e.info.ClientSecret}
	})
	mustOK[*client.Metadata](t, "Metadata with client credentials")(cc.Metadata(ctx))

	// Webhook endpoints, from registration to deletion, with a receiver
	// verifying every delivery.
	exerciseWebhooks(t, e)
	// ECR confirmation.
	exerciseConfirm(t, e)
	// Tips.
	exerciseTips(t, e)
	// Pre-authorisation: a hotel stay.
	exercisePreAuth(t, e)
	// Day close.
	exerciseBatches(t, e)

	// Every POST carried an Idempotency-Key, each logical call its own.
	e.rec.mu.Lock()
	keys := map[string]string{}
	for _, x := range e.rec.log {
		if x.method != http.MethodPost {
			continue
		}
		if x.key == "" {
			t.Errorf("POST %s was sent without Idempotency-Key", x.path)
		} else if prev, ok := keys[x.key]; ok {
			t.Errorf("the Idempotency-Key of POST %s was sent again with POST %s (no call here was retried)", prev, x.path)
		}
		keys[x.key] = x.path
	}
	e.rec.mu.Unlock()

	// Every operation is called.
	if missed := uncovered(e.online.Covered()); len(missed) > 0 {
		t.Errorf("operations of api/online-api.yaml the SDK suite never called: %v", missed)
	}
}

// waitOnline waits until the terminal's online state is want.
func waitOnline(t *testing.T, c *client.Client, terminalID string, want bool) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("terminal %s to become online=%v", terminalID, want), func() bool {
		term, err := c.Terminal(context.Background(), terminalID)
		if err != nil {
			t.Fatalf("Terminal: %v", err)
		}
		return term.Online == want
	})
}

func TestIntegrationErrors(t *testing.T) {
	e := startDemo(t, nil)
	ctx := context.Background()
	c, t0, t1, t2 := e.c, e.terms[0], e.terms[1], e.terms[2]
	badToken := e.newClient(t, func(cfg *client.Config) { cfg.Online.AccessToken = "not-a-token" })
	approved := payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1250, Currency: "SEK"})
	payFinal(t, c, client.PurchaseParams{TerminalID: t0, Amount: 1300, Currency: "SEK"})
	conflictKey := client.IdempotencyKey("it-conflict-1")
	mustOK[*client.Transaction](t, "Purchase with key")(c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 100, Currency: "SEK"}, conflictKey))
	mustOK[*client.Transaction](t, "WaitForFinal")(c.WaitForFinal(ctx, approved.OnlineAPIRefID, nil))

	var busyRef string
	cases := []struct {
		name       string
		call       func() error
		wantStatus int
		wantCode   string
		wantID     int    // errorId, 0 when no WP code applies
		wantField  string // first field error, if any
	}{
		{"unauthorized", func() error { _, err := badToken.Terminals(ctx); return err }, 401, instore.EUnauthorized, 0, ""},
		{"validation", func() error {
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Currency: "SEK"})
			return err
		}, 400, instore.EValidation, 0, "/amount"},
		{"WP16 terminal of another merchant", func() error { _, err := c.Terminal(ctx, "99999999"); return err }, 403, instore.WP16, 16, ""},
		{"WP04 unknown transaction", func() error { _, err := c.Transaction(ctx, "txn_unknown", 0); return err }, 404, instore.WP04, 4, ""},
		{"WP22 unknown payment method", func() error {
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 100, Currency: "SEK", PaymentMethodID: client.Int(9)})
			return err
		}, 400, instore.WP22, 22, ""},
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
		{"idempotency-conflict", func() error {
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 200, Currency: "SEK"}, conflictKey)
			return err
		}, 422, instore.EIdempotencyConflict, 0, ""},
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
		{"WP25 no acknowledgement", func() error {
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 1091, Currency: "SEK"})
			return err
		}, 504, instore.WP25, 25, ""},
		{"WP02 unlink of an unlinked terminal", func() error {
			mustOK[*client.Terminal](t, "UnlinkTerminal")(c.UnlinkTerminal(ctx, t2))
			_, err := c.UnlinkTerminal(ctx, t2)
			return err
		}, 409, instore.WP02, 2, ""},
		{"WP01 purchase on an unlinked terminal", func() error {
			_, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t2, Amount: 100, Currency: "SEK"})
			return err
		}, 409, instore.WP01, 1, ""},
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
	ctx := context.Background()
	t0 := e.terms[0]
	dropped := false
	e.rec.drop = func(r *http.Request, _ int) bool {
		if r.Method == http.MethodPost && r.URL.Path == client.Prefix+"/purchase" && !dropped {
			dropped = true
			return true
		}
		return false
	}
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
	ctx := context.Background()
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
	dropped := false
	e.rec.drop = func(r *http.Request, _ int) bool {
		if r.Method == http.MethodPost && r.URL.Path == client.Prefix+"/purchase" && !dropped {
			dropped = true
			return true
		}
		return false
	}
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
	ctx := context.Background()
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
	ctx := context.Background()
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

// TestIntegrationAccessAPI drives Access API 2.0 through the SDK with the
// demo's customer credentials.
func TestIntegrationAccessAPI(t *testing.T) {
	e := startDemo(t, nil)
	ctx := context.Background()
	c := e.c
	info, err := c.GetTerminalInfo(ctx, e.terms[0])
	if client.ErrorCode(err) == instore.ENotFound || client.ErrorCode(err) == instore.EMethodNotAllowed {
		t.Skipf("the Access API does not serve POST /getTerminalInfo yet: %v", err)
	}
	if err != nil {
		t.Fatalf("GetTerminalInfo: %v", err)
	}
	if info.TerminalID != e.terms[0] || info.CustomerID != e.info.CustomerID || info.MerchantID != e.info.MerchantID || !info.Linked || info.Model != instore.ModelCountertop {
		t.Errorf("GetTerminalInfo = %+v", info)
	}
	alloc := mustOK[*client.AllocatedTerminal](t, "GetTerminalID")(c.GetTerminalID(ctx, client.GetTerminalIDParams{CustomerID: e.info.CustomerID, MerchantID: e.info.MerchantID}))
	if len(alloc.TerminalID) != 8 || alloc.CustomerID != e.info.CustomerID || slices.Contains(e.terms, alloc.TerminalID) {
		t.Errorf("GetTerminalID = %+v, want a new 8-digit terminal ID", alloc)
	}
	// The new terminal ID is the merchant's on the Online API.
	if term := mustOK[*client.Terminal](t, "Terminal")(c.Terminal(ctx, alloc.TerminalID)); term.Linked {
		t.Errorf("a new terminal ID is linked")
	}
	pkgs := mustOK[[]*client.Package](t, "GetPackages")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelCountertop))
	if len(pkgs) == 0 {
		t.Fatalf("the demo catalogue has no countertop package")
	}
	for _, p := range pkgs {
		if p.Model != instore.ModelCountertop || p.PackageID == "" || p.Version == "" {
			t.Errorf("package %+v", p)
		}
	}
	if none := mustOK[[]*client.Package](t, "GetPackages unknown model")(c.GetPackages(ctx, e.info.CustomerID, "toaster")); len(none) != 0 {
		t.Errorf("packages of an unknown model = %d, want none", len(none))
	}
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	up := mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[0], PackageID: pkgs[0].PackageID, NotBefore: &later}))
	if up.UpdateID == "" || up.Status != "SCHEDULED" || up.TerminalID != e.terms[0] {
		t.Errorf("CreateUpdate = %+v, want SCHEDULED", up)
	}
	if info := mustOK[*client.TerminalInfo](t, "GetTerminalInfo")(c.GetTerminalInfo(ctx, e.terms[0])); info.PendingUpdate == nil || info.PendingUpdate.UpdateID != up.UpdateID {
		t.Errorf("pendingUpdate = %+v, want %s", info.PendingUpdate, up.UpdateID)
	}
	// Updates delivered at once: one installed, one failed on purpose.
	pkgs1 := mustOK[[]*client.Package](t, "GetPackages mobile")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelMobile))
	if len(pkgs1) == 0 {
		t.Fatalf("the demo catalogue has no mobile package")
	}
	mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[1], PackageID: pkgs1[0].PackageID}))
	if u := waitUpdate(t, c, e.terms[1]); u.Status != "INSTALLED" || u.SoftwareVersion != pkgs1[0].Version {
		t.Errorf("update of %s = %s %q, want INSTALLED %s", e.terms[1], u.Status, u.SoftwareVersion, pkgs1[0].Version)
	}
	pkgs2 := mustOK[[]*client.Package](t, "GetPackages pinpad")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelPINPad))
	if len(pkgs2) == 0 {
		t.Fatalf("the demo catalogue has no pinpad package")
	}
	mustOK[*client.SandboxDevice](t, "SandboxNextInstall")(c.SandboxNextInstall(ctx, e.terms[2], true, "checksum mismatch"))
	mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[2], PackageID: pkgs2[0].PackageID}))
	if u := waitUpdate(t, c, e.terms[2]); u.Status != "FAILED" || u.Reason != "checksum mismatch" {
		t.Errorf("update of %s = %s %q, want FAILED checksum mismatch", e.terms[2], u.Status, u.Reason)
	}

	// The token endpoint (client credentials) and the document.
	cc := e.newClient(t, func(cfg *client.Config) {
		cfg.Access = client.Credentials{SubscriptionKey: e.info.AccessSubscriptionKey, ClientID: e.d.Credentials.AccessClientID, ClientSecret: e.d.Credentials.AccessClientSecret}
	})
	doc := mustOK[[]byte](t, "AccessOpenAPIDocument")(cc.AccessOpenAPIDocument(ctx))
	if want, err := os.ReadFile("../api/access-api.yaml"); err != nil || string(doc) != string(want) {
		t.Errorf("AccessOpenAPIDocument is not api/access-api.yaml")
	}

	// Another customer's data is forbidden.
	if _, err := c.GetPackages(ctx, "cus_other", instore.ModelCountertop); !client.IsCode(err, instore.EForbidden) {
		t.Errorf("GetPackages of another customer = %v, want forbidden", err)
	}
	if e.access != nil {
		if missed := uncovered(e.access.Covered()); len(missed) > 0 {
			t.Errorf("operations of api/access-api.yaml the SDK suite never called: %v", missed)
		}
	}
}

// waitUpdate follows a terminal's latest update until it is final.
func waitUpdate(t *testing.T, c *client.Client, terminalID string) *client.Update {
	t.Helper()
	var u *client.Update
	testwait.For(t, "the update of "+terminalID+" to end", func() bool {
		info, err := c.GetTerminalInfo(context.Background(), terminalID)
		if err != nil {
			t.Fatalf("GetTerminalInfo: %v", err)
		}
		u = info.LastUpdate
		return u != nil && u.Final()
	})
	return u
}

// eventsOf pages through the events of q until the transaction ref has
// its transaction.final event (the sequencer numbers events just after
// their commit), and returns ref's events.
func eventsOf(t *testing.T, c *client.Client, q client.EventQuery, ref string) []client.Event {
	t.Helper()
	var out []client.Event
	testwait.For(t, "the transaction.final event of "+ref, func() bool {
		page, err := c.Events(context.Background(), q)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if len(page.Events) > q.Limit && q.Limit > 0 {
			t.Fatalf("Events with limit %d gave %d", q.Limit, len(page.Events))
		}
		for _, ev := range page.Events {
			if !strings.HasPrefix(string(ev.Type), "transaction.") {
				continue
			}
			tx, err := ev.Transaction()
			if err != nil {
				t.Fatalf("event %s: %v", ev.ID, err)
			}
			if tx.OnlineAPIRefID == ref {
				out = append(out, ev)
				if ev.Type == instore.EventTransactionFinal {
					return true
				}
			}
		}
		if page.NextCursor != "" {
			q.After = page.NextCursor
		}
		return false
	})
	return out
}

// checkPurchaseEvents checks the events of an approved purchase:
// transaction.created first, transaction.final (APPROVED) last, in
// increasing id order, each once, the data at increasing versions.
func checkPurchaseEvents(t *testing.T, ref string, evs []client.Event) {
	t.Helper()
	var types []instore.EventType
	var version int64
	for i, ev := range evs {
		types = append(types, ev.Type)
		if i > 0 && ev.ID <= evs[i-1].ID {
			t.Errorf("event %s after %s: ids do not increase", ev.ID, evs[i-1].ID)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.CreatedAt); err != nil {
			t.Errorf("event %s createdAt %q: %v", ev.ID, ev.CreatedAt, err)
		}
		tx, err := ev.Transaction()
		if err != nil {
			t.Fatalf("event %s: %v", ev.ID, err)
		}
		if tx.Version <= version {
			t.Errorf("event %s (%s) shows version %d after %d", ev.ID, ev.Type, tx.Version, version)
		}
		version = tx.Version
		if ev.Type == instore.EventTransactionFinal && !tx.Approved() {
			t.Errorf("transaction.final of %s shows %s, want APPROVED", ref, tx.Status)
		}
	}
	if len(types) < 3 || types[0] != instore.EventTransactionCreated || types[len(types)-1] != instore.EventTransactionFinal ||
		!slices.Contains(types, instore.EventTransactionAcknowledged) {
		t.Errorf("events of %s = %v, want transaction.created, transaction.acknowledged ... transaction.final", ref, types)
	}
}

// cutStream cuts the first event stream it carries in the middle of its
// third message, as a broken connection does.
type cutStream struct {
	mu    sync.Mutex
	cut   bool
	reqs  []*http.Request
	inner http.RoundTripper
}

func (c *cutStream) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.inner.RoundTrip(r)
	if err != nil || r.Header.Get("Accept") != "text/event-stream" {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
	if !c.cut {
		c.cut = true
		resp.Body = &cutBody{rc: resp.Body}
	}
	return resp, nil
}

type cutBody struct {
	rc   io.ReadCloser
	seen []byte
	sent int
	done bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	for {
		if b.done {
			if b.sent == len(b.seen) {
				return 0, errors.New("connection reset by peer")
			}
			n := copy(p, b.seen[b.sent:])
			b.sent += n
			return n, nil
		}
		if b.sent < len(b.seen) {
			n := copy(p, b.seen[b.sent:])
			b.sent += n
			return n, nil
		}
		buf := make([]byte, 4096)
		n, err := b.rc.Read(buf)
		b.seen = append(b.seen, buf[:n]...)
		// The third message is cut after its id line and half its data.
		if i := nthIndex(string(b.seen), "id: evt_", 3); i >= 0 {
			if j := strings.Index(string(b.seen[i:]), "data: "); j >= 0 {
				b.seen, b.done = b.seen[:i+j+20], true
				continue
			}
		}
		if err != nil {
			return 0, err
		}
	}
}

func (b *cutBody) Close() error { return b.rc.Close() }

func nthIndex(s, sub string, n int) int {
	at := -1
	for range n {
		i := strings.Index(s[at+1:], sub)
		if i < 0 {
			return -1
		}
		at += 1 + i
	}
	return at
}

// TestIntegrationFollowEvents follows a purchase's events on the stream of
// the real service, through a stream broken in the middle of a message:
// the client resumes with Last-Event-ID and yields every event once.
func TestIntegrationFollowEvents(t *testing.T) {
	e := startDemo(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := e.terms[0]
	// The stream is no JSON answer the validating transport could read
	// whole: this client goes over the wire as it is.
	cut := &cutStream{inner: http.DefaultTransport}
	c := e.newClient(t, func(cfg *client.Config) { cfg.HTTPClient = &http.Client{Transport: cut} })

	// Where the events are now: the stream starts after it.
	var cursor string
	for {
		page := mustOK[*client.EventPage](t, "Events")(e.c.Events(ctx, client.EventQuery{After: cursor}))
		if len(page.Events) == 0 {
			break
		}
		cursor = page.NextCursor
	}
	type got struct {
		ev  client.Event
		err error
	}
	evs := make(chan got)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer close(evs)
		for ev, err := range c.FollowEvents(fctx, client.EventQuery{Types: []instore.EventType{
			instore.EventTransactionCreated, instore.EventTransactionAcknowledged, instore.EventTransactionProgress, instore.EventTransactionFinal,
		}, TerminalID: t0, After: cursor}) {
			select {
			case evs <- got{ev, err}:
			case <-fctx.Done():
				return
			}
		}
	}()
	tx := payFinal(t, e.c, client.PurchaseParams{TerminalID: t0, Amount: 1250, Currency: "SEK"})
	var mine []client.Event
	seen := map[string]bool{}
	for g := range evs {
		if g.err != nil {
			t.Fatalf("FollowEvents: %v", g.err)
		}
		if seen[g.ev.ID] {
			t.Errorf("event %s yielded twice", g.ev.ID)
		}
		seen[g.ev.ID] = true
		if tx2, err := g.ev.Transaction(); err != nil || tx2.OnlineAPIRefID != tx.OnlineAPIRefID {
			t.Fatalf("event %s (%s): %v, not of %s", g.ev.ID, g.ev.Type, err, tx.OnlineAPIRefID)
		}
		mine = append(mine, g.ev)
		if g.ev.Type == instore.EventTransactionFinal {
			break
		}
	}
	stop()
	checkPurchaseEvents(t, tx.OnlineAPIRefID, mine)
	// The same events as the pages show.
	paged := eventsOf(t, e.c, client.EventQuery{TerminalID: t0, After: cursor}, tx.OnlineAPIRefID)
	if len(paged) != len(mine) {
		t.Errorf("followed %d events, the pages show %d", len(mine), len(paged))
	}
	for i := range min(len(paged), len(mine)) {
		if paged[i].ID != mine[i].ID || string(paged[i].Data) != string(mine[i].Data) {
			t.Errorf("event %d: followed %s %s, paged %s %s", i, mine[i].ID, mine[i].Type, paged[i].ID, paged[i].Type)
		}
	}
	cut.mu.Lock()
	defer cut.mu.Unlock()
	if len(cut.reqs) < 2 || len(mine) < 3 {
		t.Fatalf("stream connections = %d, events %d; want the cut stream resumed", len(cut.reqs), len(mine))
	}
	if got := cut.reqs[1].Header.Get("Last-Event-ID"); got != mine[1].ID {
		t.Errorf("resumed with Last-Event-ID %q, want %q (the last whole message before the cut)", got, mine[1].ID)
	}
}

// uncovered lists, sorted, the operations a validator's Covered map says
// no request reached.
func uncovered(covered map[string]bool) []string {
	var missed []string
	for op, ok := range covered {
		if !ok {
			missed = append(missed, op)
		}
	}
	sort.Strings(missed)
	return missed
}

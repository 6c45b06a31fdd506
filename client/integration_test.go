package client_test

// The integration suite: the whole service (internal/demo: store, Online
// API, Access API, terminal gateway, virtual terminals) started in-process
// on port 0 and driven only through the SDK. Every response is validated
// against the OpenAPI documents.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/client"
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

// dropFirst loses the answer to the next request of method to path, once.
func (rec *recorder) dropFirst(method, path string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	dropped := false
	rec.drop = func(r *http.Request, _ int) bool {
		first := !dropped && r.Method == method && r.URL.Path == path
		dropped = dropped || first
		return first
	}
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
	d := testserver.Demo(t, cfg)
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

// onFirstTerminal is the start of an exercise on the demo's first
// terminal: a context of a minute (cancelled when t ends), the client and
// the terminal.
func (e *itEnv) onFirstTerminal(t *testing.T) (context.Context, *client.Client, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, e.c, e.terms[0]
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
	// The end of the day: totals, reconciliation, CSV.
	exerciseBooks(t, e)
	// Offline approvals: store and forward.
	exerciseOffline(t, e)
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

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
)

// eventLine is the part of an event JSON line the tests read.
type eventLine struct {
	ID   string            `json:"id"`
	Type instore.EventType `json:"type"`
	Data struct {
		OnlineAPIRefID string `json:"onlineAPIRefId"`
		Status         string `json:"status"`
	} `json:"data"`
}

func eventLines(t *testing.T, out string) []eventLine {
	t.Helper()
	var evs []eventLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var ev eventLine
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// typesOf returns the types of the events of transaction ref.
func typesOf(evs []eventLine, ref string) []instore.EventType {
	var types []instore.EventType
	for _, ev := range evs {
		if ev.Data.OnlineAPIRefID == ref {
			types = append(types, ev.Type)
		}
	}
	return types
}

func checkPurchaseTypes(t *testing.T, what, ref string, types []instore.EventType) {
	t.Helper()
	if len(types) < 3 || types[0] != instore.EventTransactionCreated || types[1] != instore.EventTransactionAcknowledged ||
		types[len(types)-1] != instore.EventTransactionFinal {
		t.Errorf("%s: events of %s = %v, want transaction.created, transaction.acknowledged ... transaction.final", what, ref, types)
	}
}

// background runs `instore args...` until the test cancels it: its stdout
// comes line by line on lines, stderr in the buffer; stop cancels it and
// returns its exit code.
type background struct {
	lines  chan string
	stderr *testlog.Buffer
	stop   func() int
}

func runBackground(t *testing.T, args ...string) *background {
	t.Helper()
	p := startRun(t.Context(), args...)
	b := &background{lines: make(chan string, 1000), stderr: p.stderr, stop: func() int { return p.stop(t) }}
	go func() {
		defer close(b.lines)
		sc := bufio.NewScanner(p.out)
		for sc.Scan() {
			select {
			case b.lines <- sc.Text():
			default: // the test stopped reading
			}
		}
		io.Copy(io.Discard, p.out)
	}()
	t.Cleanup(func() { b.stop() })
	return b
}

// waitStderr waits until stderr matches re and returns the match.
func (b *background) waitStderr(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testwait.ForNil(t, "stderr to match "+re.String(), func() error {
		if m = re.FindStringSubmatch(b.stderr.String()); m == nil {
			return fmt.Errorf("stderr:\n%s", b.stderr.String())
		}
		return nil
	})
	return m
}

// waitLine returns the lines printed until one contains every want.
func (b *background) waitLine(t *testing.T, want ...string) []string {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	var got []string
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				t.Fatalf("the output ended without a line holding %q:\n%s\nstderr:\n%s", want, strings.Join(got, "\n"), b.stderr.String())
			}
			got = append(got, l)
			all := true
			for _, w := range want {
				all = all && strings.Contains(l, w)
			}
			if all {
				return got
			}
		case <-deadline.C:
			t.Fatalf("no line holding %q within 20 s:\n%s\nstderr:\n%s", want, strings.Join(got, "\n"), b.stderr.String())
		}
	}
}

func ecrClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.FromEnv()
	must(t, err)
	return c
}

func TestEcrEvents(t *testing.T) {
	info := ecrOnDemo(t, "--sim-delay", "0")
	t0 := info.Terminals[0].TerminalID
	ecr := ecrRunner(t)
	// Where the events are now (the demo's terminals were linked).
	before := eventLines(t, ecr(0, "events", "--json"))
	if len(before) == 0 {
		t.Fatal("events --json: none, want the demo's terminal events")
	}
	cursor := before[len(before)-1].ID

	sale := lastTx(t, ecr(0, "purchase", "12.50", "--wait", "--json"))
	// The events of a change are numbered just after its commit: wait for
	// the final one.
	var evs []eventLine
	testwait.Until(testwait.Timeout, func() bool { // on time-out, the check below says what is missing
		evs = eventLines(t, ecr(0, "events", "--json", "--after", cursor, "--terminal", t0, "--limit", "2"))
		types := typesOf(evs, sale.OnlineAPIRefID)
		return len(types) > 0 && types[len(types)-1] == instore.EventTransactionFinal
	})
	checkPurchaseTypes(t, "events --json", sale.OnlineAPIRefID, typesOf(evs, sale.OnlineAPIRefID))
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Errorf("events --json: %s after %s", evs[i].ID, evs[i-1].ID)
		}
	}
	out := ecr(0, "events", "--after", cursor, "--types", "transaction.created,transaction.final")
	if !regexp.MustCompile(`(?m)^evt_\d{16}  \S+  transaction\.final\s+`+sale.OnlineAPIRefID+`  PURCHASE 12\.50 SEK on terminal `+t0+`  APPROVED$`).MatchString(out) ||
		strings.Contains(out, "transaction.acknowledged") || !strings.Contains(out, "next: --after evt_") {
		t.Errorf("events --types created,final:\n%s", out)
	}
	if out := ecr(0, "events", "--after", evs[len(evs)-1].ID); !strings.Contains(out, "no events\nnext: --after "+evs[len(evs)-1].ID) {
		t.Errorf("events after the last = %q, want none and the same cursor", out)
	}
	ecr(2, "events", "--types", "transaction.nope")
	ecr(2, "events", "--after", "yesterday")

	// --follow without --after starts live: once its stream is open (-v
	// logs the request), a new purchase's events come as they happen.
	f := runBackground(t, "ecr", "events", "--follow", "--json", "-v", "--terminal", t0)
	f.waitStderr(t, regexp.MustCompile(`path=/in-store/api/v1/events/stream status=200`))
	c := ecrClient(t)
	tx, err := c.Purchase(t.Context(), client.PurchaseParams{TerminalID: t0, Amount: 700, Currency: "SEK"})
	must(t, err)
	lines := f.waitLine(t, `"type":"transaction.final"`, tx.OnlineAPIRefID)
	followed := eventLines(t, strings.Join(lines, "\n"))
	checkPurchaseTypes(t, "events --follow", tx.OnlineAPIRefID, typesOf(followed, tx.OnlineAPIRefID))
	if got := typesOf(followed, sale.OnlineAPIRefID); len(got) > 0 {
		t.Errorf("events --follow without --after replayed the earlier sale: %v", got)
	}
	if code := f.stop(); code != 0 {
		t.Errorf("events --follow interrupted = exit %d, want 0; stderr:\n%s", code, f.stderr.String())
	}
	for _, s := range []string{info.AccessToken, info.SubscriptionKey} {
		if strings.Contains(f.stderr.String(), s) {
			t.Errorf("events -v logs a credential")
		}
	}
}

func TestEcrWebhookListen(t *testing.T) {
	info := ecrOnDemo(t, "--sim-delay", "0")
	t0 := info.Terminals[0].TerminalID
	c := ecrClient(t)
	ctx := t.Context()

	ecr := ecrRunner(t)
	ecr(2, "webhook", "listen")                                     // neither --register nor --secret
	ecr(2, "webhook", "listen", "--register", "--secret", "whsec_") // both
	ecr(2, "webhook", "listen", "--register", "--types", "nope")

	l := runBackground(t, "ecr", "webhook", "listen", "--register", "--types", "transaction.created,transaction.final")
	url := l.waitStderr(t, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+/)`))[1]
	reg := l.waitStderr(t, regexp.MustCompile(`registered endpoint (wh_\w+) for (\S+); its secret: (whsec_\S+)\n`))
	id, secret := reg[1], reg[3]
	if reg[2] != url {
		t.Errorf("registered %s, want the receiver's %s", reg[2], url)
	}
	ws, err := c.Webhooks(ctx)
	must(t, err)
	if len(ws) != 1 || ws[0].WebhookID != id || ws[0].URL != url || instore.JoinEventTypes(ws[0].EventTypes, ",") != "transaction.created,transaction.final" {
		t.Fatalf("endpoints while listening = %v, want %s for %s", ws, id, url)
	}

	// A forged delivery is refused with 400 and a warning.
	body := `{"id":"evt_0000000000000001","type":"transaction.final","createdAt":"2026-01-01T00:00:00.000000Z","data":{}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(client.HeaderWebhookID, "evt_0000000000000001")
	req.Header.Set(client.HeaderWebhookTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set(client.HeaderWebhookSignature, "v1,bm90IGEgc2lnbmF0dXJl")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged delivery = %d, want 400", resp.StatusCode)
	}
	l.waitStderr(t, regexp.MustCompile(`warning: refused a delivery \(webhook-id "evt_0000000000000001"\).*does not verify`))

	// A purchase's events arrive, verified, one line each.
	tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: t0, Amount: 1250, Currency: "SEK"})
	must(t, err)
	lines := l.waitLine(t, "transaction.final", tx.OnlineAPIRefID, "APPROVED")
	var types []string
	for _, line := range lines {
		if strings.Contains(line, tx.OnlineAPIRefID) {
			types = append(types, strings.Fields(line)[2])
		}
	}
	if strings.Join(types, " ") != "transaction.created transaction.final" {
		t.Errorf("received events of %s = %v, want created and final:\n%s", tx.OnlineAPIRefID, types, strings.Join(lines, "\n"))
	}

	// The thin wrappers see the endpoint and its deliveries.
	if out := ecr(0, "webhook", "list"); !strings.Contains(out, id) || !strings.Contains(out, "transaction.created,transaction.final") || strings.Contains(out, secret) {
		t.Errorf("webhook list = %q, want %s without its secret", out, id)
	}
	var page struct {
		Deliveries []struct {
			DeliveryID string                `json:"deliveryId"`
			EventType  instore.EventType     `json:"eventType"`
			Status     instore.DeliveryState `json:"status"`
		} `json:"deliveries"`
		NextCursor *string `json:"nextCursor"`
	}
	// The receiver printed the events; the dispatcher records the
	// attempts once its round ends, a moment later.
	testwait.ForNil(t, "both deliveries recorded as succeeded", func() error {
		page.Deliveries = nil
		must(t, json.Unmarshal([]byte(ecr(0, "webhook", "deliveries", id, "--json", "--all", "--limit", "1")), &page))
		if len(page.Deliveries) != 2 || page.Deliveries[0].EventType != instore.EventTransactionFinal ||
			page.Deliveries[0].Status != instore.DeliverySucceeded || page.Deliveries[1].Status != instore.DeliverySucceeded {
			return fmt.Errorf("webhook deliveries --json --all = %+v, want final and created, delivered", page)
		}
		return nil
	})
	if out := ecr(0, "webhook", "deliveries", id); !strings.Contains(out, "succeeded") || !strings.Contains(out, page.Deliveries[1].DeliveryID) {
		t.Errorf("webhook deliveries = %q", out)
	}
	// Sent again: the receiver answers it but does not print it twice.
	if out := ecr(0, "webhook", "retry", id, page.Deliveries[1].DeliveryID); !strings.Contains(out, "pending") {
		t.Errorf("webhook retry = %q, want the delivery pending", out)
	}
	ecr(exitFailed, "webhook", "retry", id, "dlv_999999") // not-found

	// Interrupted: it deletes its endpoint.
	if code := l.stop(); code != 0 {
		t.Errorf("webhook listen interrupted = exit %d; stderr:\n%s", code, l.stderr.String())
	}
	if !strings.Contains(l.stderr.String(), "endpoint "+id+" deleted") {
		t.Errorf("stderr = %q, want the endpoint deleted", l.stderr.String())
	}
	if ws, err := c.Webhooks(ctx); err != nil || len(ws) != 0 {
		t.Errorf("endpoints after listen = %v, %v; want none", ws, err)
	}
	for line := range l.lines {
		if strings.Contains(line, tx.OnlineAPIRefID) && strings.Contains(line, "transaction.created") {
			t.Errorf("a delivery sent again was printed twice: %s", line)
		}
	}

	// create, rotate, delete.
	var wh struct {
		WebhookID string `json:"webhookId"`
		Secret    string `json:"secret"`
		Status    string `json:"status"`
	}
	must(t, json.Unmarshal([]byte(ecr(0, "webhook", "create", "http://127.0.0.1:1/hook", "--types", "transaction.final", "--json")), &wh))
	if !strings.HasPrefix(wh.Secret, "whsec_") || wh.Status != "enabled" {
		t.Errorf("webhook create --json = %+v", wh)
	}
	if out := ecr(0, "webhook", "rotate", wh.WebhookID); !strings.Contains(out, "secret: whsec_") || strings.Contains(out, wh.Secret) {
		t.Errorf("webhook rotate = %q, want a new secret", out)
	}
	ecr(exitFailed, "webhook", "create", "ftp://example.com/hook") // validation
	if out := ecr(0, "webhook", "delete", wh.WebhookID); out != "deleted "+wh.WebhookID+"\n" {
		t.Errorf("webhook delete = %q", out)
	}
	ecr(exitFailed, "webhook", "delete", wh.WebhookID) // not-found
	if out := ecr(0, "webhook", "list"); !strings.Contains(out, "no webhook endpoints") {
		t.Errorf("webhook list at the end = %q", out)
	}
}

package sandbox_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testwait"
)

// streamControl runs in the console before its own scripts: it lets the
// test cut the page's Online API event stream (as a network break would)
// and hold its reconnection, and it records the Last-Event-ID of each
// stream request. Other requests pass untouched.
const streamControl = `(() => {
  const orig = window.fetch.bind(window);
  window.streamRequests = [];
  window.holdStream = null;
  window.cutStream = () => {};
  window.fetch = async (input, init = {}) => {
    const url = typeof input === "string" ? input : input.url;
    const h = init.headers || {};
    if (!url.startsWith("/in-store/api/v1/events") || !String(h.Accept || "").includes("text/event-stream")) return orig(input, init);
    if (window.holdStream) await window.holdStream;
    const ctl = new AbortController();
    window.streamRequests.push(h["Last-Event-ID"] || "");
    window.cutStream = () => ctl.abort();
    const signals = init.signal ? [ctl.signal, init.signal] : [ctl.signal];
    return orig(input, { ...init, signal: AbortSignal.any(signals) });
  };
})();`

// onlineAPI calls the Online API with the demo's credentials and checks
// every answer against the OpenAPI document.
type onlineAPI struct {
	t *testing.T
	c apitest.Caller
}

// do calls path (from the base URL) and decodes the answer into out.
func (a *onlineAPI) do(method, path string, body any, want int, out any) {
	a.t.Helper()
	code, b := a.c.Call(a.t, method, path, body)
	if code != want {
		a.t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// fromLastMonth adds to path (with a query) the from of the console's
// lists: 29 days ago, as the page asks at load.
func fromLastMonth(path string) string {
	since := time.Now().Add(-29 * 24 * time.Hour).UTC().Format(time.RFC3339)
	return path + "&from=" + url.QueryEscape(since)
}

// startAPI starts the demo, waits until its virtual terminals are online
// and returns it with a caller of its Online API.
func startAPI(t *testing.T) (*demo.Demo, *onlineAPI) {
	t.Helper()
	d := startDemo(t)
	waitOnline(t, d)
	c := onlineCaller(d.Info())
	c.Client = apitest.NewValidator(t, api.OnlineYAML).Client(t)
	c.Header = map[string]string{"Accept": "application/json"}
	return d, &onlineAPI{t: t, c: c}
}

type apiEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		OnlineAPIRefID string `json:"onlineAPIRefId"`
		StatusID       int    `json:"statusId"`
	} `json:"data"`
}

// eventsAfter reads every event after the cursor (JSON pages).
func (a *onlineAPI) eventsAfter(after string) []apiEvent {
	a.t.Helper()
	var all []apiEvent
	for {
		var page struct {
			Events     []apiEvent `json:"events"`
			NextCursor *string    `json:"nextCursor"`
		}
		a.do("GET", "/in-store/api/v1/events?limit=500&after="+after, nil, 200, &page)
		all = append(all, page.Events...)
		if len(page.Events) < 500 {
			return all
		}
		after = *page.NextCursor
	}
}

// awaitFinal waits (bounded) until the transaction's transaction.final
// event is among the events after the cursor, and returns those events.
func (a *onlineAPI) awaitFinal(after, ref string) []apiEvent {
	a.t.Helper()
	var evs []apiEvent
	testwait.For(a.t, "a transaction.final event for "+ref, func() bool {
		evs = a.eventsAfter(after)
		return slices.ContainsFunc(evs, func(e apiEvent) bool { return e.Type == "transaction.final" && e.Data.OnlineAPIRefID == ref })
	})
	return evs
}

// TestConsoleFollowsTheAPI: the console's live view is the Online API's
// event stream. A print job made before the page opened and one after
// show. A purchase made through the API appears in the list and in
// the event feed; while the stream is cut (and its reconnection held) a
// second purchase does not appear; once it reconnects, with the
// Last-Event-ID of the last event it had, the purchase appears, every
// event of it once. A terminal taken offline shows so in the terminal IDs
// (terminal.offline). A webhook registered through the API, pointing at a
// real local receiver that fails at first, shows its delivery with both
// attempts (500 with the receiver's answer, then 200 after Retry now).
func TestConsoleFollowsTheAPI(t *testing.T) {
	d, a := startAPI(t)
	info := d.Info()

	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var received []string // webhook-id of each request
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		received = append(received, r.Header.Get("webhook-id"))
		mu.Unlock()
		if failing.Load() {
			http.Error(w, "receiver not ready yet", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "thanks")
	}))
	defer receiver.Close()
	var hook struct {
		WebhookID string `json:"webhookId"`
	}
	a.do("POST", "/in-store/api/v1/webhooks", map[string]any{"url": receiver.URL + "/hooks", "eventTypes": []string{"transaction.final"}, "description": "console test"}, 201, &hook)

	mobile := info.Terminals[1] // approves without a person
	// A print job before the page opens (read from the print.final events
	// still kept), one after (from the stream).
	var before, after struct {
		PrintID string `json:"printId"`
	}
	a.do("POST", "/in-store/api/v1/print", map[string]any{"terminalId": mobile.TerminalID, "lines": []string{"before"}}, 200, &before)

	p := openConsole(t, info, 1366, streamControl)
	printed := func(id string) string {
		return fmt.Sprintf(`(document.querySelector('#prints tr[data-print-id="%s"] .status') || {}).textContent === "SUCCESS (0)"`, id)
	}
	p.poll("the print job made before the page opened shows", printed(before.PrintID))
	a.do("POST", "/in-store/api/v1/print", map[string]any{"terminalId": mobile.TerminalID, "lines": []string{"after"}}, 200, &after)
	p.poll("the print job made after shows", printed(after.PrintID))
	feedIDs := func() []string {
		return eval[[]string](p, `[...document.querySelectorAll("#feed li")].map((li) => li.dataset.eventId)`)
	}
	row := func(ref string) string { return fmt.Sprintf(`tr[data-ref="%s"]`, ref) }

	// A purchase through the API: in the list and the feed, from the stream.
	first := purchase(t, info, mobile.TerminalID, 1500)
	p.poll("the purchase shows APPROVED", fmt.Sprintf(`(document.querySelector('%s .status') || {}).textContent === "APPROVED (0)"`, row(first)))
	p.poll("the feed shows its final event", fmt.Sprintf(`[...document.querySelectorAll("#feed li")].some((li) => li.querySelector(".type").textContent === "transaction.final" && li.querySelector(".ref").textContent === %q)`, first))
	if n := eval[int](p, `window.streamRequests.length`); n != 1 {
		t.Fatalf("the page opened the event stream %d times, want 1", n)
	}
	last := feedIDs()[0]

	// Cut the stream and hold the reconnection: a purchase meanwhile is
	// not shown.
	eval[bool](p, `(() => { window.holdStream = new Promise((r) => { window.releaseStream = r; }); window.cutStream(); return true; })()`)
	p.poll("the page sees the break", `document.querySelector("#conn").textContent === "Reconnecting…"`)
	second := purchase(t, info, mobile.TerminalID, 1600)
	missed := a.awaitFinal(last, second)
	if eval[bool](p, fmt.Sprintf(`!!document.querySelector('%s')`, row(second))) {
		t.Fatalf("the purchase made while the API stream was cut shows: the page has another source")
	}
	eval[bool](p, `(() => { window.holdStream = null; window.releaseStream(); return true; })()`)
	p.poll("the missed purchase shows APPROVED", fmt.Sprintf(`(document.querySelector('%s .status') || {}).textContent === "APPROVED (0)"`, row(second)))
	p.poll("the page is live again", `document.querySelector("#conn").textContent === "Live"`)
	if reqs := eval[[]string](p, `window.streamRequests`); !slices.Equal(reqs, []string{"", last}) {
		t.Errorf("Last-Event-ID of the stream requests = %q, want none, then %q", reqs, last)
	}
	// The feed (newest first) is every event once: up to the cut, then
	// exactly those the API lists after it, in order.
	var want []string
	for _, e := range missed {
		want = append(want, e.ID)
	}
	p.poll("the feed has the missed events", fmt.Sprintf(`document.querySelector('#feed li[data-event-id="%s"]') !== null`, want[len(want)-1]))
	feed := feedIDs()
	slices.Reverse(feed)
	at := slices.Index(feed, last)
	if at < 0 || !slices.Equal(feed[at+1:], want) {
		t.Errorf("feed after %s = %q, want %q", last, feed[max(at+1, 0):], want)
	}
	seen := map[string]bool{}
	for _, id := range feed {
		if seen[id] {
			t.Errorf("event %s shown twice", id)
		}
		seen[id] = true
	}
	if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('%s').length`, row(second))); n != 1 {
		t.Errorf("the missed purchase has %d rows", n)
	}

	// Terminal IDs follow terminal.offline and terminal.online.
	pinpad := info.Terminals[2]
	state := fmt.Sprintf(`(document.querySelector('#terminals tr[data-terminal-id="%s"] td.state') || {}).textContent`, pinpad.TerminalID)
	p.poll("the PIN pad's terminal ID is online", state+` === "online"`)
	a.do("POST", "/sandbox/v1/terminals/"+pinpad.TerminalID+"/offline", nil, 200, nil)
	p.poll("the PIN pad's terminal ID shows offline", state+` === "offline"`)
	a.do("POST", "/sandbox/v1/terminals/"+pinpad.TerminalID+"/online", nil, 200, nil)
	p.poll("the PIN pad's terminal ID shows online again", state+` === "online"`)

	// The webhook: the first purchase's transaction.final delivery failed
	// (the receiver answers 500); the panel shows the attempt with the
	// receiver's answer. The receiver recovers; Retry now sends it again.
	var finalID string
	for _, e := range a.eventsAfter("") {
		if e.Type == "transaction.final" && e.Data.OnlineAPIRefID == first {
			finalID = e.ID
		}
	}
	delivery := fmt.Sprintf(`.webhook[data-webhook-id="%s"] tr.delivery[data-event-id="%s"]`, hook.WebhookID, finalID)
	p.poll("the panel shows the failed attempt", fmt.Sprintf(`(() => {
  const li = document.querySelector('%s li.attempt[data-attempt="1"]');
  return li?.querySelector(".code")?.textContent === "500" && !!li.querySelector(".excerpt")?.textContent.includes("receiver not ready yet");
})()`, delivery))
	failing.Store(false)
	eval[bool](p, fmt.Sprintf(`(() => { const b = document.querySelector('%s button.retry'); if (b) b.click(); return true; })()`, delivery))
	p.poll("the panel shows the delivery succeeded", fmt.Sprintf(`(() => {
  const tr = document.querySelector('%s');
  const codes = tr ? [...tr.querySelectorAll("li.attempt .code")].map((e) => e.textContent) : [];
  return !!tr?.querySelector(".dstatus")?.textContent.startsWith("succeeded") && codes[0] === "500" && codes[codes.length - 1] === "200" &&
    tr.querySelector("li.attempt:last-child .excerpt")?.textContent === "thanks" && /^\d+ ms$/.test(tr.querySelector("li.attempt:last-child .dur")?.textContent);
})()`, delivery))
	// The panel shows what the API lists.
	var deliveries struct {
		Deliveries []struct {
			EventID  string `json:"eventId"`
			Status   string `json:"status"`
			Attempts []struct {
				StatusCode int `json:"statusCode"`
			} `json:"attempts"`
		} `json:"deliveries"`
	}
	a.do("GET", "/in-store/api/v1/webhooks/"+hook.WebhookID+"/deliveries", nil, 200, &deliveries)
	for _, dl := range deliveries.Deliveries {
		if dl.EventID != finalID {
			continue
		}
		if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('%s li.attempt').length`, delivery)); n != len(dl.Attempts) || dl.Status != "succeeded" {
			t.Errorf("the panel shows %d attempts, the API %d (%s)", n, len(dl.Attempts), dl.Status)
		}
	}
	mu.Lock()
	if !slices.Contains(received, finalID) {
		t.Errorf("the receiver never got %s: %q", finalID, received)
	}
	mu.Unlock()
	if got := eval[string](p, fmt.Sprintf(`document.querySelector('.webhook[data-webhook-id="%s"] .url').textContent`, hook.WebhookID)); !strings.HasSuffix(got, "/hooks") {
		t.Errorf("the panel shows the endpoint's URL as %q", got)
	}
	p.noErrors()
}

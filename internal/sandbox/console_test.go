package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// browser finds the system Chromium, or skips.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found (apt-get install chromium); .ci/run installs it")
	return ""
}

func startDemo(t *testing.T) *demo.Demo {
	t.Helper()
	cfg := testserver.Config(t.TempDir())
	cfg.SimDelay, cfg.InteractiveFirst = 0, true
	cfg.AckTimeout, cfg.TransactionDeadline = 5*time.Second, 60*time.Second
	return testserver.Demo(t, cfg)
}

// waitOnline waits (bounded) until the gateway has every virtual terminal
// of the demo online.
func waitOnline(t *testing.T, d *demo.Demo) {
	t.Helper()
	for _, term := range d.Info().Terminals {
		testwait.For(t, "the virtual terminals to come online", func() bool { return d.Server.Gateway.Online(term.SerialNumber) })
	}
}

func purchase(t *testing.T, info demo.Info, terminalID string, amount int) string {
	t.Helper()
	return purchaseIn(t, info, terminalID, amount, "SEK")
}

func purchaseIn(t *testing.T, info demo.Info, terminalID string, amount int, currency string) string {
	t.Helper()
	return purchaseOf(t, info, map[string]any{"terminalId": terminalID, "amount": amount, "currency": currency})
}

// onlineCaller calls the demo's Online API with its credentials.
func onlineCaller(info demo.Info) apitest.Caller {
	return apitest.Caller{Base: info.OnlineAPIBaseURL, Key: info.SubscriptionKey, Token: info.AccessToken}
}

// purchaseOf starts the purchase body and returns its onlineAPIRefId.
func purchaseOf(t *testing.T, info demo.Info, purchase map[string]any) string {
	t.Helper()
	return onlineCaller(info).Purchase(t, purchase)
}

// page is the console open in a headless Chromium tab.
type page struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// errs are the page's console errors and uncaught exceptions.
	errs []string
}

// openConsole opens the demo's console in the system Chromium with a
// viewport width wide (CSS pixels) and waits until it is live. Each of
// scripts runs in the page before its own scripts.
func openConsole(t *testing.T, info demo.Info, width int64, scripts ...string) *page {
	t.Helper()
	exe := browser(t)
	opts := append([]chromedp.ExecAllocatorOption{},
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1366, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	if err := chromedp.Do(ctx); err != nil { // start the browser and the tab
		t.Fatalf("start Chromium: %v", err)
	}
	p := &page{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.mu.Lock()
				p.errs = append(p.errs, m.String())
				p.mu.Unlock()
			}
		}
	}()
	for _, src := range scripts {
		if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: src})
			return err
		})); err != nil {
			t.Fatalf("add a script: %v", err)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(width, 900),
		chromedp.Navigate(info.ConsoleURL),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		chromedp.WaitVisible(chromedp.CSS(`.device .screen`)),
	); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	return p
}

// poll waits (bounded) until the JavaScript expression is true.
func (p *page) poll(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) click(sel string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		p.t.Fatalf("click %s: %v", sel, err)
	}
}

func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// noErrors fails the test if the page logged an error.
func (p *page) noErrors() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) > 0 {
		p.t.Errorf("browser console errors: %s", strings.Join(p.errs, "; "))
	}
}

// clippedCodeLists lists the code-list cells and tables whose content is
// wider than their box (clipped or scrolled away).
const clippedCodeLists = `(() => {
  const bad = [];
  document.querySelectorAll("#metadata > div").forEach((w) => {
    const tb = w.querySelector("table");
    if (tb.scrollWidth > w.clientWidth + 1 || w.getBoundingClientRect().right > innerWidth) bad.push(w.querySelector("h3").textContent);
    tb.querySelectorAll("td, th").forEach((c) => { if (c.scrollWidth > c.clientWidth + 1) bad.push(c.textContent); });
  });
  if (document.querySelectorAll("#metadata td").length < 30) bad.push("the code lists are not rendered");
  return bad;
})()`

// TestConsoleInChromium is a person's walk through the console in the
// system Chromium: the page follows a purchase an ECR started, the amount
// shows on the right device, a click approves it and the device shows
// APPROVED (never again the card prompt, whichever of the click's answer
// and the change's event comes first), the list shows APPROVED. An
// outcome chosen for the next transaction shows on its terminal until a
// transaction takes it; amounts have their currency's decimals; the code
// lists are not clipped.
func TestConsoleInChromium(t *testing.T) {
	d := startDemo(t)
	info := d.Info()
	waitOnline(t, d)
	p := openConsole(t, info, 1366)
	if n := eval[int](p, `document.querySelectorAll(".device").length`); n != 3 {
		t.Fatalf("device cards = %d, want 3", n)
	}

	counter := info.Terminals[0]
	device := fmt.Sprintf(`[data-serial="%s"]`, counter.SerialNumber)
	ref := purchase(t, info, counter.TerminalID, 1234)
	p.poll("the device shows the amount", fmt.Sprintf(`document.querySelector('%s .screen').textContent.includes("SEK 12.34")`, device))
	p.poll("the purchase appears in the list", fmt.Sprintf(`!!document.querySelector('tr[data-ref="%s"]')`, ref))
	p.poll("the first terminal shows it waits for a person", fmt.Sprintf(`document.querySelector('%s .interactive-box').checked`, device))
	// Every text the screen shows from now on.
	eval[bool](p, fmt.Sprintf(`(() => {
  const el = document.querySelector('%s .screen');
  window.screens = [el.textContent];
  new MutationObserver(() => window.screens.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  return true;
})()`, device))
	p.click(device + ` button[data-action="approve"]`)
	p.poll("the list shows APPROVED", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] .status') || {}).textContent === "APPROVED (0)"`, ref))
	// The click's answer has been read (the resource is complete); the
	// device shows the result, not the card prompt it showed before.
	p.poll("the click's answer arrived", `performance.getEntriesByType("resource").some((e) => e.name.includes("/approve") && e.responseEnd > 0)`)
	p.poll("the device shows APPROVED", fmt.Sprintf(`document.querySelector('%s .screen').textContent === "APPROVED"`, device))
	screens := eval[[]string](p, `window.screens`)
	approved := slices.Index(screens, "APPROVED")
	if approved < 0 {
		t.Fatalf("the screen never showed APPROVED: %q", screens)
	}
	for _, s := range screens[approved:] {
		if strings.Contains(s, "Present card") {
			t.Fatalf("the screen went back to the card prompt after APPROVED: %q", screens)
		}
	}
	// A click on the row shows what happened to the sale: its timeline,
	// read from the Online API, from its creation to the approval.
	p.click(fmt.Sprintf(`tr[data-ref="%s"] td`, ref))
	p.poll("the timeline shows the result", `[...document.querySelectorAll("#timeline-list li .kind")].map((e) => e.textContent).includes("RESULT")`)
	kinds := eval[[]string](p, `[...document.querySelectorAll("#timeline-list li .kind")].map((e) => e.textContent).filter((k) => k !== "PROGRESS")`)
	if want := []string{"CREATED", "ACKNOWLEDGED", "RESULT"}; !slices.Equal(kinds, want) {
		t.Errorf("timeline in the console = %q, want %q", kinds, want)
	}
	if got := eval[string](p, `document.querySelector("#timeline-ref").textContent`); got != ref {
		t.Errorf("timeline of %q, want %q", got, ref)
	}

	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), "console.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if out := os.Getenv("INSTORE_CONSOLE_SCREENSHOT"); out != "" {
		os.WriteFile(out, png, 0o644)
	}

	// An outcome chosen for the next transaction shows on the mobile
	// terminal (which does not wait for a person) until a purchase takes it.
	mobile := info.Terminals[1]
	mdev := fmt.Sprintf(`[data-serial="%s"]`, mobile.SerialNumber)
	p.click(mdev + ` button[data-action="decline"]`)
	p.poll("the card shows the next outcome", fmt.Sprintf(`(() => { const n = document.querySelector('%s .next'); return !n.hidden && n.textContent === "Next transaction: TRANSACTION_DECLINED (11)"; })()`, mdev))
	p.click(mdev + ` button[data-action="out-of-paper"]`)
	p.poll("the card shows the next print status", fmt.Sprintf(`document.querySelector('%s .next').textContent === "Next transaction: TRANSACTION_DECLINED (11) · Next print: OUT_OF_PAPER (2)"`, mdev))
	declined := purchase(t, info, mobile.TerminalID, 1000)
	p.poll("the list shows TRANSACTION_DECLINED", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] .status') || {}).textContent === "TRANSACTION_DECLINED (11)"`, declined))
	p.poll("the next outcome is gone from the card", fmt.Sprintf(`document.querySelector('%s .next').textContent === "Next print: OUT_OF_PAPER (2)"`, mdev))

	// Amounts with their currency's ISO 4217 decimals.
	pinpad := info.Terminals[2]
	for _, tc := range []struct {
		amount   int
		currency string
		want     string
	}{
		{1250, "JPY", "JPY 1250"},
		{1250, "KWD", "KWD 1.250"},
		{12350, "CLF", "CLF 1.2350"},
		{1250, "UGX", "UGX 1250"},
		{1250, "EUR", "EUR 12.50"},
	} {
		ref := purchaseIn(t, info, pinpad.TerminalID, tc.amount, tc.currency)
		p.poll(tc.want+" in the list", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] td.num') || {}).textContent === %q`, ref, tc.want))
		p.poll("the purchase ends", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] .status') || {}).textContent === "APPROVED (0)"`, ref))
	}
	if bad := eval[[]string](p, clippedCodeLists); len(bad) > 0 {
		t.Errorf("clipped in the code lists: %q", bad)
	}
	p.noErrors()
}

// TestConsoleNarrow: at 420 CSS pixels the page does not scroll sideways,
// the transactions' status column is in view and no code list is clipped.
func TestConsoleNarrow(t *testing.T) {
	d := startDemo(t)
	info := d.Info()
	waitOnline(t, d)
	mobile := info.Terminals[1]
	ref := purchase(t, info, mobile.TerminalID, 1011) // 11: TRANSACTION_DECLINED, the longest status
	p := openConsole(t, info, 420)
	if w := eval[int](p, `innerWidth`); w != 420 {
		t.Fatalf("viewport width %d, want 420", w)
	}
	row := fmt.Sprintf(`tr[data-ref="%s"]`, ref)
	p.poll("the purchase ends", fmt.Sprintf(`(document.querySelector('%s .status') || {}).textContent === "TRANSACTION_DECLINED (11)"`, row))
	if w := eval[int](p, `document.documentElement.scrollWidth`); w > 420 {
		t.Errorf("the page is %d px wide at a 420 px viewport", w)
	}
	for _, sel := range []string{row + ` .status`, `#transactions thead th:nth-child(5)`} {
		box := eval[[]float64](p, fmt.Sprintf(`(() => { const r = document.querySelector('%s').getBoundingClientRect(); return [r.left, r.right, r.width]; })()`, sel))
		if box[0] < 0 || box[1] > 420 || box[2] <= 0 {
			t.Errorf("%s spans %v..%v of a 420 px viewport, want it in view", sel, box[0], box[1])
		}
	}
	if bad := eval[[]string](p, clippedCodeLists); len(bad) > 0 {
		t.Errorf("clipped in the code lists: %q", bad)
	}
	p.noErrors()
}

package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/server"
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
	d, err := demo.Start(context.Background(), server.Config{
		ListenOnline: "127.0.0.1:0", ListenAccess: "127.0.0.1:0", ListenTerminal: "127.0.0.1:0", ListenOps: "127.0.0.1:0",
		DataDir: t.TempDir(), SQLiteSynchronous: "NORMAL", SimDelay: 0, InteractiveFirst: true,
		AckTimeout: 5 * time.Second, TransactionDeadline: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func purchase(t *testing.T, info demo.Info, terminalID string, amount int) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"terminalId": terminalID, "amount": amount, "currency": "SEK"})
	req, _ := http.NewRequest("POST", info.OnlineAPIBaseURL+"/in-store/api/v1/purchase", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ocp-Apim-Subscription-Key", info.SubscriptionKey)
	req.Header.Set("Authorization", "Bearer "+info.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		t.Fatalf("purchase = %d %s", resp.StatusCode, body)
	}
	var tx struct {
		Ref string `json:"onlineAPIRefId"`
	}
	json.Unmarshal(body, &tx)
	return tx.Ref
}

// TestConsoleInChromium is a person's walk through the console in the
// system Chromium: the page follows a purchase an ECR started, the amount
// shows on the right device, a click approves it, the list shows APPROVED.
func TestConsoleInChromium(t *testing.T) {
	exe := browser(t)
	d := startDemo(t)
	info := d.Info()

	opts := append([]chromedp.ExecAllocatorOption{},
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1366, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	// The page's console errors and uncaught exceptions, collected while the
	// test runs.
	var (
		mu            sync.Mutex
		consoleErrors []string
	)
	if err := chromedp.Do(ctx); err != nil { // start the browser and the tab
		t.Fatalf("start Chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				consoleErrors = append(consoleErrors, m.String())
				mu.Unlock()
			}
		}
	}()

	counter := info.Terminals[0]
	device := fmt.Sprintf(`[data-serial="%s"]`, counter.SerialNumber)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(info.ConsoleURL),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		chromedp.WaitVisible(chromedp.CSS(device+` .screen`)),
	); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".device").length`))
	if err != nil || n != 3 {
		t.Fatalf("device cards = %d (%v), want 3", n, err)
	}

	ref := purchase(t, info, counter.TerminalID, 1234)
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			screen, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(device+` .screen`)))
			t.Fatalf("%s: %v (device screen %q)", what, err, screen)
		}
	}
	poll("the device shows the amount", fmt.Sprintf(`document.querySelector('%s .screen').textContent.includes("SEK 12.34")`, device))
	poll("the purchase appears in the list", fmt.Sprintf(`!!document.querySelector('tr[data-ref="%s"]')`, ref))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(device+` button[data-action="approve"]`))); err != nil {
		t.Fatalf("click approve: %v", err)
	}
	poll("the first terminal shows it waits for a person", fmt.Sprintf(`document.querySelector('%s .interactive-box').checked`, device))
	poll("the list shows APPROVED", fmt.Sprintf(`(document.querySelector('tr[data-ref="%s"] .status') || {}).textContent === "APPROVED (0)"`, ref))
	// The device shows the outcome for a few seconds, then goes idle.
	poll("the device leaves the card prompt", fmt.Sprintf(`!document.querySelector('%s .screen').textContent.includes("Present card")`, device))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
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
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("browser console errors: %s", strings.Join(consoleErrors, "; "))
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestServeFingerprintsWithStoredKey runs `instore serve` on a data
// directory set up with `instore admin`, pays on an `instore terminal`, and
// finds the purchase's "transaction ended" line by the fingerprints
// `instore admin fingerprint` prints for the terminal ID and the merchant:
// serve fingerprints with the key kept in the store, and the line holds
// neither id in clear.
func TestServeFingerprintsWithStoredKey(t *testing.T) {
	dir := t.TempDir()
	admin := func(args ...string) string {
		t.Helper()
		out, errs, code := runCmd(t, append([]string{"admin", "--data", dir, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("instore admin %v = exit %d: %s", args, code, errs)
		}
		return out
	}
	field := func(out, name string) string {
		t.Helper()
		var m map[string]any
		must(t, json.Unmarshal([]byte(out), &m))
		s, _ := m[name].(string)
		if s == "" {
			t.Fatalf("no %s in %s", name, out)
		}
		return s
	}
	cus := field(admin("customer", "create", "--name", "Shop AB"), "customerId")
	mer := field(admin("merchant", "create", "--customer", cus, "--name", "Shop AB Kungsgatan"), "merchantId")
	cli := admin("client", "create", "--surface", "online", "--merchant", mer)
	clientID, clientSecret := field(cli, "clientId"), field(cli, "clientSecret")
	key := field(admin("key", "create", "--surface", "online", "--merchant", mer), "subscriptionKey")
	secret := field(admin("device", "add", "--serial", "SHOP-9", "--model", "mobile", "--customer", cus), "deviceSecret")
	var terms []struct {
		TerminalID string `json:"terminalId"`
	}
	must(t, json.Unmarshal([]byte(admin("terminal", "add", "--merchant", mer)), &terms))
	terminalID := terms[0].TerminalID

	// serve, on free ports, read from its "listening" lines.
	p := startRun(context.Background(), slices.Concat([]string{"serve", "--data", dir}, onFreePorts, []string{"--log-format", "json", "--access-log-flush", "0"})...)
	p.discardRest()
	logs := p.stderr
	stop := sync.OnceFunc(func() {
		if c := p.stop(t); c != 0 {
			t.Errorf("instore serve exited %d:\n%s", c, logs.String())
		}
	})
	defer stop()
	addrs := map[string]string{}
	testwait.ForNil(t, "serve to listen", func() error {
		for line := range strings.Lines(logs.String()) {
			var rec struct{ Msg, Surface, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addrs[rec.Surface] = rec.Addr
			}
		}
		if len(addrs) < 4 {
			return fmt.Errorf("logs:\n%s", logs.String())
		}
		return nil
	})
	online := "http://" + addrs["online"]
	resp, err := http.PostForm(online+"/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {clientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	info := demo.Info{OnlineAPIBaseURL: online, SubscriptionKey: key, AccessToken: tok.AccessToken}

	// A terminal: linked by the code on its screen, then a purchase.
	linkCode, stopTerminal := runTerminal(t, context.Background(), secret, "--gateway", "ws://"+addrs["terminal"]+"/terminal/v1/connect",
		"--serial", "SHOP-9", "--model", "mobile", "--delay", "0")
	if st, b := apiRequest(t, info, "POST", "/in-store/api/v1/terminal/link", map[string]any{"terminalId": terminalID, "linkCode": linkCode}); st != 200 {
		t.Fatalf("link = %d %s", st, b)
	}
	ref := purchase(t, info, terminalID, 4400)
	if got := waitFinal(t, info, ref); got != instore.StatusApproved {
		t.Errorf("purchase ended %d, want APPROVED", got)
	}
	stopTerminal()
	stop()

	var ended []map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "transaction ended" {
			ended = append(ended, rec)
		}
	}
	if len(ended) != 1 {
		t.Fatalf("%d transaction ended lines, want 1:\n%s", len(ended), logs.String())
	}
	rec := ended[0]
	if rec["ref"] != ref || rec["type"] != "PURCHASE" || rec["status"] != "APPROVED" {
		t.Errorf("transaction ended line = %v, want %s PURCHASE APPROVED", rec, ref)
	}
	for _, id := range []struct{ name, value string }{{"terminalId", terminalID}, {"merchantId", mer}} {
		out, errs, code := runCmd(t, "admin", "--data", dir, "fingerprint", id.value)
		if code != 0 {
			t.Fatalf("admin fingerprint = exit %d: %s", code, errs)
		}
		if fp := strings.TrimSpace(out); rec[id.name] != fp || !strings.HasPrefix(fp, "fp:") {
			t.Errorf("%s in the line = %v, admin fingerprint printed %q: want the same fp:...", id.name, rec[id.name], fp)
		}
		if strings.Contains(logs.String(), id.value) {
			t.Errorf("the log holds the %s in clear", id.name)
		}
	}
	// --json, and the usage error of an empty value.
	out, _, _ := runCmd(t, "admin", "--data", dir, "--json", "fingerprint", terminalID)
	if !strings.Contains(out, `{"fingerprint":"`+rec["terminalId"].(string)+`"}`) {
		t.Errorf("admin --json fingerprint = %q", out)
	}
	if _, errs, code := runCmd(t, "admin", "--data", dir, "fingerprint", ""); code != 2 || !strings.Contains(errs, "nothing to fingerprint") {
		t.Errorf("admin fingerprint \"\" = exit %d %q, want 2", code, errs)
	}
	// A key given as serve was given it, without the store.
	out, _, code := runCmd(t, "admin", "fingerprint", "--log-fingerprint-key", "k", terminalID)
	if code != 0 || !strings.HasPrefix(out, "fp:") || strings.TrimSpace(out) == rec["terminalId"] {
		t.Errorf("admin fingerprint --log-fingerprint-key = exit %d %q, want another fp:...", code, out)
	}
}

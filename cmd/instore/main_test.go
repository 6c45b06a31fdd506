package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testlog"
)

// runDemo starts `instore demo --json` in-process on free ports and returns
// the printed object and a stop function that waits for a clean exit.
func runDemo(t *testing.T, extra ...string) (demo.Info, *testlog.Buffer, func()) {
	t.Helper()
	p := startRun(context.Background(), demoArgs(append([]string{"--json", "--log-format", "json"}, extra...)...)...)
	line, err := bufio.NewReader(p.out).ReadString('\n')
	if err != nil {
		p.cancel()
		t.Fatalf("demo printed no line: %v; stderr:\n%s", err, p.stderr.String())
	}
	p.discardRest()
	var info demo.Info
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		t.Fatalf("demo --json line %q: %v", line, err)
	}
	stop := sync.OnceFunc(func() {
		if c := p.stop(t); c != 0 {
			t.Errorf("demo exited %d; stderr:\n%s", c, p.stderr.String())
		}
	})
	t.Cleanup(stop)
	return info, p.stderr, stop
}

func getMetadata(t *testing.T, info demo.Info) int {
	t.Helper()
	c := onlineCaller(t, info)
	c.Header = map[string]string{"Accept": "application/json"}
	st, b := c.Call(t, "GET", "/in-store/api/v1/metadata", nil)
	var m instore.Metadata
	if st == 200 {
		if err := json.Unmarshal(b, &m); err != nil || len(m.ErrorCodes) != 15 {
			t.Errorf("metadata body: %v, %d error codes", err, len(m.ErrorCodes))
		}
	}
	return st
}

func TestDemoJSONExactObjectAndRestart(t *testing.T) {
	dir := t.TempDir()
	info, _, stop := runDemo(t, "--data", dir, "--sim-delay", "0")
	// Exactly the documented keys, in order.
	raw, _ := json.Marshal(info)
	keys := apitest.ObjectKeys(t, raw)
	want := "onlineApiBaseUrl accessApiBaseUrl terminalGatewayUrl consoleUrl opsUrl subscriptionKey accessToken clientId clientSecret accessSubscriptionKey accessAccessToken accessClientId accessClientSecret customerId merchantId currency terminals dataDir"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("demo --json keys = %s, want %s", got, want)
	}
	if !strings.HasPrefix(info.TerminalGatewayURL, "ws://127.0.0.1:") || !strings.HasSuffix(info.TerminalGatewayURL, "/terminal/v1/connect") {
		t.Errorf("terminalGatewayUrl = %q", info.TerminalGatewayURL)
	}
	if info.ConsoleURL != info.OnlineAPIBaseURL+"/console" {
		t.Errorf("consoleUrl = %q", info.ConsoleURL)
	}
	if got := getMetadata(t, info); got != 200 {
		t.Fatalf("metadata with the demo's credentials = %d, want 200", got)
	}
	// The access token is valid for 24 h.
	claims := strings.Split(info.AccessToken, ".")
	if len(claims) != 3 {
		t.Fatalf("accessToken is not a JWT")
	}
	// Three virtual terminals, linked, one per model in order.
	if len(info.Terminals) != 3 {
		t.Fatalf("terminals = %+v, want 3", info.Terminals)
	}
	for i, term := range info.Terminals {
		if term.Model != instore.Models[i] || len(term.TerminalID) != 8 || term.SerialNumber == "" {
			t.Errorf("terminal %d = %+v, want model %s", i, term, instore.Models[i])
		}
	}
	ref := purchase(t, info, info.Terminals[0].TerminalID, 1250)
	if got := waitFinal(t, info, ref); got != instore.StatusApproved {
		t.Fatalf("demo purchase ended %d, want APPROVED", got)
	}
	stop()

	again, _, _ := runDemo(t, "--data", dir, "--sim-delay", "0")
	if again.SubscriptionKey != info.SubscriptionKey || again.AccessToken != info.AccessToken ||
		again.ClientID != info.ClientID || again.ClientSecret != info.ClientSecret ||
		again.AccessSubscriptionKey != info.AccessSubscriptionKey || again.AccessAccessToken != info.AccessAccessToken ||
		again.MerchantID != info.MerchantID || again.CustomerID != info.CustomerID {
		t.Errorf("restart on the same --data printed other credentials:\nfirst %+v\nthen  %+v", info, again)
	}
	if got := getMetadata(t, again); got != 200 {
		t.Errorf("metadata after restart = %d, want 200", got)
	}
	if fmt.Sprint(again.Terminals) != fmt.Sprint(info.Terminals) {
		t.Errorf("terminals after restart = %v, want %v", again.Terminals, info.Terminals)
	}
	// The transaction survived the restart.
	if got := waitFinal(t, again, ref); got != instore.StatusApproved {
		t.Errorf("after restart the purchase is %d, want APPROVED", got)
	}
	// And the virtual terminals are back.
	ref2 := purchase(t, again, again.Terminals[2].TerminalID, 1011)
	if got := waitFinal(t, again, ref2); got != instore.StatusTransactionDeclined {
		t.Errorf("purchase of 10.11 after restart = %d, want 11", got)
	}
}

// onlineCaller calls the demo's Online API with its credentials; the
// responses are validated against api/online-api.yaml.
func onlineCaller(t *testing.T, info demo.Info) apitest.Caller {
	return apitest.Caller{Client: apitest.NewValidator(t, api.OnlineYAML).Client(t), Base: info.OnlineAPIBaseURL, Key: info.SubscriptionKey, Token: info.AccessToken}
}

// apiRequest calls the demo's Online API with its credentials (see
// onlineCaller) and returns the status and body of the answer.
func apiRequest(t *testing.T, info demo.Info, method, path string, body any) (int, []byte) {
	t.Helper()
	return onlineCaller(t, info).Call(t, method, path, body)
}

func purchase(t *testing.T, info demo.Info, terminalID string, amount int64) string {
	t.Helper()
	return onlineCaller(t, info).Purchase(t, map[string]any{"terminalId": terminalID, "amount": amount, "currency": "SEK"})
}

func waitFinal(t *testing.T, info demo.Info, ref string) instore.TransactionStatus {
	t.Helper()
	for range 10 {
		st, b := apiRequest(t, info, "GET", "/in-store/api/v1/transaction/"+ref+"?wait=20", nil)
		if st != 200 {
			t.Fatalf("status = %d %s", st, b)
		}
		var tx struct {
			StatusID instore.TransactionStatus `json:"statusId"`
		}
		json.Unmarshal(b, &tx)
		if tx.StatusID != instore.StatusPending {
			return tx.StatusID
		}
	}
	t.Fatalf("%s still pending", ref)
	return -1
}

func TestDemoTemporaryDirectoryIsRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	info, _, stop := runDemo(t)
	if got := getMetadata(t, info); got != 200 {
		t.Fatalf("metadata = %d, want 200", got)
	}
	entries, _ := os.ReadDir(os.Getenv("TMPDIR"))
	if len(entries) != 1 {
		t.Fatalf("TMPDIR holds %d entries while the demo runs, want 1", len(entries))
	}
	stop()
	entries, _ = os.ReadDir(os.Getenv("TMPDIR"))
	if len(entries) != 0 {
		t.Errorf("temporary demo directory not removed: %v", entries)
	}
}

// TestDemoBannerCurlLine runs `instore demo` as a person does and runs the
// curl line its banner prints.
func TestDemoBannerCurlLine(t *testing.T) {
	p := startRun(context.Background(), demoArgs()...)
	defer func() {
		if c := p.stop(t); c != 0 {
			t.Errorf("demo exited %d", c)
		}
	}()
	sc := bufio.NewScanner(p.out)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var curl string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "curl ") {
			curl = l
		}
		if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	p.discardRest()
	m := regexp.MustCompile(`^curl -s (\S+) -H 'accept: application/json' -H 'Ocp-Apim-Subscription-Key: (\S+)' -H 'Authorization: Bearer (\S+)'$`).FindStringSubmatch(curl)
	if m == nil {
		t.Fatalf("banner has no curl line of the expected form: %q", curl)
	}
	if !strings.HasSuffix(m[1], "/in-store/api/v1/metadata") {
		t.Errorf("curl URL = %q", m[1])
	}
	info := demo.Info{OnlineAPIBaseURL: strings.TrimSuffix(m[1], "/in-store/api/v1/metadata"), SubscriptionKey: m[2], AccessToken: m[3]}
	if got := getMetadata(t, info); got != 200 {
		t.Errorf("the banner's curl line = %d, want 200", got)
	}
}

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestAdminCommands(t *testing.T) {
	dir := t.TempDir()
	jsonOut := func(args ...string) map[string]any {
		t.Helper()
		out, errs, code := runCmd(t, append([]string{"admin", "--data", dir, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("instore admin %v = exit %d: %s", args, code, errs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("instore admin %v output %q: %v", args, out, err)
		}
		return m
	}
	cus := jsonOut("customer", "create", "--name", "Shop AB")
	mer := jsonOut("merchant", "create", "--customer", cus["customerId"].(string), "--name", "Shop AB Kungsgatan")
	if mer["active"] != true {
		t.Errorf("new merchant active = %v, want true", mer["active"])
	}
	cli := jsonOut("client", "create", "--surface", "online", "--merchant", mer["merchantId"].(string))
	if !strings.HasPrefix(cli["clientSecret"].(string), "ics_") {
		t.Errorf("client create printed no secret: %v", cli)
	}
	key := jsonOut("key", "create", "--surface", "access", "--customer", cus["customerId"].(string))
	if !strings.HasPrefix(key["subscriptionKey"].(string), "isk_") || key["surface"] != "access" {
		t.Errorf("key create = %v", key)
	}
	off := jsonOut("merchant", "deactivate", mer["merchantId"].(string))
	if off["active"] != false {
		t.Errorf("deactivate: active = %v", off["active"])
	}
	on := jsonOut("merchant", "activate", mer["merchantId"].(string))
	if on["active"] != true {
		t.Errorf("activate: active = %v", on["active"])
	}
	rev := jsonOut("client", "revoke", cli["clientId"].(string))
	if rev["revokedAt"] == nil {
		t.Errorf("client revoke: %v", rev)
	}
	// Secrets are shown once: listings never contain them.
	out, _, _ := runCmd(t, "admin", "--data", dir, "key", "list", "--customer", cus["customerId"].(string))
	if strings.Contains(out, key["subscriptionKey"].(string)) {
		t.Errorf("key list shows the key in clear")
	}
	out, _, _ = runCmd(t, "admin", "--data", dir, "client", "list", "--customer", cus["customerId"].(string), "--json")
	if strings.Contains(out, cli["clientSecret"].(string)) || !strings.Contains(out, cli["clientId"].(string)) {
		t.Errorf("client list = %s", out)
	}
	// And the database holds no secret in clear.
	db, _ := os.ReadFile(filepath.Join(dir, "instore.db"))
	wal, _ := os.ReadFile(filepath.Join(dir, "instore.db-wal"))
	for _, s := range []string{cli["clientSecret"].(string), key["subscriptionKey"].(string)} {
		if bytes.Contains(db, []byte(s)) || bytes.Contains(wal, []byte(s)) {
			t.Errorf("the database holds a secret in clear")
		}
	}
	// Errors are clear and non-zero.
	if _, errs, code := runCmd(t, "admin", "--data", dir, "merchant", "create", "--customer", "cus_missing", "--name", "x"); code == 0 || !strings.Contains(errs, "customer") {
		t.Errorf("merchant of a missing customer: exit %d, %q", code, errs)
	}
	if _, errs, code := runCmd(t, "admin", "customer", "list"); code != 2 || !strings.Contains(errs, "--data") {
		t.Errorf("admin without a store: exit %d, %q; want 2 naming --data", code, errs)
	}
}

func TestServeConfigValidation(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no store", []string{"serve"}, nil, "no store"},
		{"bad address", []string{"serve", "--data", dir, "--listen-online", "nonsense"}, nil, "--listen-online"},
		{"same port", []string{"serve", "--data", dir, "--listen-online", ":9999", "--listen-access", ":9999"}, nil, "same port"},
		{"bad synchronous", []string{"serve", "--data", dir, "--sqlite-synchronous", "OFF"}, nil, "--sqlite-synchronous"},
		{"short signing key", []string{"serve", "--data", dir, "--token-signing-key", "short"}, nil, "at least 32 bytes"},
		{"bad database url", []string{"serve", "--database-url", "mysql://x"}, nil, "postgres://"},
		{"bad token ttl", []string{"serve", "--data", dir, "--token-ttl", "48h"}, nil, "--token-ttl"},
		{"bad env duration", []string{"serve", "--data", dir}, map[string]string{"INSTORE_TOKEN_TTL": "soon"}, "INSTORE_TOKEN_TTL"},
		{"env store missing file", []string{"serve"}, map[string]string{"INSTORE_DATABASE_URL_FILE": filepath.Join(dir, "missing")}, "INSTORE_DATABASE_URL_FILE"},
		{"env short key from file", []string{"serve", "--data", dir}, map[string]string{"INSTORE_TOKEN_SIGNING_KEY_FILE": writeFile(t, "short\n")}, "at least 32 bytes"},
		{"bad log format", []string{"serve", "--data", dir, "--log-format", "xml"}, nil, "--log-format"},
		{"bad payment methods", []string{"serve", "--data", dir, "--payment-methods-file", writeFile(t, `[{"id":0,"code":"A","description":"a"}]`)}, nil, "exactly 3"},
		{"unknown flag", []string{"serve", "--nope"}, nil, "unknown flag"},
		// An operation in flight at shutdown would lose its answer.
		{"shutdown shorter than a print", []string{"serve", "--data", dir, "--shutdown-timeout", "20s"}, nil, "--shutdown-timeout 20s is too short"},
		{"shutdown shorter than an ack wait", []string{"serve", "--data", dir, "--shutdown-timeout", "40s", "--ack-timeout", "45s"}, nil, "--ack-timeout"},
		{"shutdown from env", []string{"demo", "--data", dir}, map[string]string{"INSTORE_SHUTDOWN_TIMEOUT": "31s", "INSTORE_PRINT_TIMEOUT": "31s"}, "--shutdown-timeout 31s is too short"},
		{"demo on two stores", []string{"demo", "--data", dir, "--database-url", "postgres://127.0.0.1/x"}, nil, "exclude each other"},
		{"demo on two stores from env", []string{"demo", "--database-url", "postgres://127.0.0.1/x"}, map[string]string{"INSTORE_DATA": dir}, "exclude each other"},
		{"short pre-auth validity", []string{"serve", "--data", dir, "--preauth-validity", "30s"}, nil, "between 1m and 744h"},
		{"short pre-auth validity in the sandbox", []string{"serve", "--data", dir, "--sandbox", "--preauth-validity", "500ms"}, nil, "between 1s (--sandbox) and 744h"},
		{"bad idempotency wait", []string{"serve", "--data", dir, "--idempotency-wait", "0s"}, nil, "--idempotency-wait"},
		{"no streams per client", []string{"serve", "--data", dir, "--streams-per-client", "0"}, nil, "--streams-per-client"},
		{"node streams below a client's", []string{"serve", "--data", dir, "--streams-per-client", "20", "--streams-per-node", "10"}, nil, "--streams-per-node"},
		{"short stream write timeout", []string{"serve", "--data", dir, "--stream-write-timeout", "10ms"}, nil, "--stream-write-timeout"},
		{"terminal gateway twice", []string{"terminal", "--gateway", "ws://127.0.0.1:1/terminal/v1/connect", "--gateway", "http://127.0.0.1:1/terminal/v1/connect", "--serial", "S", "--secret", "x"}, nil, "listed twice"},
		{"terminal second gateway invalid", []string{"terminal", "--gateway", "ws://127.0.0.1:1/terminal/v1/connect", "--gateway", "ftp://h/x", "--serial", "S", "--secret", "x"}, nil, "not ws or wss"},
		{"terminal gateways from env", []string{"terminal", "--serial", "S", "--secret", "x"}, map[string]string{"INSTORE_GATEWAY": "ws://127.0.0.1:1/terminal/v1/connect  ws://127.0.0.1:1/terminal/v1/connect"}, "listed twice"},
		{"terminal reconnect wait", []string{"terminal", "--gateway", "ws://127.0.0.1:1/terminal/v1/connect", "--serial", "S", "--secret", "x", "--reconnect-max", "-1s"}, nil, "--reconnect-max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, errs, code := runCmd(t, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("instore %v = exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errs, tc.want)
			}
		})
	}
}

// TestUsageErrors checks that every wrong call exits 2 with the error and
// where to find the usage on stderr, as the README promises.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		want, help string
	}{
		{"unknown command", []string{"bogus"}, `unknown command "bogus" for "instore"`, "instore"},
		{"misspelled command", []string{"serv"}, "did you mean serve?", "instore"},
		{"unknown admin command", []string{"admin", "bogus"}, `unknown command "bogus" for "instore admin"`, "instore admin"},
		{"unknown nested command", []string{"admin", "customer", "bogus"}, `unknown command "bogus" for "instore admin customer"`, "instore admin customer"},
		{"unknown ecr command", []string{"ecr", "pay"}, `unknown command "pay" for "instore ecr"`, "instore ecr"},
		{"unknown root flag", []string{"--bogus"}, "unknown flag: --bogus", "instore"},
		{"unknown flag", []string{"demo", "--bogus"}, "unknown flag: --bogus", "instore demo"},
		{"unknown shorthand", []string{"-v"}, "unknown shorthand flag", "instore"},
		{"argument to version", []string{"version", "extra"}, `unknown command "extra" for "instore version"`, "instore version"},
		{"missing argument", []string{"admin", "--data", t.TempDir(), "merchant", "activate"}, "accepts 1 arg(s), received 0", "instore admin merchant activate"},
		{"missing required flag", []string{"admin", "--data", t.TempDir(), "customer", "create"}, `required flag(s) "name" not set`, "instore admin customer create"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, tc.args...)
			wantHelp := "Run '" + tc.help + " --help' for usage.\n"
			if code != 2 || !strings.Contains(errs, tc.want) || !strings.HasSuffix(errs, wantHelp) {
				t.Errorf("instore %v = exit %d, stderr %q; want exit 2, %q and %q", tc.args, code, errs, tc.want, wantHelp)
			}
			if out != "" {
				t.Errorf("instore %v printed %q on stdout, want nothing", tc.args, out)
			}
		})
	}
	// A group alone shows its help: that is no error.
	for _, args := range [][]string{nil, {"admin"}, {"ecr"}} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("instore %v = exit %d, stdout %q, stderr %q; want exit 0 and the help", args, code, out, errs)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvironmentConfiguresDemo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("INSTORE_DATA", dir)
	t.Setenv("INSTORE_TOKEN_SIGNING_KEY_FILE", writeFile(t, strings.Repeat("k", 40)+"\n"))
	info, _, stop := runDemo(t)
	stop()
	if _, err := os.Stat(filepath.Join(dir, "instore.db")); err != nil {
		t.Fatalf("INSTORE_DATA not used: %v", err)
	}
	// The token was signed with the configured key: a demo with another key
	// on the same data refuses it and mints a new one.
	t.Setenv("INSTORE_TOKEN_SIGNING_KEY_FILE", writeFile(t, strings.Repeat("z", 40)))
	again, _, _ := runDemo(t)
	if got := getMetadata(t, demo.Info{OnlineAPIBaseURL: again.OnlineAPIBaseURL, SubscriptionKey: again.SubscriptionKey, AccessToken: info.AccessToken}); got != 401 {
		t.Errorf("a token signed with the previous key = %d, want 401", got)
	}
	if again.AccessToken == info.AccessToken || getMetadata(t, again) != 200 {
		t.Errorf("the demo kept a token its signing key refuses instead of minting a new one")
	}
}

// TestBinarySIGTERM builds the real binary, runs `instore demo --json` as
// the README does, and stops it with SIGTERM: it must exit 0, with the
// buffered access log written out (the flush interval here is longer than
// the test, so the line can only come from the flush at shutdown).
func TestBinarySIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, demoArgs("--json", "--access-log-flush", "10s")...)
	stdout, _ := cmd.StdoutPipe()
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no JSON line: %v\n%s", err, stderr.String())
	}
	var info demo.Info
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if got := getMetadata(t, info); got != 200 {
		t.Fatalf("metadata = %d", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("instore demo after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("instore demo did not exit within 20 s of SIGTERM")
	}
	accessLine := false
	for line := range strings.Lines(stderr.String()) {
		var rec struct{ Msg, Route, Surface string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Surface == "online" && strings.HasSuffix(rec.Route, "/metadata") {
			accessLine = true
		}
	}
	if !accessLine {
		t.Errorf("no access-log line of GET /metadata after the shutdown:\n%s", stderr.String())
	}
	for _, s := range []string{info.SubscriptionKey, info.AccessToken, info.ClientSecret, info.MerchantID, info.CustomerID, info.ClientID} {
		if strings.Contains(stderr.String(), s) {
			t.Errorf("the demo's log holds a credential or identifier")
		}
	}
}

// TestTerminalCommand provisions a device with `instore admin device add`,
// runs it with `instore terminal` against the demo's gateway, links it by
// the code on its screen and pays with it.
func TestTerminalCommand(t *testing.T) {
	dir := t.TempDir()
	info, _, _ := runDemo(t, "--data", dir, "--sim-delay", "0")
	out, errs, code := runCmd(t, "admin", "--data", dir, "--json", "device", "add", "--serial", "SHOP-7", "--model", "mobile")
	if code != 0 {
		t.Fatalf("device add: %d %s", code, errs)
	}
	var dev struct {
		Secret string `json:"deviceSecret"`
	}
	must(t, json.Unmarshal([]byte(out), &dev))
	alloc, errs, code := runCmd(t, "admin", "--data", dir, "--json", "terminal", "add", "--merchant", info.MerchantID)
	if code != 0 {
		t.Fatalf("terminal add: %d %s", code, errs)
	}
	var terms []struct {
		TerminalID string `json:"terminalId"`
	}
	must(t, json.Unmarshal([]byte(alloc), &terms))

	// The first URL is dead: the terminal goes on to the second.
	linkCode, stop := runTerminal(t, context.Background(), dev.Secret, "--gateway", "ws://127.0.0.1:1/terminal/v1/connect",
		"--gateway", info.TerminalGatewayURL, "--serial", "SHOP-7", "--model", "mobile", "--delay", "0")
	defer func() {
		if c := stop(); c != 0 {
			t.Errorf("instore terminal exited %d", c)
		}
	}()
	st, b := apiRequest(t, info, "POST", "/in-store/api/v1/terminal/link", map[string]any{"terminalId": terms[0].TerminalID, "linkCode": linkCode})
	if st != 200 {
		t.Fatalf("link = %d %s", st, b)
	}
	ref := purchase(t, info, terms[0].TerminalID, 4400)
	if got := waitFinal(t, info, ref); got != instore.StatusApproved {
		t.Errorf("purchase on `instore terminal` ended %d", got)
	}
}

// buildBinary builds the instore binary with extra go build arguments
// (such as -ldflags) and returns its path.
func buildBinary(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "instore")
	args = append(append([]string{"build", "-o", bin}, args...), ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/pgtest"
)

// freshPostgres returns the URL of a new, empty schema in the database of
// INSTORE_TEST_DATABASE_URL (dropped at the end); it skips the test when
// the variable is unset.
func freshPostgres(t *testing.T) string {
	t.Helper()
	u := pgtest.Schema(t, "demo")
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is unset: no PostgreSQL to run the demo on")
	}
	return u
}

// TestDemoPostgresRestart runs the demo on a fresh PostgreSQL schema: it
// seeds it, answers with the credentials it printed, keeps nothing on
// disk, and started again on the same database prints the same
// credentials and still knows the purchase.
func TestDemoPostgresRestart(t *testing.T) {
	dbURL := freshPostgres(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	info, _, stop := runDemo(t, "--database-url", dbURL, "--sim-delay", "0")
	if got := getMetadata(t, info); got != 200 {
		t.Fatalf("metadata with the demo's credentials = %d, want 200", got)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the demo on PostgreSQL made %v in TMPDIR, want nothing (a temporary SQLite?)", entries)
	}
	if len(info.Terminals) != 3 {
		t.Fatalf("terminals = %+v, want 3", info.Terminals)
	}
	ref := purchase(t, info, info.Terminals[0].TerminalID, 1250)
	if got := waitFinal(t, info, ref); got != instore.StatusApproved {
		t.Fatalf("demo purchase ended %d, want APPROVED", got)
	}
	stop()

	again, _, _ := runDemo(t, "--database-url", dbURL, "--sim-delay", "0")
	// Only the URLs change: the ports are new.
	want := info
	want.OnlineAPIBaseURL, want.AccessAPIBaseURL = again.OnlineAPIBaseURL, again.AccessAPIBaseURL
	want.TerminalGatewayURL, want.ConsoleURL, want.OpsURL = again.TerminalGatewayURL, again.ConsoleURL, again.OpsURL
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("restart on the same database printed other credentials (-first +then):\n%s", diff)
	}
	if got := getMetadata(t, again); got != 200 {
		t.Errorf("metadata after restart = %d, want 200", got)
	}
	if got := waitFinal(t, again, ref); got != instore.StatusApproved {
		t.Errorf("after restart the purchase is %d, want APPROVED", got)
	}
}

// demoOutput runs `instore demo` with args on the data directory dir until
// it has printed its output (up to the first line for --json, up to the
// closing comment for --env), stops it, and returns what it printed.
func demoOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	p := startRun(context.Background(), demoArgs(append([]string{"--data", dir, "--sim-delay", "0"}, args...)...)...)
	var out strings.Builder
	rd := bufio.NewReader(p.out)
	for {
		l, err := rd.ReadString('\n')
		out.WriteString(l)
		if err != nil || slices.Contains(args, "--json") || strings.HasPrefix(l, "#") {
			break
		}
	}
	p.discardRest()
	if c := p.stop(t); c == -1 {
		t.FailNow()
	} else if c != 0 {
		t.Fatalf("demo %v exited %d; stderr:\n%s", args, c, p.stderr.String())
	}
	return out.String()
}

// TestDemoJSONCarriesEnv runs the demo with --env, then on the same data
// with --json, and checks that the JSON object holds every value the
// export lines set, under the key docs/sandbox.md names, and nothing but
// the documented keys. Only the ports differ between the two runs.
func TestDemoJSONCarriesEnv(t *testing.T) {
	dir := t.TempDir()
	envOut := demoOutput(t, dir, "--env")
	jsonOut := demoOutput(t, dir, "--json")

	env := map[string]string{}
	var names []string
	export := regexp.MustCompile(`^export (INSTORE_[A-Z_]+)='([^']*)'$`)
	lines := strings.Split(strings.TrimSuffix(envOut, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		m := export.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("demo --env line %q is not an export line", l)
		}
		env[m[1]] = m[2]
		names = append(names, m[1])
	}
	if want := "# instore demo is running (data in " + dir + "); Ctrl-C stops it."; lines[len(lines)-1] != want {
		t.Errorf("demo --env last line = %q, want %q", lines[len(lines)-1], want)
	}

	// The JSON object: exactly the documented keys, in order.
	var obj map[string]json.RawMessage
	must(t, json.Unmarshal([]byte(jsonOut), &obj))
	keys := apitest.ObjectKeys(t, []byte(jsonOut))
	documented := "onlineApiBaseUrl accessApiBaseUrl terminalGatewayUrl consoleUrl opsUrl subscriptionKey accessToken clientId clientSecret " +
		"accessSubscriptionKey accessAccessToken accessClientId accessClientSecret customerId merchantId currency terminals dataDir"
	if got := strings.Join(keys, " "); got != documented {
		t.Errorf("demo --json keys = %s\nwant %s", got, documented)
	}
	// key reads a key of the object; terminals[0].terminalId the first
	// terminal's.
	key := func(k string) string {
		if first, ok := strings.CutPrefix(k, "terminals[0]."); ok {
			var ts []map[string]string
			must(t, json.Unmarshal(obj["terminals"], &ts))
			if len(ts) == 0 {
				return ""
			}
			return ts[0][first]
		}
		var s string
		if err := json.Unmarshal(obj[k], &s); err != nil {
			t.Errorf("demo --json %s = %s: %v", k, obj[k], err)
		}
		return s
	}
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	// The documented correspondence, variable by variable.
	want := map[string]string{
		"INSTORE_ONLINE_API_URL": "onlineApiBaseUrl", "INSTORE_SUBSCRIPTION_KEY": "subscriptionKey",
		"INSTORE_ACCESS_TOKEN": "accessToken", "INSTORE_CLIENT_ID": "clientId", "INSTORE_CLIENT_SECRET": "clientSecret",
		"INSTORE_TERMINAL_ID": "terminals[0].terminalId", "INSTORE_CURRENCY": "currency",
		"INSTORE_ACCESS_API_URL": "accessApiBaseUrl", "INSTORE_ACCESS_API_SUBSCRIPTION_KEY": "accessSubscriptionKey",
		"INSTORE_ACCESS_API_TOKEN": "accessAccessToken", "INSTORE_ACCESS_API_CLIENT_ID": "accessClientId",
		"INSTORE_ACCESS_API_CLIENT_SECRET": "accessClientSecret", "INSTORE_CUSTOMER_ID": "customerId", "INSTORE_MERCHANT_ID": "merchantId",
	}
	for _, v := range demoVars {
		if want[v.name] != v.key {
			t.Errorf("demoVars maps %s to %s, the documentation to %q", v.name, v.key, want[v.name])
		}
	}
	if len(names) != len(want) {
		t.Errorf("demo --env sets %d variables %v, want the %d documented", len(names), names, len(want))
	}
	for _, name := range names {
		k, ok := want[name]
		if !ok {
			t.Errorf("demo --env sets %s, which has no documented --json key", name)
			continue
		}
		got, envValue := key(k), env[name]
		if strings.HasSuffix(k, "Url") {
			got, envValue = port.ReplaceAllString(got, "127.0.0.1:PORT"), port.ReplaceAllString(envValue, "127.0.0.1:PORT")
		}
		if got == "" || got != envValue {
			t.Errorf("demo --json %s = %q, demo --env %s = %q; want the same", k, got, name, envValue)
		}
	}
	if key("currency") != "SEK" || key("dataDir") != dir || !strings.HasPrefix(key("opsUrl"), "http://127.0.0.1:") {
		t.Errorf("demo --json currency %q, dataDir %q, opsUrl %q; want SEK, %s and the ops listener", key("currency"), key("dataDir"), key("opsUrl"), dir)
	}
}

package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/server"
)

// TestNoPrimaryAnswers503: with its PostgreSQL stopped (a private one: no
// primary reachable, as during a failover) the service answers every
// request that needs the database 503 with Retry-After and a problem body,
// never 500, and /readyz says why; once the database is back it serves
// again without a restart.
func TestNoPrimaryAnswers503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL")
	}
	pg := pgtest.Private(t)
	e := start(t, func(c *server.Config) { c.DatabaseURL = pg.URL })
	purchase := func() (*http.Response, []byte) {
		return e.plain(t, "POST", e.online+"/in-store/api/v1/purchase", `{"terminalId":"trm_none","amount":100,"currency":"SEK"}`,
			map[string]string{"Idempotency-Key": "k-503"})
	}
	status := func() (*http.Response, []byte) {
		return e.plain(t, "GET", e.online+"/in-store/api/v1/transaction/tx_none", "", nil)
	}
	ready := func() (*http.Response, []byte) { return e.plain(t, "GET", e.srv.URL("ops")+"/readyz", "", nil) }

	if resp, body := ready(); resp.StatusCode != 200 {
		t.Fatalf("/readyz with the database up = %d %s", resp.StatusCode, body)
	}
	pg.Stop(t)
	for name, call := range map[string]func() (*http.Response, []byte){"POST /purchase": purchase, "GET /transaction": status, "/readyz": ready} {
		for range 2 { // the pool's broken connections, then no connection at all
			resp, body := call()
			var p struct {
				Type, Detail string
				Status       int
			}
			json.Unmarshal(body, &p)
			if resp.StatusCode != 503 || p.Status != 503 || p.Type != "urn:instore:problem:unavailable" ||
				resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s with no primary: %d (Retry-After %q, %s) %s, want a 503 problem with Retry-After", name, resp.StatusCode,
					resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
			}
			if name == "/readyz" && !strings.Contains(p.Detail, "database: no primary reachable") {
				t.Errorf("/readyz with no primary: detail %q, want it to say database: no primary reachable", p.Detail)
			}
		}
	}
	if strings.Contains(e.logs.String(), `"status":500`) {
		t.Errorf("a request was answered 500 while no primary was reachable:\n%s", e.logs.String())
	}

	pg.Start(t)
	if resp, body := ready(); resp.StatusCode != 200 {
		t.Errorf("/readyz once the database is back = %d %s", resp.StatusCode, body)
	}
	if resp, body := status(); resp.StatusCode != 404 {
		t.Errorf("GET of an unknown transaction once the database is back = %d %s, want 404", resp.StatusCode, body)
	}
}

// plain sends a request with the env's credentials, unvalidated: a 503 is
// the answer any operation may give, which the OpenAPI documents once, in
// its table of problems.
func (e *env) plain(t *testing.T, method, u, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	must(t, err)
	req.Header = headers(e.token, e.key, body != "")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return send(t, http.DefaultClient, req)
}

package server_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
)

// The tests of this file send what a client must not be able to get past
// validation (issue 12, item 5) over HTTP to a real server, on SQLite and
// on PostgreSQL, whose text type refuses NUL and bytes that are not UTF-8
// (and so answered 500 where SQLite stored them): each is refused with a
// 4xx before anything is stored.

// rows counts the rows of the server's tables with a connection of its
// own, so that "nothing was stored" does not rest on the code under test.
type rows struct{ db *sql.DB }

// counting returns a mutate that also opens rows on the store mutate
// selects, once the server's configuration is complete.
func counting(t *testing.T, mutate func(*server.Config), r *rows) func(*server.Config) {
	return func(c *server.Config) {
		mutate(c)
		driver, dsn := "pgx", c.DatabaseURL
		if dsn == "" {
			driver, dsn = "sqlite", filepath.Join(c.DataDir, server.DatabaseFile)
		}
		db, err := sql.Open(driver, dsn)
		must(t, err)
		t.Cleanup(func() { db.Close() })
		r.db = db
	}
}

// count returns the number of rows of each table, by table.
func (r *rows) count(t *testing.T, tables ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range tables {
		var n int
		must(t, r.db.QueryRow("SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	return out
}

// stored are the tables a refused request must leave as they were.
var stored = []string{"transactions", "print_jobs", "terminals", "updates", "devices"}

// raw sends a request with the body and headers exactly as given.
func (e *env) raw(t *testing.T, method, u string, body []byte, hdr http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	must(t, err)
	if body == nil {
		req.Body = http.NoBody
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	client := e.client
	switch {
	case strings.HasPrefix(u, e.access):
		client = e.accessClient
	case !strings.HasPrefix(u, e.online):
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return reply{resp, b.Bytes()}
}

// headers are credentials (token, key) as request headers, plus a JSON
// content type when json is set.
func headers(token, key string, json bool) http.Header {
	h := http.Header{"Authorization": {"Bearer " + token}, "Ocp-Apim-Subscription-Key": {key}}
	if json {
		h["Content-Type"] = []string{"application/json"}
	}
	return h
}

// fields returns the fields of a problem's errors.
func (p problem) fields() []string {
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

// TestStrictBodies: duplicate names, names in another case, text that is
// not UTF-8 and control characters in free text are 400 with a JSON
// pointer, and nothing is stored. Before, a duplicate amount charged the
// last one, TERMINALID chose the terminal, and a tab in ecrReference was
// stored, refused by the protocol encoder, answered 409 WP23 with the
// terminal online and left a TECHNICAL_ERROR transaction; NUL and invalid
// UTF-8 answered 500 on PostgreSQL.
func TestStrictBodies(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		var db rows
		s := startSandbox(t, counting(t, mutate, &db))
		term, other := s.terminals[0], s.terminals[1]
		online := func(path string) string { return s.online + "/in-store/api/v1" + path }
		tests := []struct {
			name, url, body string
			hdr             http.Header
			field           string
		}{
			{"duplicate amount", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","amount":99999}`, nil, "/amount"},
			{"duplicate terminalId", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","terminalId":"` + other + `"}`, nil, "/terminalId"},
			{"case variant beside the name", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","TERMINALID":"` + other + `"}`, nil, "/TERMINALID"},
			{"case variant alone", online("/purchase"), `{"TerminalId":"` + term + `","amount":100,"currency":"SEK"}`, nil, "/TerminalId"},
			{"invalid UTF-8 in ecrReference", online("/purchase"), "{\"terminalId\":\"" + term + "\",\"amount\":100,\"currency\":\"SEK\",\"ecrReference\":\"A\xff1\"}", nil, "/ecrReference"},
			{"lone surrogate in ecrReference", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"A\ud8001"}`, nil, ""},
			{"tab in ecrReference", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"A\t1"}`, nil, "/ecrReference"},
			{"NUL in ecrReference", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"A\u00001"}`, nil, "/ecrReference"},
			{"newline in ecrReference", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"A\n"}`, nil, "/ecrReference"},
			{"C1 control in ecrReference", online("/purchase"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"A\u0085"}`, nil, "/ecrReference"},
			{"NUL in a refund's ecrReference", online("/refund"), `{"terminalId":"` + term + `","amount":100,"currency":"SEK","ecrReference":"\u0000"}`, nil, "/ecrReference"},
			{"invalid UTF-8 in currency", online("/refund"), "{\"terminalId\":\"" + term + "\",\"amount\":100,\"currency\":\"SE\xc3\"}", nil, "/currency"},
			{"tab in a reversal's ecrReference", online("/reversal"), `{"onlineAPIRefId":"txn_1","ecrReference":"\t"}`, nil, "/ecrReference"},
			{"NUL in terminalId", online("/cancel"), `{"terminalId":"1000\u00000"}`, nil, "/terminalId"},
			{"tab in a print line", online("/print"), `{"terminalId":"` + term + `","lines":["Total\t12.50"]}`, nil, "/lines/0"},
			{"NUL in a print line", online("/print"), `{"terminalId":"` + term + `","lines":["ok","\u0000"]}`, nil, "/lines/1"},
			{"invalid UTF-8 in a print line", online("/print"), "{\"terminalId\":\"" + term + "\",\"lines\":[\"\xe2\x82\"]}", nil, "/lines/0"},
			{"duplicate linkCode", online("/terminal/link"), `{"terminalId":"` + term + `","linkCode":"123456","linkCode":"654321"}`, nil, "/linkCode"},
			{"NUL in the sandbox's install reason", s.online + "/sandbox/v1/terminals/" + term + "/next-install", `{"fail":true,"reason":"disk\u0000full"}`, nil, "/reason"},
			{"Access API: NUL in customerId", s.access + "/getTerminalId", `{"customerId":"` + s.customer.ID + `\u0000"}`, headers(s.accessToken, s.accessKey, true), "/customerId"},
			{"Access API: duplicate customerId", s.access + "/getTerminalId", `{"customerId":"` + s.customer.ID + `","customerId":"cus_other"}`, headers(s.accessToken, s.accessKey, true), "/customerId"},
			{"Access API: invalid UTF-8 in model", s.access + "/getTerminalId", "{\"customerId\":\"" + s.customer.ID + "\",\"model\":\"pin\xffpad\"}", headers(s.accessToken, s.accessKey, true), "/model"},
			{"Access API: NUL in packageId", s.access + "/terminal/createUpdate", `{"terminalId":"` + term + `","packageId":"pkg\u0000"}`, headers(s.accessToken, s.accessKey, true), "/packageId"},
		}
		before := db.count(t, stored...)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				hdr := tt.hdr
				if hdr == nil {
					hdr = headers(s.token, s.key, true)
				}
				p := s.raw(t, "POST", tt.url, []byte(tt.body), hdr).problem(t, 400, "validation")
				if diff := cmp.Diff([]string{tt.field}, p.fields()); diff != "" {
					t.Errorf("POST %s %q: fields (-want +got):\n%s", tt.url, tt.body, diff)
				}
				if diff := cmp.Diff(before, db.count(t, stored...)); diff != "" {
					t.Errorf("POST %s %q stored rows (-before +after):\n%s", tt.url, tt.body, diff)
				}
			})
		}
		// The terminal is idle, and a purchase with a clean reference
		// goes through and is counted.
		var v instore.TerminalView
		must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/terminal/"+term).body, &v))
		if !v.Online || v.Busy {
			t.Errorf("terminal after the refused requests = %+v, want online and idle", v)
		}
		tx := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 100, "currency": "SEK", "ecrReference": "A 1 – é"}, nil).tx(t, 201)
		s.final(t, tx.OnlineAPIRefID)
		if n := db.count(t, "transactions")["transactions"]; n != before["transactions"]+1 {
			t.Errorf("transactions after one purchase = %d, want %d", n, before["transactions"]+1)
		}
	})
}

// TestStrictQueriesAndCredentials: NUL, bytes that are not UTF-8 and
// control characters in query parameters, path values, OAuth client ids
// and a device's serial number are refused before the store (they
// answered 500, 503 on the gateway, on PostgreSQL), and a credential
// header sent twice is 400.
func TestStrictQueriesAndCredentials(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		var db rows
		e := start(t, counting(t, mutate, &db))
		_, deviceSecret := e.provision(t, "SN-STRICT-1")
		before := db.count(t, stored...)
		api := e.online + "/in-store/api/v1"
		gets := []struct {
			name, url string
			hdr       http.Header
			status    int
			code      string
		}{
			{"NUL in ecrReference", api + "/transactions?ecrReference=A%001", nil, 400, "validation"},
			{"invalid UTF-8 in ecrReference", api + "/transactions?ecrReference=A%FF", nil, 400, "validation"},
			{"tab in ecrReference", api + "/transactions?ecrReference=A%091", nil, 400, "validation"},
			{"NUL in terminalId", api + "/transactions?terminalId=1000%000", nil, 400, "validation"},
			{"NUL in cursor", api + "/transactions?cursor=%00", nil, 400, "validation"},
			{"ecrReference twice", api + "/transactions?ecrReference=A-1&ecrReference=B-2", nil, 400, "validation"},
			{"wait twice", api + "/transaction/txn_1?wait=0&wait=60", nil, 400, "validation"},
			{"NUL in a path onlineAPIRefId", api + "/transaction/txn%00", nil, 404, "WP04"},
			{"invalid UTF-8 in a path printId", api + "/print/prt%FF", nil, 404, "not-found"},
			{"NUL in a path terminalId", api + "/terminal/1000%000", nil, 400, "validation"},
			{"Access API: NUL in customerId", e.access + "/terminal/getPackages/cus%00/countertop", headers(e.accessToken, e.accessKey, false), 403, "forbidden"},
			{"Access API: invalid UTF-8 in model", e.access + "/terminal/getPackages/" + e.customer.ID + "/pin%FFpad", headers(e.accessToken, e.accessKey, false), 200, ""},
			{"two Authorization headers", api + "/metadata", http.Header{"Authorization": {"Bearer " + e.token, "Bearer " + e.token}, "Ocp-Apim-Subscription-Key": {e.key}}, 400, "validation"},
			{"two subscription keys", api + "/terminals", http.Header{"Authorization": {"Bearer " + e.token}, "Ocp-Apim-Subscription-Key": {"isk_other", e.key}}, 400, "validation"},
			{"Access API: two subscription keys", e.access + "/terminal/getPackages/" + e.customer.ID + "/countertop", http.Header{"Authorization": {"Bearer " + e.accessToken}, "Ocp-Apim-Subscription-Key": {e.accessKey, e.accessKey}}, 400, "validation"},
		}
		for _, tt := range gets {
			t.Run(tt.name, func(t *testing.T) {
				hdr := tt.hdr
				if hdr == nil {
					hdr = headers(e.token, e.key, false)
				}
				r := e.raw(t, "GET", tt.url, nil, hdr)
				if tt.code == "" {
					if r.resp.StatusCode != tt.status {
						t.Fatalf("GET %s = %d %s, want %d", tt.url, r.resp.StatusCode, r.body, tt.status)
					}
					return
				}
				r.problem(t, tt.status, tt.code)
			})
		}
		tokenForm := func(id string) []byte {
			return []byte(url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {e.clientSecret}}.Encode())
		}
		form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		basic := func(id string) http.Header {
			h := form.Clone()
			h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(id+":"+e.clientSecret)))
			return h
		}
		tokens := []struct {
			name, base string
			body       []byte
			hdr        http.Header
		}{
			{"NUL in client_id", e.online, tokenForm("cli\x00"), form},
			{"invalid UTF-8 in client_id", e.online, tokenForm("cli\xff"), form},
			{"NUL in a Basic client id", e.online, []byte("grant_type=client_credentials"), basic("cli%00")},
			{"raw NUL in a Basic client id", e.online, []byte("grant_type=client_credentials"), basic("cli\x00")},
			{"client_id twice", e.online, []byte("grant_type=client_credentials&client_id=" + e.clientID + "&client_id=x&client_secret=" + url.QueryEscape(e.clientSecret)), form},
			{"Access API: NUL in client_id", e.access, tokenForm("cli\x00"), form},
		}
		for _, tt := range tokens {
			t.Run(tt.name, func(t *testing.T) {
				r := e.raw(t, "POST", tt.base+"/oauth2/token", tt.body, tt.hdr)
				r.problem(t, 400, "validation")
				var oauth struct {
					Error string `json:"error"`
				}
				json.Unmarshal(r.body, &oauth)
				if oauth.Error != "invalid_request" {
					t.Errorf("error = %q, want invalid_request: %s", oauth.Error, r.body)
				}
			})
		}
		// The gateway: a serial number no device can have is the same 401
		// as a wrong secret, not a 503 the device would retry.
		connect := "http" + strings.TrimPrefix(e.srv.URL("terminal"), "ws") + protocol.Path
		deviceAuth := func(serial, secret string) reply {
			req, err := http.NewRequest("GET", connect, nil)
			must(t, err)
			req.SetBasicAuth(serial, secret)
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			return reply{resp, b.Bytes()}
		}
		unauthorized := func(r reply) string {
			t.Helper()
			var p map[string]any
			must(t, json.Unmarshal(r.body, &p))
			delete(p, "requestId")
			return fmt.Sprintf("%d %s %v", r.resp.StatusCode, r.resp.Header.Get("WWW-Authenticate"), p)
		}
		wrong := unauthorized(deviceAuth("SN-STRICT-1", "ids_wrong"))
		if !strings.HasPrefix(wrong, "401 ") {
			t.Fatalf("wrong device secret = %s, want 401", wrong)
		}
		for _, serial := range []string{"SN-STRICT-1\x00", "SN\xff", "SN STRICT", strings.Repeat("S", 65)} {
			if got := unauthorized(deviceAuth(serial, deviceSecret)); got != wrong {
				t.Errorf("device serial %q = %s, want the wrong secret's %s", serial, got, wrong)
			}
		}
		if diff := cmp.Diff(before, db.count(t, stored...)); diff != "" {
			t.Errorf("stored rows (-before +after):\n%s", diff)
		}
	})
}

// TestStrictCursor: a cursor is the service's, for the merchant and the
// query it was issued for. Before, any base64url JSON with a ref-shaped
// id passed.
func TestStrictCursor(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		s := startSandbox(t, mutate)
		var made []string
		for range 3 {
			tx := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": s.terminals[0], "amount": 1000, "currency": "SEK", "ecrReference": "C-1"}, nil).tx(t, 201)
			s.final(t, tx.OnlineAPIRefID)
			made = append(made, tx.OnlineAPIRefID)
		}
		list := "/in-store/api/v1/transactions?"
		page := func(r reply) ([]string, string) {
			t.Helper()
			if r.resp.StatusCode != 200 {
				t.Fatalf("listing = %d %s", r.resp.StatusCode, r.body)
			}
			return listPage(t, r.body)
		}
		first, cursor := page(s.get(t, list+url.Values{"ecrReference": {"C-1"}, "limit": {"1"}}.Encode()))
		if cursor == "" || fmt.Sprint(first) != fmt.Sprint([]string{made[2]}) {
			t.Fatalf("first page = %v, cursor %q", first, cursor)
		}

		// Another merchant of the same customer, with its own credentials.
		token2, key2 := s.otherMerchant(t)

		_, signature, _ := strings.Cut(cursor, ".")
		forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":` + fmt.Sprint(int64(1)<<60) + `,"i":"` + made[2] + `"}`))
		bad := []struct {
			name string
			q    url.Values
			hdr  http.Header
		}{
			{"forged", url.Values{"ecrReference": {"C-1"}, "cursor": {forged}}, nil},
			{"signature of another cursor", url.Values{"ecrReference": {"C-1"}, "cursor": {forged + "." + signature}}, nil},
			{"another merchant's", url.Values{"ecrReference": {"C-1"}, "cursor": {cursor}}, headers(token2, key2, false)},
			{"another filter's", url.Values{"ecrReference": {"C-2"}, "cursor": {cursor}}, nil},
			{"without the filter", url.Values{"cursor": {cursor}}, nil},
		}
		for _, tt := range bad {
			t.Run(tt.name, func(t *testing.T) {
				hdr := tt.hdr
				if hdr == nil {
					hdr = headers(s.token, s.key, false)
				}
				p := s.raw(t, "GET", s.online+list+tt.q.Encode(), nil, hdr).problem(t, 400, "validation")
				if diff := cmp.Diff([]string{"cursor"}, p.fields()); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
			})
		}
		rest, next := page(s.get(t, list+url.Values{"ecrReference": {"C-1"}, "limit": {"5"}, "cursor": {cursor}}.Encode()))
		if fmt.Sprint(rest) != fmt.Sprint([]string{made[1], made[0]}) || next != "" {
			t.Errorf("the next page = %v (next %q), want %v", rest, next, []string{made[1], made[0]})
		}
	})
}

// TestRateLimitBeforeTheStore: requests with a valid token and made-up
// subscription keys (each a miss of the credentials cache) are limited per
// API client before authentication reads the store. Before, the limit was
// taken after authentication, per valid key: made-up keys were never
// limited and each cost store reads (about 12,000 a second).
func TestRateLimitBeforeTheStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		counter := &apitest.CountingStore{}
		const burst = 5
		e := startWrapped(t, func(c *server.Config) {
			mutate(c)
			// One request in 1000 s after the burst: none refills while
			// the test runs.
			c.RateLimit, c.RateBurst = 0.001, burst
		}, func(st instore.Store) instore.Store { counter.Store = st; return counter })
		metadata := e.online + "/in-store/api/v1/metadata"
		var limited int
		var readsAtLimit int64 = -1
		for i := range 100 {
			r := e.raw(t, "GET", metadata, nil, headers(e.token, fmt.Sprintf("isk_made_up_%d", i), false))
			switch r.resp.StatusCode {
			case 401:
				if readsAtLimit >= 0 {
					t.Fatalf("request %d = 401 after the limit was reached", i)
				}
			case 429:
				if r.resp.Header.Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
				if readsAtLimit < 0 {
					readsAtLimit = counter.AuthReads.Load()
				}
				limited++
			default:
				t.Fatalf("request %d = %d %s, want 401 or 429", i, r.resp.StatusCode, r.body)
			}
		}
		if limited != 100-burst {
			t.Fatalf("limited = %d of 100, want %d", limited, 100-burst)
		}
		if n := counter.AuthReads.Load(); n != readsAtLimit {
			t.Errorf("store reads of the %d limited requests = %d, want 0", limited, n-readsAtLimit)
		}
	})
}

// TestTokenEndpointLimitedPerPeer: the token endpoint reads the store for
// any well-formed client_id before it knows the client, so it is limited
// per peer address, before that read.
func TestTokenEndpointLimitedPerPeer(t *testing.T) {
	counter := &apitest.CountingStore{}
	const burst = 5
	e := startWrapped(t, func(c *server.Config) {
		c.RateLimit, c.RateBurst = 0.001, burst
	}, func(st instore.Store) instore.Store { counter.Store = st; return counter })
	// start took two tokens of this peer's burst (the Online API's and the
	// Access API's), so burst-2 made-up clients are looked up, then none.
	var limited int
	var readsAtLimit int64 = -1
	for i := range 20 {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {fmt.Sprintf("cli_made_up_%d", i)}, "client_secret": {"x"}}
		resp, body := e.do(t, "POST", e.online+"/oauth2/token", strings.NewReader(form.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		switch resp.StatusCode {
		case 401:
			if readsAtLimit >= 0 {
				t.Fatalf("token request %d = 401 after the limit was reached", i)
			}
		case 429:
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			if readsAtLimit < 0 {
				readsAtLimit = counter.AuthReads.Load()
			}
			limited++
		default:
			t.Fatalf("token request %d = %d %s, want 401 or 429", i, resp.StatusCode, body)
		}
	}
	if want := 20 - (burst - 2); limited != want {
		t.Errorf("limited = %d of 20, want %d", limited, want)
	}
	if n := counter.AuthReads.Load(); n != readsAtLimit {
		t.Errorf("store reads of the %d limited token requests = %d, want 0", limited, n-readsAtLimit)
	}
}

// TestStrictEveryPathValue sends, to every operation of
// api/online-api.yaml, each of its path values and query parameters in
// turn as text PostgreSQL's text type refuses (NUL, bytes that are not
// UTF-8) or that is no identifier's shape, the others valid; a POST also
// with an Idempotency-Key, whose middleware stores the request's path.
// Each answer must be a 4xx problem (or, for a query parameter the
// operation ignores, a success): before, a webhookId, a deliveryId, the
// confirm's onlineAPIRefId and a keyed request's path with such bytes
// answered 500 on PostgreSQL, where SQLite answered 404.
func TestStrictEveryPathValue(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		s := startSandbox(t, mutate)
		var wh instore.WebhookWire
		s.post(t, "/in-store/api/v1/webhooks", map[string]any{"url": "https://example.com/hook"}, nil).decode(t, 201, &wh)
		ref := s.purchase(t, s.terminals[0], 100).tx(t, 201).OnlineAPIRefID
		s.final(t, ref)
		good := map[string]string{
			"terminalId": s.terminals[0], "webhookId": wh.WebhookID, "onlineAPIRefId": ref,
			"deliveryId": "dlv_1", "batchId": "bat_1", "printId": "prt_1",
		}
		prefix := map[string]string{"webhookId": "wh_", "onlineAPIRefId": "txn_", "deliveryId": "dlv_", "batchId": "bat_", "printId": "prt_"}
		bad := func(name string) []string {
			p := prefix[name]
			return []string{p + "%FF", p + "%00", p + "a%00b", p + "%C3%28", p + "%01", p + "..%2F..%2Fmetadata"}
		}
		doc := apitest.NewValidator(t, api.OnlineYAML).Doc()
		paths := doc.Paths.InMatchingOrder()
		sort.Strings(paths)
		client := &http.Client{Timeout: 15e9}
		key := 0
		send := func(t *testing.T, method, u string) {
			t.Helper()
			var body *strings.Reader
			hdr := s.auth(s.token, s.key)
			if method == "POST" || method == "PATCH" || method == "PUT" {
				body = strings.NewReader("{}")
				hdr["Content-Type"] = "application/json"
			} else {
				body = strings.NewReader("")
			}
			for _, keyed := range []bool{false, true} {
				if keyed && method != "POST" {
					continue
				}
				req, err := http.NewRequest(method, u, body)
				must(t, err)
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				if keyed {
					key++
					req.Header.Set("Idempotency-Key", fmt.Sprintf("strict-path-%d", key))
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, u, err)
				}
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					t.Errorf("%s %s (keyed %v) = %d, want no 5xx", method, u, keyed, resp.StatusCode)
				}
				body.Seek(0, 0)
			}
		}
		n := 0
		for _, path := range paths {
			item := doc.Paths.Value(path)
			base := s.online + path
			for name, v := range good {
				base = strings.ReplaceAll(base, "{"+name+"}", v)
			}
			for method, op := range item.Operations() {
				if path == "/oauth2/token" || strings.HasSuffix(path, "/events/stream") && method == "GET" {
					continue // the token form and the stream are checked in TestStrictQueriesAndCredentials and TestStrictCursor
				}
				for _, p := range append(item.Parameters, op.Parameters...) {
					name := p.Value.Name
					switch p.Value.In {
					case "path":
						if _, ok := good[name]; !ok {
							t.Fatalf("%s: no valid value for the path parameter %s", path, name)
						}
						for _, v := range bad(name) {
							send(t, method, strings.Replace(base, "/"+good[name], "/"+v, 1))
							n++
						}
					case "query":
						for _, v := range bad(name) {
							send(t, method, base+"?"+name+"="+v)
							n++
						}
					}
				}
			}
		}
		if n < 100 {
			t.Fatalf("only %d requests sent: the document's paths were not read", n)
		}
	})
}

// TestHeaderBlockLimit: a request line and headers of 16 KiB in all (the
// documented limit, docs/decisions.md) are read, one byte more is 431:
// net/http reads 4096 bytes past its MaxHeaderBytes, and 16 KiB set there
// let about 20 KiB through (found by the black-box review).
func TestHeaderBlockLimit(t *testing.T) {
	e := start(t, nil)
	addr := strings.TrimPrefix(e.online, "http://")
	status := func(block int) int {
		t.Helper()
		head := "GET /in-store/api/v1/terminals HTTP/1.1\r\nHost: x\r\nX-Fill: "
		const tail = "\r\n\r\n"
		req := head + strings.Repeat("a", block-len(head)-len(tail)) + tail
		if len(req) != block {
			t.Fatalf("built %d bytes, want %d", len(req), block)
		}
		c, err := net.Dial("tcp", addr)
		must(t, err)
		defer c.Close()
		must(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Write([]byte(req))
		must(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(16 << 10); got == http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header block of 16384 bytes = %d, want it read (401 without credentials)", got)
	}
	if got := status(16<<10 + 1); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header block of 16385 bytes = %d, want 431", got)
	}
}

package server_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/server"
)

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

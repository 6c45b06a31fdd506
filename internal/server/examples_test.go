package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
)

// TestTokenExamplesMatchAnswers sends the requests the token endpoint's
// error examples (and the shared 401's) describe and compares each example with the real answer,
// member by member (the request id aside, which is new each time): a
// generated client's tests built from the examples see what the server
// sends.
func TestTokenExamplesMatchAnswers(t *testing.T) {
	e := start(t, nil)
	doc := apitest.NewValidator(t, api.OnlineYAML).Doc()
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for name, body := range map[string]url.Values{
		"TokenBadRequest":   {"grant_type": {"password"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}},
		"TokenUnauthorized": {"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {"wrong" + e.clientSecret}},
		"Unauthorized":      nil, // GET /metadata with a wrong token
	} {
		resp := doc.Components.Responses[name]
		if resp == nil || resp.Value == nil {
			t.Fatalf("no response %s in the document", name)
		}
		mt := resp.Value.Content.Get("application/problem+json")
		if mt == nil || mt.Example == nil {
			t.Fatalf("%s has no example", name)
		}
		raw, err := json.Marshal(mt.Example)
		must(t, err)
		var want, got map[string]any
		must(t, json.Unmarshal(raw, &want))
		var r *http.Response
		var answer []byte
		if body == nil {
			r, answer = e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token+"x", e.key))
		} else {
			r, answer = e.do(t, "POST", e.online+"/oauth2/token", strings.NewReader(body.Encode()), form)
		}
		must(t, json.Unmarshal(answer, &got))
		if r.Header.Get("X-Request-Id") == "" || got["requestId"] != r.Header.Get("X-Request-Id") {
			t.Errorf("%s: requestId %v, header %q", name, got["requestId"], r.Header.Get("X-Request-Id"))
		}
		delete(want, "requestId")
		delete(got, "requestId")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s example differs from the answer (-example +answer):\n%s", name, diff)
		}
	}
}

// TestTippedExampleMatchesAnswer: the OpenAPI example of a tipped
// purchase (GET /transaction/{onlineAPIRefId}, "tipped") is what the
// sandbox answers for the same request, member by member; what differs by
// run (the reference, the terminal, times, the card, the version) is
// masked on both sides.
func TestTippedExampleMatchesAnswer(t *testing.T) {
	s := startSandbox(t)
	doc := apitest.NewValidator(t, api.OnlineYAML).Doc()
	op := doc.Paths.Find("/in-store/api/v1/transaction/{onlineAPIRefId}").Get
	ex := op.Responses.Status(200).Value.Content.Get("application/json").Examples["tipped"]
	if ex == nil || ex.Value == nil {
		t.Fatal("GET /transaction/{onlineAPIRefId} has no example tipped")
	}
	created := s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": s.terminals[0], "amount": 12500, "vatAmount": 2500,
		"currency": "SEK", "ecrReference": "TABLE-12", "printReceipt": true, "tip": map[string]any{"mode": "PROMPT", "suggestions": []int{10, 15, 20}}}, nil).tx(t, 201)
	s.final(t, created.OnlineAPIRefID)
	answer := s.get(t, "/in-store/api/v1/transaction/"+created.OnlineAPIRefID)
	raw, err := json.Marshal(ex.Value.Value)
	must(t, err)
	if diff := cmp.Diff(masked(t, raw), masked(t, answer.body)); diff != "" {
		t.Errorf("the tipped example differs from the answer (-example +answer):\n%s\nanswer: %s", diff, answer.body)
	}
}

// varying are what differs from run to run in a transaction's JSON.
var varying = regexp.MustCompile(`txn_[0-9a-z]+|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?Z?( UTC)?|[0-9*]{6}\*{6}\d{4}|\*{12}\d{4}|^Auth code +[0-9A-Z]{6}$|^Entry mode +[A-Z_]+$`)

// masked decodes a transaction's JSON with what varies by run masked.
func masked(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	must(t, json.Unmarshal(raw, &m))
	// The virtual terminal draws the card: its brand and entry mode, in
	// the result and on the receipt, vary too.
	var card []string
	if r, ok := m["result"].(map[string]any); ok {
		for _, k := range []string{"cardBrand", "entryMode"} {
			if v, ok := r[k].(string); ok && v != "" {
				card = append(card, v)
			}
		}
	}
	var mask func(v any) any
	mask = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "version", "terminalId", "authorizationCode":
					v[k] = "*"
				default:
					v[k] = mask(x)
				}
			}
		case []any:
			for i, x := range v {
				v[i] = mask(x)
			}
		case string:
			v = varying.ReplaceAllString(v, "*")
			for _, c := range card {
				v = strings.ReplaceAll(v, c, "*")
			}
			return v
		}
		return v
	}
	mask(m)
	return m
}

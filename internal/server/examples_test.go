package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
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

package server_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
)

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

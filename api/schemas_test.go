package api_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

// TestPurchaseRequestSchema checks purchase bodies against their schema:
// what the server takes validates, what it refuses for its shape does not.
func TestPurchaseRequestSchema(t *testing.T) {
	p := schema(t, loadOnline(t), "PurchaseRequest")
	for text, ok := range map[string]bool{
		`{"terminalId":"10000001","amount":12500,"currency":"SEK"}`: true,
		`{"terminalId":"10000001","amount":30000,"cashbackAmount":10000,"vatAmount":null,"currency":"SEK","paymentMethodId":2,"ecrReference":"A","printReceipt":true,"tip":{"mode":"FIXED","amount":1500}}`: true,
		`{"terminalId":"10000001","amount":0,"currency":"SEK"}`:         false,
		`{"terminalId":"10000001","amount":100000000,"currency":"SEK"}`: false,
		`{"terminalId":"1000001","amount":1,"currency":"SEK"}`:          false,
		`{"terminalId":"10000001","amount":1,"currency":"SEK","tip":1}`: false,
		`{"terminalId":"10000001","amount":1}`:                          false,
	} {
		if err := visit(p, text); (err == nil) != ok {
			t.Errorf("PurchaseRequest %s: error %v, want valid %v", text, err, ok)
		}
	}
}

// TestHistoryRequestSchemas checks the bodies of refund, reversal and print
// against their schemas: what the server takes validates, what it refuses
// for its shape does not.
func TestHistoryRequestSchemas(t *testing.T) {
	doc := loadOnline(t)
	for name, cases := range map[string]map[string]bool{
		"RefundRequest": {
			`{"terminalId":"10000001","amount":5000,"currency":"SEK","originalOnlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","ecrReference":"RETURN-1"}`: true,
			`{"terminalId":"10000001","amount":4990,"currency":"SEK","originalOnlineAPIRefId":"txn_01","paymentMethodId":0}`:                                     true,
			`{"terminalId":"10000001","amount":1999,"currency":"SEK"}`:                                                                                           true,
			`{"terminalId":"10000001","amount":1,"currency":"SEK","originalOnlineAPIRefId":null,"paymentMethodId":null,"ecrReference":null}`:                     true,
			`{"terminalId":"10000001","amount":0,"currency":"SEK"}`:                                                                                              false,
			`{"terminalId":"10000001","amount":100000000,"currency":"SEK"}`:                                                                                      false,
			`{"terminalId":"10000001","amount":1,"currency":"sek"}`:                                                                                              false,
			`{"terminalId":"10000001","amount":1,"currency":"SEK","originalOnlineAPIRefId":"txn 1"}`:                                                             false,
			`{"terminalId":"10000001","amount":1,"currency":"SEK","ecrReference":"` + strings.Repeat("x", 65) + `"}`:                                             false,
			`{"terminalId":"10000001","amount":1,"currency":"SEK","cashbackAmount":0}`:                                                                           false,
			`{"amount":1,"currency":"SEK"}`: false,
		},
		"ReversalRequest": {
			`{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01"}`:                         true,
			`{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","ecrReference":"VOID-1"}`: true,
			`{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","ecrReference":null}`:     true,
			`{}`:                    false,
			`{"onlineAPIRefId":""}`: false,
			`{"onlineAPIRefId":"txn_01","terminalId":"10000001"}`: false,
		},
		"PrintRequest": {
			`{"terminalId":"10000001","lines":["Thank you for shopping","","See you soon"]}`:                      true,
			`{"terminalId":"10000001","lines":["Köp 12,50 SEK  😀"]}`:                                              true,
			`{"terminalId":"10000001","onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","copy":"MERCHANT"}`: true,
			`{"terminalId":"10000001","lines":null,"onlineAPIRefId":"txn_01","copy":"CUSTOMER"}`:                  true,
			`{"terminalId":"10000001","lines":["a"],"onlineAPIRefId":null,"copy":null}`:                           true,
			`{"terminalId":"10000001"}`:                                                           false,
			`{"terminalId":"10000001","lines":[]}`:                                                false,
			`{"terminalId":"10000001","lines":["` + strings.Repeat("x", 65) + `"]}`:               false,
			`{"terminalId":"10000001","lines":["ab"]}`:                                           false,
			`{"terminalId":"10000001","lines":["ab"]}`:                                           false,
			`{"terminalId":"10000001","lines":["a"],"copy":"CUSTOMER"}`:                           false,
			`{"terminalId":"10000001","lines":["a"],"onlineAPIRefId":"txn_01","copy":"CUSTOMER"}`: false,
			`{"terminalId":"10000001","onlineAPIRefId":"txn_01"}`:                                 false,
			`{"terminalId":"10000001","onlineAPIRefId":"txn_01","copy":"BOTH"}`:                   false,
			`{"lines":["a"]}`: false,
		},
	} {
		s := schema(t, doc, name)
		for text, ok := range cases {
			if err := visit(s, text); (err == nil) != ok {
				t.Errorf("%s %s: error %v, want valid %v", name, text, err, ok)
			}
		}
	}
	lines := make([]string, instore.MaxPrintLines+1)
	for i := range lines {
		lines[i] = "x"
	}
	p := schema(t, doc, "PrintRequest")
	if err := visit(p, asJSON(t, map[string]any{"terminalId": "10000001", "lines": lines[:instore.MaxPrintLines]})); err != nil {
		t.Errorf("%d lines: %v", instore.MaxPrintLines, err)
	}
	if err := visit(p, asJSON(t, map[string]any{"terminalId": "10000001", "lines": lines})); err == nil {
		t.Errorf("%d lines accepted", len(lines))
	}
}

// TestExamples checks every example of the document against its schema
// (media type examples of requests and responses, components examples where
// they are used) and problem examples against the error vocabulary: status
// as in error.go, and for a service error code the errorId and title of the
// errorCodes list.
func TestExamples(t *testing.T) {
	doc := loadOnline(t)
	md := instore.DefaultMetadata()
	n := 0
	checkValue := func(where string, s *openapi3.Schema, problem bool, v any) {
		n++
		text := asJSON(t, v)
		if err := visit(s, text); err != nil {
			t.Errorf("%s: %v", where, err)
		}
		if !problem {
			return
		}
		var p struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Status  int    `json:"status"`
			ErrorID *int   `json:"errorId"`
		}
		if err := json.Unmarshal([]byte(text), &p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.Type, "urn:instore:problem:")
		if want := instore.HTTPStatus(name); p.Status != want {
			t.Errorf("%s: status %d, want %d", where, p.Status, want)
		}
		if c, ok := md.ErrorCode(name); ok {
			if p.Title != c.Description {
				t.Errorf("%s: title %q, want %q", where, p.Title, c.Description)
			}
			if p.ErrorID == nil || *p.ErrorID != c.ID {
				t.Errorf("%s: errorId is not %d", where, c.ID)
			}
		}
	}
	forEachExample(t, doc, func(where, ct string, s *openapi3.Schema, v any) {
		checkValue(where, s, ct == "application/problem+json", v)
	})
	t.Logf("%d examples checked", n)
	if n < 60 {
		t.Errorf("only %d examples checked; the walk misses some", n)
	}
}

// TestMembers checks schemas against the Go types they document: the
// same JSON members; for a request also that the schema refuses others,
// as the server refuses unknown fields.
func TestMembers(t *testing.T) {
	online, access := loadOnline(t), loadAccess(t)
	for _, tc := range []struct {
		name   string
		doc    *openapi3.T
		closed bool
		types  map[string]reflect.Type
	}{
		{"online requests: what the server decodes", online, true, map[string]reflect.Type{
			"LinkRequest":                      reflect.TypeFor[instore.LinkRequest](),
			"TerminalRequest":                  reflect.TypeFor[instore.TerminalRequest](),
			"CancelRequest":                    reflect.TypeFor[instore.CancelRequest](),
			"TransactionEvent":                 reflect.TypeFor[instore.TransactionEvent](),
			"PurchaseRequest":                  reflect.TypeFor[instore.PurchaseRequest](),
			"RefundRequest":                    reflect.TypeFor[instore.RefundRequest](),
			"ReversalRequest":                  reflect.TypeFor[instore.ReversalRequest](),
			"PrintRequest":                     reflect.TypeFor[instore.PrintRequest](),
			"PreAuthorizationOperationRequest": reflect.TypeFor[instore.PreAuthOpRequest](),
			"ReconcileRequest":                 reflect.TypeFor[instore.ReconcileRequest](),
			"ReconcileLine":                    reflect.TypeFor[instore.ReconcileLine](),
		}},
		{"online wire types: what the handlers encode", online, false, map[string]reflect.Type{
			"Transaction":      reflect.TypeFor[instore.TransactionWire](),
			"PrintJob":         reflect.TypeFor[instore.PrintJobWire](),
			"TransactionEvent": reflect.TypeFor[instore.TransactionEvent](),
			"TerminalView":     reflect.TypeFor[instore.TerminalView](),
			"Batch":            reflect.TypeFor[instore.BatchWire](),
			"BatchItem":        reflect.TypeFor[instore.BatchItemWire](),
			"BatchDifference":  reflect.TypeFor[instore.BatchDifferenceWire](),
			"BatchTotal":       reflect.TypeFor[instore.BatchTotal](),
		}},
		{"access requests: what the server decodes", access, true, map[string]reflect.Type{
			"TerminalIdRequest":   reflect.TypeFor[instore.TerminalIDRequest](),
			"TerminalInfoRequest": reflect.TypeFor[instore.TerminalRequest](),
			"UpdateRequest":       reflect.TypeFor[instore.UpdateRequest](),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, typ := range tc.types {
				s := schema(t, tc.doc, name)
				if diff := cmp.Diff(jsonNames(typ), propertyNames(s)); diff != "" {
					t.Errorf("%s members (-Go +schema):\n%s", name, diff)
				}
				if tc.closed && (s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has) {
					t.Errorf("%s allows additional properties; the server refuses unknown fields", name)
				}
			}
		})
	}
}

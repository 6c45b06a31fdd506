package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

func TestOnlineValidates(t *testing.T) {
	doc := loadOnline(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if !strings.Contains(doc.Info.Description, "/in-store/api/v1") {
		t.Errorf("info.description does not name the base path /in-store/api/v1")
	}
}

func TestOnlinePaths(t *testing.T) {
	doc := loadOnline(t)
	for path, item := range doc.Paths.Map() {
		guarded := strings.HasPrefix(path, "/in-store/api/v1/") || strings.HasPrefix(path, "/sandbox/v1/")
		if path != "/oauth2/token" && !guarded {
			t.Errorf("path %s is neither under /in-store/api/v1 or /sandbox/v1 nor /oauth2/token", path)
		}
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if guarded {
				// Every Online API and sandbox path takes the global
				// security: token and key together.
				if op.Security != nil {
					t.Errorf("%s %s overrides the global security", method, path)
				}
				if op.Responses.Status(401) == nil {
					t.Errorf("%s %s does not document 401", method, path)
				}
			}
		}
	}
	want := openapi3.SecurityRequirements{{"bearerAuth": {}, "subscriptionKey": {}}}
	if diff := cmp.Diff(want, doc.Security); diff != "" {
		t.Errorf("global security (-want +got):\n%s", diff)
	}
}

// TestMetadataExample checks that the documented example is the code lists
// of codes.json, character for character.
func TestMetadataExample(t *testing.T) {
	doc := loadOnline(t)
	item := doc.Paths.Value("/in-store/api/v1/metadata")
	if item == nil || item.Get == nil {
		t.Fatal("GET /in-store/api/v1/metadata is missing")
	}
	mt := item.Get.Responses.Status(200).Value.Content.Get("application/json")
	if mt == nil || mt.Example == nil {
		t.Fatal("metadata 200 application/json has no example")
	}
	raw, err := json.Marshal(mt.Example)
	if err != nil {
		t.Fatal(err)
	}
	var got instore.Metadata
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("example does not decode as Metadata: %v", err)
	}
	if diff := cmp.Diff(instore.DefaultMetadata(), got); diff != "" {
		t.Errorf("metadata example differs from codes.json (-want +got):\n%s", diff)
	}
}

// TestProblemNames checks that the Problem schema documents every problem
// name of error.go with the HTTP status of its table.
func TestProblemNames(t *testing.T) {
	doc := loadOnline(t)
	desc := doc.Components.Schemas["Problem"].Value.Description
	names := []string{
		instore.EUnauthorized, instore.EForbidden, instore.EValidation, instore.ENotFound,
		instore.EMethodNotAllowed, instore.EPayloadTooLarge, instore.EUnsupportedMediaType,
		instore.ERateLimited, instore.EIdempotencyConflict, instore.ENotReversible,
		instore.ELinkCodeInvalid, instore.EConflict, instore.EInternal, instore.EUnavailable,
	}
	md := instore.DefaultMetadata()
	for _, c := range md.ErrorCodes {
		if c.Code != instore.WP36 && c.Code != instore.WP37 {
			names = append(names, c.Code)
		}
	}
	for _, name := range names {
		row := fmt.Sprintf("| `%s` | %d |", name, instore.HTTPStatus(name))
		if !strings.Contains(desc, row) {
			t.Errorf("Problem description lacks the row %q", row)
		}
	}

	// The enumerations a generated client switches on: type lists every
	// problem name the server answers with, errorCode every code that
	// answers a request, reason every Error.Reason.
	props := doc.Components.Schemas["Problem"].Value.Properties
	enum := func(prop string) []string {
		var out []string
		for _, v := range props[prop].Value.Enum {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	var types, codes []string
	for _, n := range instore.ProblemNames() {
		types = append(types, "urn:instore:problem:"+n)
		if _, ok := md.ErrorCode(n); ok {
			codes = append(codes, n)
		}
	}
	slices.Sort(types)
	if diff := cmp.Diff(types, enum("type")); diff != "" {
		t.Errorf("Problem.type enum (-server +schema):\n%s", diff)
	}
	if diff := cmp.Diff(codes, enum("errorCode")); diff != "" {
		t.Errorf("Problem.errorCode enum (-server +schema):\n%s", diff)
	}
	if diff := cmp.Diff([]string{instore.ReasonBatchClose, instore.ReasonUpdate, instore.ReasonTransaction}, enum("reason")); diff != "" {
		t.Errorf("Problem.reason enum (-server +schema):\n%s", diff)
	}
}

// TestDescriptions checks that every property of every schema has a
// description.
func TestDescriptions(t *testing.T) {
	doc := loadOnline(t)
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, s *openapi3.SchemaRef)
	walk = func(where string, s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		for name, p := range s.Value.Properties {
			if p.Value != nil && p.Value.Description == "" && p.Ref == "" {
				t.Errorf("%s: property %s has no description", where, name)
			}
			walk(where+"/"+name, p)
		}
		if s.Value.Items != nil {
			walk(where+"/items", s.Value.Items)
		}
		for i, sub := range s.Value.AllOf {
			walk(fmt.Sprintf("%s/allOf/%d", where, i), sub)
		}
	}
	for name, s := range doc.Components.Schemas {
		walk("#/components/schemas/"+name, s)
	}
	for name, r := range doc.Components.Responses {
		for mt, c := range r.Value.Content {
			walk("#/components/responses/"+name+" "+mt, c.Schema)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, r := range op.Responses.Map() {
				for mt, c := range r.Value.Content {
					walk(fmt.Sprintf("%s %s %s %s", method, path, code, mt), c.Schema)
				}
			}
		}
	}
}

// operations is every operation of the document: method, path and
// operationId, as the route tables of internal/onlineapi register them.
var operations = []struct{ method, path, id string }{
	{"POST", "/oauth2/token", "createToken"},
	{"GET", "/in-store/api/v1/metadata", "getMetadata"},
	{"GET", "/in-store/api/v1/openapi.yaml", "getOpenAPIDocument"},
	{"POST", "/in-store/api/v1/terminal/link", "linkTerminal"},
	{"POST", "/in-store/api/v1/terminal/unlink", "unlinkTerminal"},
	{"GET", "/in-store/api/v1/terminals", "listTerminals"},
	{"GET", "/in-store/api/v1/terminal/{terminalId}", "getTerminal"},
	{"POST", "/in-store/api/v1/purchase", "createPurchase"},
	{"GET", "/in-store/api/v1/transaction/{onlineAPIRefId}", "getTransaction"},
	{"GET", "/in-store/api/v1/transaction/{onlineAPIRefId}/events", "getTransactionEvents"},
	{"POST", "/in-store/api/v1/transaction/{onlineAPIRefId}/confirm", "confirmTransaction"},
	{"POST", "/in-store/api/v1/cancel", "cancelTransaction"},
	{"POST", "/in-store/api/v1/refund", "createRefund"},
	{"POST", "/in-store/api/v1/reversal", "createReversal"},
	{"GET", "/in-store/api/v1/totals", "getTotals"},
	{"POST", "/in-store/api/v1/reconciliation", "reconcile"},
	{"POST", "/in-store/api/v1/preauthorization", "createPreAuthorization"},
	{"POST", "/in-store/api/v1/increment", "createIncrement"},
	{"POST", "/in-store/api/v1/capture", "createCapture"},
	{"POST", "/in-store/api/v1/void", "createVoid"},
	{"GET", "/in-store/api/v1/transactions", "listTransactions"},
	{"POST", "/in-store/api/v1/terminal/{terminalId}/close", "closeBatch"},
	{"GET", "/in-store/api/v1/batches", "listBatches"},
	{"GET", "/in-store/api/v1/batch/{batchId}", "getBatch"},
	{"POST", "/in-store/api/v1/print", "printOnTerminal"},
	{"GET", "/in-store/api/v1/print/{printId}", "getPrintJob"},
	{"GET", "/in-store/api/v1/events", "listEvents"},
	{"GET", "/in-store/api/v1/events/stream", "streamEvents"},
	{"POST", "/in-store/api/v1/webhooks", "createWebhook"},
	{"GET", "/in-store/api/v1/webhooks", "listWebhooks"},
	{"GET", "/in-store/api/v1/webhooks/{webhookId}", "getWebhook"},
	{"PATCH", "/in-store/api/v1/webhooks/{webhookId}", "updateWebhook"},
	{"DELETE", "/in-store/api/v1/webhooks/{webhookId}", "deleteWebhook"},
	{"POST", "/in-store/api/v1/webhooks/{webhookId}/rotate-secret", "rotateWebhookSecret"},
	{"GET", "/in-store/api/v1/webhooks/{webhookId}/deliveries", "listWebhookDeliveries"},
	{"POST", "/in-store/api/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry", "retryWebhookDelivery"},
	{"GET", "/sandbox/v1/devices", "listSandboxDevices"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-outcome", "setNextOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/offline", "setTerminalOffline"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/online", "setTerminalOnline"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/printer", "setNextPrintOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-install", "setNextInstallOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-tip", "setNextTip"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/card-network", "setCardNetwork"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-forward", "setNextForward"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/batch-extra", "addBatchExtra"},
}

// TestOperations checks that the document has exactly the operations of the
// table, each with its operationId, a summary and a description.
func TestOperations(t *testing.T) {
	doc := loadOnline(t)
	want := map[string]string{}
	for _, o := range operations {
		want[o.method+" "+o.path] = o.id
	}
	got := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			got[method+" "+path] = op.OperationID
			if op.Summary == "" || op.Description == "" {
				t.Errorf("%s %s lacks a summary or a description", method, path)
			}
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.Description == "" {
					t.Errorf("%s %s: parameter %s has no description", method, path, p.Value.Name)
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// TestStatuses checks the statuses each operation documents: exactly the
// answers its handler and the domain give. Every guarded operation has 400:
// a credential header sent twice.
func TestStatuses(t *testing.T) {
	doc := loadOnline(t)
	want := map[string][]string{
		"createToken":            {"200", "400", "401", "413", "415", "429", "500"},
		"getMetadata":            {"200", "304", "400", "401", "429", "500"},
		"getOpenAPIDocument":     {"200", "400", "401", "429", "500"},
		"linkTerminal":           {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"unlinkTerminal":         {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"listTerminals":          {"200", "400", "401", "403", "429", "500"},
		"getTerminal":            {"200", "400", "401", "403", "429", "500"},
		"createPurchase":         {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "504"},
		"getTransaction":         {"200", "400", "401", "403", "404", "429", "500"},
		"getTransactionEvents":   {"200", "400", "401", "403", "404", "429", "500"},
		"cancelTransaction":      {"202", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"getTotals":              {"200", "400", "401", "403", "429", "500"},
		"reconcile":              {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"confirmTransaction":     {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"createRefund":           {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createReversal":         {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createPreAuthorization": {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "504"},
		"createIncrement":        {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createCapture":          {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createVoid":             {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"listTransactions":       {"200", "400", "401", "403", "429", "500"},
		"closeBatch":             {"201", "400", "401", "403", "409", "413", "422", "429", "500", "504"},
		"listBatches":            {"200", "400", "401", "403", "429", "500"},
		"getBatch":               {"200", "400", "401", "403", "404", "429", "500"},
		"printOnTerminal":        {"200", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500"},
		"getPrintJob":            {"200", "400", "401", "403", "404", "429", "500"},
		"listEvents":             {"200", "400", "401", "403", "429", "500"},
		"streamEvents":           {"200", "400", "401", "403", "429", "500"},
		"createWebhook":          {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"listWebhooks":           {"200", "400", "401", "403", "429", "500"},
		"getWebhook":             {"200", "400", "401", "403", "404", "429", "500"},
		"updateWebhook":          {"200", "400", "401", "403", "404", "413", "415", "429", "500"},
		"deleteWebhook":          {"204", "400", "401", "403", "404", "429", "500"},
		"rotateWebhookSecret":    {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"listWebhookDeliveries":  {"200", "400", "401", "403", "404", "429", "500"},
		"retryWebhookDelivery":   {"202", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"listSandboxDevices":     {"200", "400", "401", "403", "404", "429", "500"},
		"setNextOutcome":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setTerminalOffline":     {"200", "400", "401", "403", "404", "409", "413", "429", "500"},
		"setTerminalOnline":      {"200", "400", "401", "403", "404", "409", "413", "429", "500"},
		"setNextPrintOutcome":    {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextInstallOutcome":  {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextTip":             {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setCardNetwork":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextForward":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"addBatchExtra":          {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var got []string
			for code := range op.Responses.Map() {
				got = append(got, code)
			}
			slices.Sort(got)
			if diff := cmp.Diff(want[op.OperationID], got); diff != "" {
				t.Errorf("%s %s (%s) statuses (-want +got):\n%s", method, path, op.OperationID, diff)
			}
		}
	}
}

// TestIdempotentPosts checks that every POST under /in-store/api/v1 takes
// Idempotency-Key and documents what it adds, and that 201 and 202 carry
// Location.
func TestIdempotentPosts(t *testing.T) {
	doc := loadOnline(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, code := range []int{201, 202} {
				if r := op.Responses.Status(code); r != nil {
					if h := r.Value.Headers["Location"]; h == nil || !h.Value.Required {
						t.Errorf("%s %s: %d lacks a required Location header", method, path, code)
					}
				}
			}
			if method != "POST" || !strings.HasPrefix(path, "/in-store/api/v1/") {
				continue
			}
			if p := op.Parameters.GetByInAndName("header", "Idempotency-Key"); p == nil || p.Required {
				t.Errorf("%s %s does not take an optional Idempotency-Key", method, path)
			}
			for _, code := range []int{409, 422} {
				if op.Responses.Status(code) == nil {
					t.Errorf("%s %s does not document %d", method, path, code)
				}
			}
			for code, r := range op.Responses.Map() {
				if strings.HasPrefix(code, "2") {
					if h := r.Value.Headers["Idempotent-Replayed"]; h == nil || h.Value.Required {
						t.Errorf("%s %s: %s lacks the optional Idempotent-Replayed header", method, path, code)
					}
				}
			}
		}
	}
}

const approvedTransaction = `{
	"onlineAPIRefId": "txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01",
	"type": "PURCHASE",
	"terminalId": "10000001",
	"amount": 30000,
	"cashbackAmount": 10000,
	"tipAmount": 500,
	"totalAmount": 30500,
	"vatAmount": null,
	"currency": "SEK",
	"paymentMethodId": null,
	"ecrReference": "ORDER-4711",
	"printReceipt": true,
	"tip": {"mode": "PROMPT", "suggestions": [10, 15, 20]},
	"statusId": 0,
	"status": "APPROVED",
	"errorId": null,
	"errorCode": null,
	"progress": "FINAL",
	"version": 6,
	"createdAt": "2025-03-14T10:02:03.000412Z",
	"acknowledgedAt": "2025-03-14T10:02:03.051877Z",
	"completedAt": "2025-03-14T10:02:05.61209Z",
	"reverses": null,
	"reversedBy": null,
	"result": {
		"entryMode": "CHIP",
		"cardBrand": "MASTERCARD",
		"maskedPan": "541333******0434",
		"authorizationCode": "7KQ2ZD",
		"paymentMethod": null,
		"receipt": {"customer": ["CUSTOMER COPY", "APPROVED"], "merchant": ["MERCHANT COPY", "APPROVED"]}
	}
}`

// TestTransactionSchema checks realistic transactions against the
// Transaction schema, and that it refuses what the server never sends.
func TestTransactionSchema(t *testing.T) {
	s := schema(t, loadOnline(t), "Transaction")
	valid := map[string]string{
		"approved card purchase": approvedTransaction,
		"pending, no result yet": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","type":"PURCHASE","terminalId":"10000001",
			"amount":1250,"cashbackAmount":0,"tipAmount":0,"totalAmount":1250,"vatAmount":250,"currency":"SEK","paymentMethodId":null,"ecrReference":null,
			"printReceipt":false,"tip":null,"statusId":14,"status":"PENDING","errorId":null,"errorCode":null,"progress":"SENT","version":1,
			"createdAt":"2025-03-14T10:02:03Z","acknowledgedAt":null,"completedAt":null,"reverses":null,"reversedBy":null}`,
		"payment method, cancelled by the ECR": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f03","type":"PURCHASE","terminalId":"10000002",
			"amount":4994,"cashbackAmount":0,"tipAmount":0,"totalAmount":4994,"vatAmount":null,"currency":"SEK","paymentMethodId":1,"ecrReference":null,
			"printReceipt":false,"tip":null,"statusId":2,"status":"ABORTED_BY_CASHIER","errorId":37,"errorCode":"WP37","progress":"FINAL","version":5,
			"createdAt":"2025-03-14T10:02:03Z","acknowledgedAt":"2025-03-14T10:02:03.1Z","completedAt":"2025-03-14T10:02:40Z",
			"reverses":null,"reversedBy":null,
			"result":{"entryMode":null,"cardBrand":null,"maskedPan":null,"authorizationCode":null,"paymentMethod":null,
				"receipt":{"customer":[],"merchant":[]}}}`,
		"late approval reversed": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f04","type":"PURCHASE","terminalId":"10000001",
			"amount":1000,"cashbackAmount":0,"tipAmount":0,"totalAmount":1000,"vatAmount":null,"currency":"EUR","paymentMethodId":0,"ecrReference":"R-1",
			"printReceipt":true,"tip":null,"statusId":13,"status":"REVERSED","errorId":36,"errorCode":"WP36","progress":"FINAL","version":5,
			"createdAt":"2025-03-14T10:02:03Z","acknowledgedAt":"2025-03-14T10:02:03.1Z","completedAt":"2025-03-14T10:04:10Z",
			"reverses":null,"reversedBy":null,
			"result":{"entryMode":"APP","cardBrand":null,"maskedPan":null,"authorizationCode":"A1B2C3","paymentMethod":{"id":0,"code":"SWISH"},
				"receipt":{"customer":["APPROVED"],"merchant":["APPROVED"]}}}`,
		"refund through a payment method": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f10","type":"REFUND","terminalId":"10000002",
			"amount":1000,"cashbackAmount":0,"tipAmount":0,"totalAmount":1000,"vatAmount":null,"currency":"SEK","paymentMethodId":0,"ecrReference":"RETURN-1",
			"printReceipt":false,"tip":null,"statusId":0,"status":"APPROVED","errorId":null,"errorCode":null,"progress":"FINAL","version":5,
			"createdAt":"2025-03-14T11:15:00.000233Z","acknowledgedAt":"2025-03-14T11:15:00.048112Z","completedAt":"2025-03-14T11:15:02.1207Z",
			"reverses":null,"reversedBy":null,
			"result":{"entryMode":"APP","cardBrand":null,"maskedPan":null,"authorizationCode":"R4T8QZ","paymentMethod":{"id":0,"code":"SWISH"},
				"receipt":{"customer":["REFUND","APPROVED"],"merchant":["REFUND","APPROVED"]}}}`,
		"refund not acknowledged": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f12","type":"REFUND","terminalId":"10000001",
			"amount":1091,"cashbackAmount":0,"tipAmount":0,"totalAmount":1091,"vatAmount":null,"currency":"SEK","paymentMethodId":null,"ecrReference":null,
			"printReceipt":false,"tip":null,"statusId":8,"status":"TECHNICAL_ERROR","errorId":25,"errorCode":"WP25","progress":"FINAL","version":2,
			"createdAt":"2025-03-14T11:20:00Z","acknowledgedAt":null,"completedAt":"2025-03-14T11:20:10Z","reverses":null,"reversedBy":null}`,
		"approved reversal": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f11","type":"REVERSAL","terminalId":"10000001",
			"amount":30000,"cashbackAmount":10000,"tipAmount":0,"totalAmount":30000,"vatAmount":null,"currency":"SEK","paymentMethodId":null,"ecrReference":"VOID-4711",
			"printReceipt":false,"tip":null,"statusId":0,"status":"APPROVED","errorId":null,"errorCode":null,"progress":"FINAL","version":3,
			"createdAt":"2025-03-14T10:03:10.000518Z","acknowledgedAt":"2025-03-14T10:03:10.039004Z","completedAt":"2025-03-14T10:03:10.2Z",
			"reverses":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","reversedBy":null,
			"result":{"entryMode":null,"cardBrand":null,"maskedPan":null,"authorizationCode":null,"paymentMethod":null,
				"receipt":{"customer":[],"merchant":[]}}}`,
		"purchase reversed by a reversal": `{"onlineAPIRefId":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01","type":"PURCHASE","terminalId":"10000001",
			"amount":30000,"cashbackAmount":10000,"tipAmount":0,"totalAmount":30000,"vatAmount":null,"currency":"SEK","paymentMethodId":null,"ecrReference":"ORDER-4711",
			"printReceipt":true,"tip":null,"statusId":13,"status":"REVERSED","errorId":null,"errorCode":null,"progress":"FINAL","version":7,
			"createdAt":"2025-03-14T10:02:03.000412Z","acknowledgedAt":"2025-03-14T10:02:03.051877Z","completedAt":"2025-03-14T10:02:05.61209Z",
			"reverses":null,"reversedBy":"txn_0195936a1c2b7d3e8f4a5b6c7d8e9f11",
			"result":{"entryMode":"CHIP","cardBrand":"MASTERCARD","maskedPan":"541333******0434","authorizationCode":"7KQ2ZD","paymentMethod":null,
				"receipt":{"customer":["APPROVED"],"merchant":["APPROVED"]}}}`,
	}
	for name, text := range valid {
		if err := visit(s, text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Mutations of the approved transaction the schema must refuse.
	invalid := map[string]func(m map[string]any){
		"unknown member":       func(m map[string]any) { m["merchantId"] = "m1" },
		"missing vatAmount":    func(m map[string]any) { delete(m, "vatAmount") },
		"unknown status":       func(m map[string]any) { m["status"] = "DONE" },
		"statusId 15":          func(m map[string]any) { m["statusId"] = 15 },
		"unknown progress":     func(m map[string]any) { m["progress"] = "PRINTING" },
		"errorCode not stored": func(m map[string]any) { m["errorId"], m["errorCode"] = 9, "WP09" },
		"lower-case currency":  func(m map[string]any) { m["currency"] = "sek" },
		"amount 0":             func(m map[string]any) { m["amount"] = 0 },
		"type":                 func(m map[string]any) { m["type"] = "SALE" },
		"unmasked PAN":         func(m map[string]any) { m["result"].(map[string]any)["maskedPan"] = "5413 3300 8901 0434" },
		"receipt missing":      func(m map[string]any) { delete(m["result"].(map[string]any), "receipt") },
		"paymentMethod no code": func(m map[string]any) {
			m["result"].(map[string]any)["paymentMethod"] = map[string]any{"id": 0}
		},
	}
	for name, mutate := range invalid {
		var m map[string]any
		if err := json.Unmarshal([]byte(approvedTransaction), &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		if err := visit(s, asJSON(t, m)); err == nil {
			t.Errorf("%s: the Transaction schema accepts it", name)
		}
	}
}

// TestTerminalViewSchema checks what instore.TerminalView encodes to
// against the TerminalView schema: the schema has exactly its JSON members,
// and realistic values validate.
func TestTerminalViewSchema(t *testing.T) {
	doc := loadOnline(t)
	s := schema(t, doc, "TerminalView")
	if diff := cmp.Diff(jsonNames(reflect.TypeFor[instore.TerminalView]()), propertyNames(s)); diff != "" {
		t.Errorf("TerminalView members (-Go +schema):\n%s", diff)
	}
	linkedAt := time.Date(2025, 3, 14, 9, 30, 0, 123456000, time.UTC)
	serial, model, version, ref := "VT-MOBILE-01", instore.ModelMobile, "1.0.0", "txn_0195936a1c2b7d3e8f4a5b6c7d8e9f01"
	views := map[string]instore.TerminalView{
		"unlinked": {TerminalID: "10000002"},
		"linked, busy": {TerminalID: "10000001", Linked: true, SerialNumber: &serial, Model: &model, SoftwareVersion: &version,
			Online: true, Busy: true, CurrentRefID: &ref, LinkedAt: &linkedAt, LastSeenAt: &linkedAt},
	}
	for name, v := range views {
		if err := visit(s, asJSON(t, v)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, m := range instore.Models {
		v := instore.TerminalView{TerminalID: "10000001", Linked: true, SerialNumber: &serial, Model: &m, SoftwareVersion: &version}
		if err := visit(s, asJSON(t, v)); err != nil {
			t.Errorf("model %s: %v", m, err)
		}
	}
	bad := "kiosk"
	if err := visit(s, asJSON(t, instore.TerminalView{TerminalID: "10000001", Model: &bad})); err == nil {
		t.Errorf("model %q accepted", bad)
	}
	if err := visit(s, `{"terminalId":"10000001","linked":false}`); err == nil {
		t.Errorf("a TerminalView without its null members accepted")
	}
}

// TestPrintJobSchema checks realistic print jobs, in every print status and
// while printing, against the PrintJob schema.
func TestPrintJobSchema(t *testing.T) {
	doc := loadOnline(t)
	s := schema(t, doc, "PrintJob")
	md := instore.DefaultMetadata()
	if len(md.PrintStatuses) != 7 {
		t.Fatalf("%d print statuses, want 7", len(md.PrintStatuses))
	}
	for _, c := range md.PrintStatuses {
		text := fmt.Sprintf(`{"printId":"prt_0195936b2d4e7f80a1b2c3d4e5f60718","terminalId":"10000001","statusId":%d,"status":%q,
			"createdAt":"2025-03-14T10:05:00.000119Z","completedAt":"2025-03-14T10:05:01.204551Z"}`, c.ID, c.Code)
		if err := visit(s, text); err != nil {
			t.Errorf("%s: %v", c.Code, err)
		}
	}
	printing := `{"printId":"prt_0195936b2d4e7f80a1b2c3d4e5f6071b","terminalId":"10000002","statusId":null,"status":null,
		"createdAt":"2025-03-14T10:07:00.000031Z","completedAt":null}`
	if err := visit(s, printing); err != nil {
		t.Errorf("printing: %v", err)
	}
	for name, text := range map[string]string{
		"statusId 7":     `{"printId":"prt_1","terminalId":"10000001","statusId":7,"status":"DONE","createdAt":"2025-03-14T10:07:00Z","completedAt":null}`,
		"unknown member": `{"printId":"prt_1","terminalId":"10000001","statusId":0,"status":"SUCCESS","createdAt":"2025-03-14T10:07:00Z","completedAt":null,"lines":[]}`,
		"no completedAt": `{"printId":"prt_1","terminalId":"10000001","statusId":0,"status":"SUCCESS","createdAt":"2025-03-14T10:07:00Z"}`,
	} {
		if err := visit(s, text); err == nil {
			t.Errorf("%s: the PrintJob schema accepts it", name)
		}
	}
}

// TestTransactionListSchema checks a page of the listing, with and without
// a next cursor.
func TestTransactionListSchema(t *testing.T) {
	s := schema(t, loadOnline(t), "TransactionList")
	for name, text := range map[string]string{
		"a page with more": `{"transactions":[` + approvedTransaction + `],"nextCursor":"eyJ0IjoxNzQxOTQ2NTIzMDAwNDEyLCJpIjoidHhuXzAxIn0"}`,
		"the last page":    `{"transactions":[` + approvedTransaction + `],"nextCursor":null}`,
		"empty":            `{"transactions":[],"nextCursor":null}`,
	} {
		if err := visit(s, text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := visit(s, `{"transactions":[]}`); err == nil {
		t.Errorf("a page without nextCursor accepted")
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
)

func loadOnline(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OnlineYAML)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return doc
}

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
	if diff := cmp.Diff([]string{instore.ReasonUpdate, instore.ReasonTransaction}, enum("reason")); diff != "" {
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
	{"POST", "/in-store/api/v1/preauthorization", "createPreAuthorization"},
	{"POST", "/in-store/api/v1/increment", "createIncrement"},
	{"POST", "/in-store/api/v1/capture", "createCapture"},
	{"POST", "/in-store/api/v1/void", "createVoid"},
	{"GET", "/in-store/api/v1/transactions", "listTransactions"},
	{"GET", "/in-store/api/v1/totals", "getTotals"},
	{"POST", "/in-store/api/v1/reconciliation", "reconcile"},
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
		"confirmTransaction":     {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"createRefund":           {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createReversal":         {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createPreAuthorization": {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "504"},
		"createIncrement":        {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createCapture":          {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createVoid":             {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"listTransactions":       {"200", "400", "401", "403", "429", "500"},
		"getTotals":              {"200", "400", "401", "403", "429", "500"},
		"reconcile":              {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
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

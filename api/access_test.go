package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

// TestAccessOperations: exactly the specification's paths and methods
// (plus the token endpoint and the document), each with its statuses, a
// summary, a description and, but for the token endpoint, the global
// security (token and key) and 401.
func TestAccessOperations(t *testing.T) {
	doc := loadAccess(t)
	want := map[string][]string{
		"POST /getTerminalId":                            {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"POST /getTerminalInfo":                          {"200", "400", "401", "403", "413", "415", "429", "500"},
		"GET /terminal/getPackages/{customerId}/{model}": {"200", "400", "401", "403", "429", "500"},
		"POST /terminal/createUpdate":                    {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"GET /openapi.yaml":                              {"200", "304", "400", "401", "429", "500"},
		"POST /oauth2/token":                             {"200", "400", "401", "413", "415", "429", "500"},
	}
	got := map[string][]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			var codes []string
			for code := range op.Responses.Map() {
				codes = append(codes, code)
			}
			slices.Sort(codes)
			got[name] = codes
			if op.OperationID == "" || op.Summary == "" || op.Description == "" {
				t.Errorf("%s lacks an operationId, a summary or a description", name)
			}
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.Description == "" {
					t.Errorf("%s: parameter %s has no description", name, p.Value.Name)
				}
			}
			if path == "/oauth2/token" {
				continue
			}
			if op.Security != nil {
				t.Errorf("%s overrides the global security", name)
			}
			idem := op.Parameters.GetByInAndName("header", "Idempotency-Key") != nil
			if wantIdem := method == "POST" && path != "/getTerminalInfo"; idem != wantIdem {
				t.Errorf("%s takes Idempotency-Key: %v, want %v", name, idem, wantIdem)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations and statuses (-want +got):\n%s", diff)
	}
	wantSec := openapi3.SecurityRequirements{{"bearerAuth": {}, "subscriptionKey": {}}}
	if diff := cmp.Diff(wantSec, doc.Security); diff != "" {
		t.Errorf("global security (-want +got):\n%s", diff)
	}
}

// TestAccessSchemasDescribed: every property has a description, and every
// example matches its schema.
func TestAccessSchemasDescribed(t *testing.T) {
	doc := loadAccess(t)
	for name, s := range doc.Components.Schemas {
		for prop, p := range s.Value.Properties {
			if p.Ref == "" && p.Value != nil && p.Value.Description == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
	n := 0
	forEachExample(t, doc, func(where, _ string, s *openapi3.Schema, v any) {
		n++
		if err := visit(s, asJSON(t, v)); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	})
	if n < 15 {
		t.Errorf("only %d examples checked", n)
	}
}

// TestAccessProblemNames: the Problem table lists each name the Access API
// answers with, with its status from error.go.
func TestAccessProblemNames(t *testing.T) {
	desc := schema(t, loadAccess(t), "Problem").Description
	for _, name := range []string{
		instore.EUnauthorized, instore.EForbidden, instore.EValidation, instore.ENotFound, instore.EMethodNotAllowed,
		instore.EPayloadTooLarge, instore.EUnsupportedMediaType, instore.ERateLimited, instore.EIdempotencyConflict,
		instore.EConflict, instore.EInternal, instore.EUnavailable, instore.WP01,
	} {
		if row := fmt.Sprintf("| `%s` | %d |", name, instore.HTTPStatus(name)); !strings.Contains(desc, row) {
			t.Errorf("Problem description lacks the row %q", row)
		}
	}
}

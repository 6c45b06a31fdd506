package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

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
	check := func(where, ct string, mt *openapi3.MediaType) {
		if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
			return
		}
		problem := ct == "application/problem+json"
		if mt.Example != nil {
			checkValue(where+" example", mt.Schema.Value, problem, mt.Example)
		}
		for name, ex := range mt.Examples {
			if ex == nil || ex.Value == nil {
				t.Errorf("%s example %s does not resolve", where, name)
				continue
			}
			checkValue(where+" example "+name, mt.Schema.Value, problem, ex.Value.Value)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if ct == "application/json" {
						check(fmt.Sprintf("%s %s request", method, path), ct, mt)
					}
				}
			}
			for code, r := range op.Responses.Map() {
				for ct, mt := range r.Value.Content {
					if ct != "application/yaml" {
						check(fmt.Sprintf("%s %s %s", method, path, code), ct, mt)
					}
				}
			}
		}
	}
	t.Logf("%d examples checked", n)
	if n < 60 {
		t.Errorf("only %d examples checked; the walk misses some", n)
	}
}

// TestWireTypes checks the root's wire types against their schemas: the
// same members, so what the handlers encode is what the document says.
func TestWireTypes(t *testing.T) {
	doc := loadOnline(t)
	for name, typ := range map[string]reflect.Type{
		"Transaction":      reflect.TypeFor[instore.TransactionWire](),
		"PrintJob":         reflect.TypeFor[instore.PrintJobWire](),
		"TransactionEvent": reflect.TypeFor[instore.TransactionEvent](),
		"TerminalView":     reflect.TypeFor[instore.TerminalView](),
	} {
		if diff := cmp.Diff(jsonNames(typ), propertyNames(schema(t, doc, name))); diff != "" {
			t.Errorf("%s members (-Go +schema):\n%s", name, diff)
		}
	}
}

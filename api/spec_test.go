package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/instore-dev/instore/api"
)

// The helpers of the tests of both documents.

// loadDoc loads an OpenAPI document and validates it.
func loadDoc(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return doc
}

func loadOnline(t *testing.T) *openapi3.T {
	t.Helper()
	return loadDoc(t, api.OnlineYAML)
}

func loadAccess(t *testing.T) *openapi3.T {
	t.Helper()
	doc := loadDoc(t, api.AccessYAML)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	return doc
}

func schema(t *testing.T, doc *openapi3.T, name string) *openapi3.Schema {
	t.Helper()
	s := doc.Components.Schemas[name]
	if s == nil || s.Value == nil {
		t.Fatalf("schema %s is missing", name)
	}
	return s.Value
}

// visit validates a JSON text against s as a response validator does.
func visit(s *openapi3.Schema, text string) error {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return err
	}
	return s.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

// asJSON round-trips v through JSON, so that a value loaded from YAML has
// JSON's types.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonNames(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func propertyNames(s *openapi3.Schema) []string {
	var names []string
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// forEachExample calls check with every example of the document's JSON
// request bodies and of its responses (but the YAML document): where it
// stands, its media type, that media type's schema and the example.
func forEachExample(t *testing.T, doc *openapi3.T, check func(where, ct string, s *openapi3.Schema, example any)) {
	t.Helper()
	media := func(where, ct string, mt *openapi3.MediaType) {
		if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
			return
		}
		if mt.Example != nil {
			check(where+" example", ct, mt.Schema.Value, mt.Example)
		}
		for name, ex := range mt.Examples {
			if ex == nil || ex.Value == nil {
				t.Errorf("%s example %s does not resolve", where, name)
				continue
			}
			check(where+" example "+name, ct, mt.Schema.Value, ex.Value.Value)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if ct == "application/json" {
						media(fmt.Sprintf("%s %s request", method, path), ct, mt)
					}
				}
			}
			for code, r := range op.Responses.Map() {
				for ct, mt := range r.Value.Content {
					if ct != "application/yaml" {
						media(fmt.Sprintf("%s %s %s %s", method, path, code, ct), ct, mt)
					}
				}
			}
		}
	}
}

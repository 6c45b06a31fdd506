package apitest

import (
	"errors"
	"testing"

	"github.com/instore-dev/instore"
)

// FieldsOf returns the fields of a validation error, as its problem's
// fields list names them (nil for nil); any other error fails t.
func FieldsOf(t testing.TB, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *instore.Error
	if !errors.As(err, &e) || e.Code != instore.EValidation {
		t.Fatalf("error %v, want a validation error", err)
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	return out
}

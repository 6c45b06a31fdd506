package apitest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// ObjectKeys returns the names of the JSON object body's members in the
// order they stand in, to check a body holds exactly the documented ones
// in the documented order.
func ObjectKeys(t testing.TB, body []byte) []string {
	t.Helper()
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, body)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("a member name of %s: %v", body, err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("the member %s of %s: %v", k, body, err)
		}
	}
	return keys
}

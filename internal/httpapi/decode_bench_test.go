package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"testing"

	"github.com/instore-dev/instore"
)

// BenchmarkDecodeJSON decodes a purchase body with the strict decoder
// (encoding/json/v2 semantics: duplicate names, case variants and invalid
// UTF-8 refused) against the baseline in the same run: encoding/json with
// unknown fields refused, what the service used before.
//
//	go test -run '^$' -bench DecodeJSON -count 5 ./internal/httpapi/
func BenchmarkDecodeJSON(b *testing.B) {
	body := []byte(`{"terminalId":"10000001","amount":1250,"currency":"SEK","ecrReference":"R-1001","printReceipt":true}`)
	b.Run("baseline-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req instore.PurchaseRequest
			dec := stdjson.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req instore.PurchaseRequest
			if err := DecodeJSONBytes(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkFrame measures encoding a purchase command and decoding a
// result, the frames of every transaction (the regression guard for the
// gateway's per-message cost).
//
//	go test -run='^$' -bench=BenchmarkFrame -benchmem ./internal/protocol/
func BenchmarkFrame(b *testing.B) {
	vat := int64(250)
	pay, _ := json.Marshal(&Payment{Amount: 1250, VATAmount: &vat, Currency: "SEK", ECRReference: "ORDER-4711", Deadline: time.Unix(1795330000, 0).UTC()})
	cmd := &Envelope{Type: TypePurchase, ID: "s-1a2b3c-42", Ref: "txn_01a2023001407ed584c0b26979fa7cb9", Data: pay}
	res, _ := json.Marshal(&Result{StatusID: 0, EntryMode: "CONTACTLESS", CardBrand: "VISA", MaskedPAN: "476173******0119", AuthorizationCode: "A1B2C3",
		CustomerReceipt: []string{"instore virtual terminal", "CUSTOMER COPY", "Amount      SEK 12.50", "APPROVED"},
		MerchantReceipt: []string{"instore virtual terminal", "MERCHANT COPY", "Amount      SEK 12.50", "APPROVED"}})
	frame, err := Encode(&Envelope{Type: TypeResult, ID: "t-9", Ref: cmd.Ref, Data: res})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode-purchase", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(cmd); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-result", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			env, err := Decode(frame)
			if err != nil {
				b.Fatal(err)
			}
			var r Result
			if err := DecodeData(env, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package protocol

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecode checks that Decode never panics, and that whatever it accepts
// encodes and decodes to the same envelope, and encodes to the same frame
// again (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","id":"t-1","data":{"protocol":1,"model":"countertop","softwareVersion":"1.0.0"}}`,
		`{"type":"ack","id":"t-2","ref":"txn_1"}`,
		`{"type":"progress","id":"t-3","ref":"txn_1","data":{"stage":"WAITING_FOR_PIN"}}`,
		`{"type":"result","id":"t-4","ref":"txn_1","data":{"statusId":0,"maskedPan":"411111******1111","customerReceipt":["<b>","\u2028"]}}`,
		`{"type":"confirm","id":"s-1","re":"t-4","ref":"txn_1"}`,
		`{"type":"purchase","id":"s-2","ref":"txn_2","data":{"amount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}}`,
		`{ "type" : "ack" , "id" : "\u0041" , "ref" : "r" , "data" : { } }`,
		`{"type":"ack","id":"1","ref":"r","re":null}`,
		`{"type":"print","id":"s-3","ref":"p","data":{"lines":["x"],"nested":{"a":[1,2,{"b":null}]}}}`,
		`{"type":"ack","id":"1","ref":"r","data":{"a":1}}`,
		`{"type":"ack","id":"1","id":"2"}`,
		`[]`, `null`, ``, `{`, `{"type":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		env, err := Decode(frame)
		if err != nil {
			if env != nil {
				t.Fatalf("Decode returned an envelope with error %v", err)
			}
			return
		}
		b, err := Encode(env)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)) = %v", frame, err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v (frame %q)", frame, err, b)
		}
		if diff := cmp.Diff(env, again); diff != "" {
			t.Fatalf("round trip of %q mismatch (-first +second):\n%s", frame, diff)
		}
		b2, err := Encode(again)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("Encode is not canonical: %q then %q (%v)", b, b2, err)
		}
		// DecodeData never panics either, whatever the data.
		if dst := NewData(env.Type); dst != nil {
			DecodeData(env, dst)
		} else {
			var m map[string]any
			DecodeData(env, &m)
		}
	})
}

package instore

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNullMembers checks the wire's null-as-zero members both ways: an
// empty string or a zero errorId is sent as null, and null reads back as
// the zero value, so Go code on either side compares plain values.
func TestNullMembers(t *testing.T) {
	w := TransactionWire{ECRReference: "", ErrorID: 0, ErrorCode: "", Reverses: "txn_1", Result: &ResultWire{MaskedPAN: "**** 1234"}}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ecrReference":null`, `"errorId":null`, `"errorCode":null`, `"reverses":"txn_1"`, `"reversedBy":null`, `"maskedPan":"**** 1234"`, `"cardBrand":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back TransactionWire
	if err := json.Unmarshal([]byte(`{"ecrReference":null,"errorId":23,"errorCode":"WP23","reverses":null,"result":{"maskedPan":null,"entryMode":"CHIP"}}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.ECRReference != "" || back.ErrorID != 23 || back.ErrorCode != WP23 || back.Reverses != "" || back.Result.MaskedPAN != "" || back.Result.EntryMode != "CHIP" {
		t.Errorf("decoded %+v %+v", back, back.Result)
	}
	for _, bad := range []string{`{"errorId":"x"}`, `{"ecrReference":5}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
}

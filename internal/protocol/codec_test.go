package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

func TestDecode(t *testing.T) {
	long := strings.Repeat("a", MaxIDLen+1)
	tests := []struct {
		name  string
		frame string
		want  *Envelope
		field string // of the *Error, when refused
	}{
		{"hello", `{"type":"hello","id":"t-1","data":{"protocol":1,"model":"countertop","softwareVersion":"1.0.0"}}`,
			&Envelope{Type: TypeHello, ID: "t-1", Data: json.RawMessage(`{"protocol":1,"model":"countertop","softwareVersion":"1.0.0"}`)}, ""},
		{"data compacted", "{ \"type\" : \"progress\", \"id\":\"2\", \"ref\":\"txn_1\", \"data\" : { \"stage\" : \"AUTHORIZING\" } }\n",
			&Envelope{Type: TypeProgress, ID: "2", Ref: "txn_1", Data: json.RawMessage(`{"stage":"AUTHORIZING"}`)}, ""},
		{"ack", `{"type":"ack","id":"3","ref":"txn_1"}`, &Envelope{Type: TypeAck, ID: "3", Ref: "txn_1"}, ""},
		{"ack with empty data", `{"type":"ack","id":"3","ref":"txn_1","data":{}}`, &Envelope{Type: TypeAck, ID: "3", Ref: "txn_1", Data: json.RawMessage(`{}`)}, ""},
		{"null is absent", `{"type":"ack","id":"3","ref":"txn_1","re":null,"data":null}`, &Envelope{Type: TypeAck, ID: "3", Ref: "txn_1"}, ""},
		{"escaped strings", `{"type":"confirm","id":"\u0034","re":"a\"b"}`, &Envelope{Type: TypeConfirm, ID: "4", Re: `a"b`}, ""},
		{"id of 64", `{"type":"ack","id":"` + long[1:] + `","ref":"r"}`, &Envelope{Type: TypeAck, ID: long[1:], Ref: "r"}, ""},

		{"not json", `hello`, nil, ""},
		{"array", `[]`, nil, ""},
		{"truncated", `{"type":"ack"`, nil, ""},
		{"two values", `{"type":"ack","id":"3","ref":"r"}{}`, nil, ""},
		{"unknown field", `{"type":"ack","id":"3","ref":"r","extra":1}`, nil, `"extra"`},
		{"field in other case", `{"Type":"ack","id":"3","ref":"r"}`, nil, `"Type"`},
		{"duplicate field", `{"type":"ack","id":"3","id":"4","ref":"r"}`, nil, "id"},
		{"type missing", `{"id":"3"}`, nil, "type"},
		{"type unknown", `{"type":"nope","id":"3"}`, nil, "type"},
		{"type not a string", `{"type":1,"id":"3"}`, nil, "type"},
		{"id missing", `{"type":"ack","ref":"r"}`, nil, "id"},
		{"id too long", `{"type":"ack","id":"` + long + `","ref":"r"}`, nil, "id"},
		{"id with space", `{"type":"ack","id":"a b","ref":"r"}`, nil, "id"},
		{"id not ascii", `{"type":"ack","id":"é","ref":"r"}`, nil, "id"},
		{"ref too long", `{"type":"ack","id":"1","ref":"` + long + `"}`, nil, "ref"},
		{"re too long", `{"type":"confirm","id":"1","re":"` + long + `"}`, nil, "re"},
		{"ack without ref", `{"type":"ack","id":"1"}`, nil, "ref"},
		{"confirm without re", `{"type":"confirm","id":"1"}`, nil, "re"},
		{"ack naming its command", `{"type":"ack","id":"3","re":"s-1","ref":"r"}`, &Envelope{Type: TypeAck, ID: "3", Re: "s-1", Ref: "r"}, ""},
		{"re on a result", `{"type":"result","id":"1","re":"s-1","ref":"r","data":{"statusId":0}}`, nil, "re"},
		{"re on a print-result", `{"type":"print-result","id":"1","re":"s-1","ref":"r","data":{"statusId":0}}`, nil, "re"},
		{"hello without data", `{"type":"hello","id":"1"}`, nil, "data"},
		{"data not an object", `{"type":"hello","id":"1","data":[1]}`, nil, "data"},
		{"data on ack", `{"type":"ack","id":"1","ref":"r","data":{"a":1}}`, nil, "data"},
		// The rules of internal/strictjson, shared with the HTTP API.
		{"duplicate field in data", `{"type":"progress","id":"1","ref":"r","data":{"stage":"AUTHORIZING","stage":"WAITING_FOR_PIN"}}`, nil, "data.stage"},
		{"too large", `{"type":"ack","id":"1","ref":"r","data":{"a":"` + strings.Repeat("x", MaxFrameBytes) + `"}}`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.frame))
			if tt.want != nil {
				if err != nil {
					t.Fatalf("Decode = %v, want success", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Decode mismatch (-want +got):\n%s", diff)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode = %v, %v; want a *protocol.Error", got, err)
			}
			if pe.Field != tt.field {
				t.Errorf("Decode error field = %q (%v), want %q", pe.Field, err, tt.field)
			}
		})
	}
}

// A character a receipt cannot hold (an escaped lone surrogate; raw bytes
// that are not UTF-8, which the gateway refuses before with 1007) is read
// as U+FFFD, never a reason to refuse the frame: a result that stands for
// a charged card is never refused for one character of its receipt.
func TestResultWithReplacedCharacters(t *testing.T) {
	for name, frame := range map[string]string{
		"lone surrogate": `{"type":"result","id":"1","ref":"r","data":{"statusId":0,"customerReceipt":["A\ud800B"]}}`,
		"invalid UTF-8":  "{\"type\":\"result\",\"id\":\"1\",\"ref\":\"r\",\"data\":{\"statusId\":0,\"customerReceipt\":[\"A\xffB\"]}}",
	} {
		t.Run(name, func(t *testing.T) {
			env, err := Decode([]byte(frame))
			if err != nil {
				t.Fatalf("Decode = %v, want the result", err)
			}
			var r Result
			if err := DecodeData(env, &r); err != nil {
				t.Fatalf("DecodeData = %v, want the result", err)
			}
			if len(r.CustomerReceipt) != 1 || r.CustomerReceipt[0] != "A\uFFFDB" {
				t.Errorf("receipt = %q, want the character replaced by U+FFFD", r.CustomerReceipt)
			}
		})
	}
}

func TestDecodeData(t *testing.T) {
	env := func(typ, data string) *Envelope {
		return &Envelope{Type: typ, ID: "1", Ref: "r", Data: json.RawMessage(data)}
	}
	t.Run("result", func(t *testing.T) {
		var r Result
		err := DecodeData(env(TypeResult, `{"statusId":0,"entryMode":"CHIP","cardBrand":"VISA","maskedPan":"411111******1111",
			"authorizationCode":"A1B2C3","customerReceipt":["SALE","12.50 SEK"],"merchantReceipt":["SALE"]}`), &r)
		if err != nil {
			t.Fatal(err)
		}
		want := Result{StatusID: 0, EntryMode: "CHIP", CardBrand: "VISA", MaskedPAN: "411111******1111", AuthorizationCode: "A1B2C3",
			CustomerReceipt: []string{"SALE", "12.50 SEK"}, MerchantReceipt: []string{"SALE"}}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("DecodeData mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("payment", func(t *testing.T) {
		var p Payment
		if err := DecodeData(env(TypePurchase, `{"amount":1250,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","vatAmount":250}`), &p); err != nil {
			t.Fatal(err)
		}
		vat := int64(250)
		want := Payment{Amount: 1250, Currency: "SEK", VATAmount: &vat, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("DecodeData mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("void of the largest authorisation", func(t *testing.T) {
		// The authorised amount it releases: past MaxAmount, up to
		// instore.MaxAuthorizedAmount.
		var p Payment
		if err := DecodeData(env(TypeVoid, `{"amount":199999998,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p"}`), &p); err != nil || p.Amount != 199999998 {
			t.Fatalf("DecodeData = %v, amount %d", err, p.Amount)
		}
	})

	tests := []struct {
		name  string
		env   *Envelope
		dst   any
		field string
	}{
		{"unknown field", env(TypeProgress, `{"stage":"AUTHORIZING","x":1}`), &Progress{}, `data."x"`},
		{"field in other case", env(TypeProgress, `{"Stage":"AUTHORIZING"}`), &Progress{}, `data."Stage"`},
		{"duplicate", env(TypeProgress, `{"stage":"AUTHORIZING","stage":"WAITING_FOR_PIN"}`), &Progress{}, "data.stage"},
		{"wrong json type", env(TypeResult, `{"statusId":"0"}`), &Result{}, "data.statusId"},
		{"fraction", env(TypeResult, `{"statusId":0.5}`), &Result{}, "data.statusId"},
		{"unknown stage", env(TypeProgress, `{"stage":"FINAL"}`), &Progress{}, "data.stage"},
		{"status pending", env(TypeResult, `{"statusId":14}`), &Result{}, "data.statusId"},
		{"status reversed", env(TypeResult, `{"statusId":13}`), &Result{}, "data.statusId"},
		{"full pan", env(TypeResult, `{"statusId":0,"maskedPan":"4111111111111111"}`), &Result{}, "data.maskedPan"},
		{"receipt line too long", env(TypeResult, `{"statusId":0,"customerReceipt":["`+strings.Repeat("x", 65)+`"]}`), &Result{}, "data.customerReceipt"},
		{"receipt control char", env(TypeResult, `{"statusId":0,"merchantReceipt":["a\tb"]}`), &Result{}, "data.merchantReceipt"},
		{"hello protocol missing", env(TypeHello, `{"model":"m","softwareVersion":"1"}`), &Hello{}, "data.protocol"},
		{"hello model missing", env(TypeHello, `{"protocol":1,"softwareVersion":"1"}`), &Hello{}, "data.model"},
		{"data missing", &Envelope{Type: TypeResult, ID: "1", Ref: "r"}, &Result{}, "data"},
		{"amount zero", env(TypePurchase, `{"amount":0,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.amount"},
		{"currency", env(TypePurchase, `{"amount":1,"currency":"sek","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.currency"},
		{"tip on a refund", env(TypeRefund, `{"amount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","tip":{"mode":"ENTER_TOTAL"}}`), &Payment{}, "data.tip"},
		{"tip on a capture", env(TypeCapture, `{"amount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p","tip":{"mode":"ENTER_TOTAL"}}`), &Payment{}, "data.tip"},
		{"cashback on a preauth", env(TypePreAuth, `{"amount":9,"cashbackAmount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.cashbackAmount"},
		{"cashback on a refund", env(TypeRefund, `{"amount":9,"cashbackAmount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.cashbackAmount"},
		{"payment method on a preauth", env(TypePreAuth, `{"amount":9,"paymentMethodId":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.paymentMethodId"},
		{"original of a purchase", env(TypePurchase, `{"amount":9,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p"}`), &Payment{}, "data.originalRef"},
		{"void without its pre-auth", env(TypeVoid, `{"amount":9,"currency":"SEK","deadline":"2026-01-02T03:04:05Z"}`), &Payment{}, "data.originalRef"},
		{"capture past MaxAmount", env(TypeCapture, `{"amount":100000000,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p"}`), &Payment{}, "data.amount"},
		{"void past the largest authorisation", env(TypeVoid, `{"amount":199999999,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p"}`), &Payment{}, "data.amount"},
		{"tipAmount of an increment", env(TypeIncrement, `{"amount":9,"tipAmount":1,"currency":"SEK","deadline":"2026-01-02T03:04:05Z","originalRef":"p"}`), &Payment{}, "data.tipAmount"},
		{"cancel reason", env(TypeCancel, `{"reason":"WHY"}`), &Cancel{}, "data.reason"},
		{"trailing value", env(TypeProgress, `{"stage":"AUTHORIZING"} {}`), &Progress{}, "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeData(tt.env, tt.dst)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeData = %v, want a *protocol.Error", err)
			}
			if pe.Field != tt.field {
				t.Errorf("DecodeData error field = %q (%v), want %q", pe.Field, err, tt.field)
			}
		})
	}

	t.Run("wrong destination type", func(t *testing.T) {
		err := DecodeData(env(TypeProgress, `{"stage":"AUTHORIZING"}`), &Result{})
		var pe *Error
		if err == nil || errors.As(err, &pe) {
			t.Errorf("DecodeData(progress, *Result) = %v, want a programming error", err)
		}
	})
}

func TestEncode(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env, err := NewEnvelope(TypePurchase, "s-1", "txn_1", Payment{Amount: 1250, Currency: "SEK", ECRReference: "<a&b>", Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"purchase","id":"s-1","ref":"txn_1","data":{"amount":1250,"currency":"SEK","ecrReference":"\u003ca\u0026b\u003e","deadline":"2026-01-02T03:04:05Z"}}`
	if string(b) != want {
		t.Errorf("Encode = %s\nwant %s", b, want)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env, got); diff != "" {
		t.Errorf("Decode(Encode(env)) mismatch (-want +got):\n%s", diff)
	}
	var p Payment
	if err := DecodeData(got, &p); err != nil || p.ECRReference != "<a&b>" {
		t.Errorf("DecodeData = %+v, %v; want the ECR reference back", p, err)
	}

	for _, tc := range []struct {
		name string
		typ  string
		data any
	}{
		{"invalid payment", TypePurchase, &Payment{Amount: 0, Currency: "SEK"}},
		{"invalid cancel", TypeCancel, Cancel{Reason: "nope"}},
		{"reversal of an unknown reason", TypeReversal, Reversal{Reason: "sync"}},
		{"ECR reversal without its original", TypeReversal, Reversal{Reason: "ECR"}},
		{"late approval reversal with an original", TypeReversal, Reversal{Reason: "LATE_APPROVAL", OriginalRef: "txn_1"}},
		{"confirm timeout reversal with an original", TypeReversal, Reversal{Reason: "CONFIRM_TIMEOUT", OriginalRef: "txn_1"}},
		{"unknown type", "nope", nil},
		{"data missing", TypeLinked, nil},
	} {
		if _, err := NewEnvelope(tc.typ, "s-1", "r", tc.data); err == nil {
			t.Errorf("NewEnvelope(%s) = nil error, want one", tc.name)
		}
	}
	if _, err := Encode(&Envelope{Type: TypeAck, ID: "", Ref: "r"}); err == nil {
		t.Error("Encode(envelope without id) = nil error, want one")
	}
}

func TestDirections(t *testing.T) {
	for typ, want := range map[string][2]bool{
		TypeHello: {true, false}, TypeResult: {true, false}, TypePurchase: {false, true},
		TypeConfirm: {true, true}, "nope": {false, false},
	} {
		if got := [2]bool{FromTerminal(typ), FromServer(typ)}; got != want {
			t.Errorf("FromTerminal, FromServer(%q) = %v, want %v", typ, got, want)
		}
	}
}

// TestNewEnvelopeValidatesByType: the server never writes a command its
// type does not take (a tip on a refund), by value or by pointer.
func TestNewEnvelopeValidatesByType(t *testing.T) {
	p := Payment{Amount: 100, Currency: "SEK", Tip: &instore.Tip{Mode: instore.TipEnterTotal}}
	for _, data := range []any{p, &p} {
		if _, err := NewEnvelope(TypeRefund, "1", "r", data); err == nil || !strings.Contains(err.Error(), "data.tip") {
			t.Errorf("NewEnvelope(refund with a tip, %T) = %v, want an error on data.tip", data, err)
		}
	}
	if _, err := NewEnvelope(TypePurchase, "1", "r", p); err != nil {
		t.Errorf("NewEnvelope(purchase with a tip) = %v", err)
	}
}

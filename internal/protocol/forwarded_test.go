package protocol

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestForwarded decodes forwarded reports strictly: the same frame twice
// decodes the same (a resend is the same message, same id), and every bad
// member is refused naming it; an offline flag only on an APPROVED result.
func TestForwarded(t *testing.T) {
	const good = `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":true,"forwardedAt":"2026-03-01T12:00:00Z"}}`
	var first *Forwarded
	for range 2 { // a resend: the same frame, decoded the same
		env, err := Decode([]byte(good))
		if err != nil {
			t.Fatalf("Decode = %v", err)
		}
		if !FromTerminal(env.Type) || FromServer(env.Type) {
			t.Fatalf("forwarded travels from the terminal only")
		}
		d := NewData(env.Type).(*Forwarded)
		if err := DecodeData(env, d); err != nil {
			t.Fatalf("DecodeData = %v", err)
		}
		if d.Declined == nil || !*d.Declined || !d.ForwardedAt.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) || env.ID != "f-1" || env.Ref != "txn_1" {
			t.Fatalf("decoded %+v, %+v", env, d)
		}
		if first != nil && (*first.Declined != *d.Declined || !first.ForwardedAt.Equal(d.ForwardedAt)) {
			t.Fatalf("a resend decoded differently: %+v, %+v", first, d)
		}
		first = d
	}
	for _, tc := range []struct{ name, frame, field string }{
		{"no ref", `{"type":"forwarded","id":"f-1","data":{"declined":false,"forwardedAt":"2026-03-01T12:00:00Z"}}`, "ref"},
		{"no data", `{"type":"forwarded","id":"f-1","ref":"txn_1"}`, "data"},
		{"re", `{"type":"forwarded","id":"f-1","re":"x","ref":"txn_1","data":{"declined":false,"forwardedAt":"2026-03-01T12:00:00Z"}}`, "re"},
		{"declined missing", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"forwardedAt":"2026-03-01T12:00:00Z"}}`, "data.declined"},
		{"declined null", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":null,"forwardedAt":"2026-03-01T12:00:00Z"}}`, "data.declined"},
		{"declined a string", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":"yes","forwardedAt":"2026-03-01T12:00:00Z"}}`, "data.declined"},
		{"declined a status", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":1,"forwardedAt":"2026-03-01T12:00:00Z"}}`, "data.declined"},
		{"forwardedAt missing", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":false}}`, "data.forwardedAt"},
		{"forwardedAt not RFC 3339", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":false,"forwardedAt":"yesterday"}}`, "data"},
		{"forwardedAt out of range", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":false,"forwardedAt":"0001-01-01T00:00:01Z"}}`, "data.forwardedAt"},
		{"unknown member", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":false,"forwardedAt":"2026-03-01T12:00:00Z","statusId":0}}`, `data."statusId"`},
		{"duplicate member", `{"type":"forwarded","id":"f-1","ref":"txn_1","data":{"declined":false,"declined":true,"forwardedAt":"2026-03-01T12:00:00Z"}}`, "data.declined"},
		{"offline decline", `{"type":"result","id":"r-1","ref":"txn_1","data":{"statusId":1,"offline":true}}`, "data.offline"},
		{"offline not a boolean", `{"type":"result","id":"r-1","ref":"txn_1","data":{"statusId":0,"offline":"true"}}`, "data.offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := Decode([]byte(tc.frame))
			if err == nil {
				err = DecodeData(env, NewData(env.Type))
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Field != tc.field {
				t.Fatalf("err = %v, want a protocol error on %q", err, tc.field)
			}
		})
	}
	// An approved offline result, and its encoding by NewEnvelope.
	env, err := Decode([]byte(`{"type":"result","id":"r-1","ref":"txn_1","data":{"statusId":0,"offline":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := DecodeData(env, &r); err != nil || !r.Offline {
		t.Fatalf("an APPROVED offline result: %+v, %v", r, err)
	}
	f := true
	out, err := NewEnvelope(TypeForwarded, "f-2", "txn_1", Forwarded{Declined: &f, ForwardedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
	if err != nil || !bytes.Equal(out.Data, []byte(`{"declined":true,"forwardedAt":"2026-03-01T12:00:00Z"}`)) {
		t.Fatalf("NewEnvelope = %s, %v", out.Data, err)
	}
	if _, err := NewEnvelope(TypeForwarded, "f-3", "txn_1", Forwarded{ForwardedAt: time.Now()}); err == nil {
		t.Errorf("NewEnvelope of a forwarded without declined succeeded")
	}
}

package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

func TestDecodeBatch(t *testing.T) {
	env := func(data string) *Envelope {
		return &Envelope{Type: TypeBatch, ID: "b-1", Ref: "bat_1", Data: json.RawMessage(data)}
	}
	var b Batch
	if err := DecodeData(env(`{"number":7,"transactions":[{"reference":"txn_1","type":"PURCHASE","statusId":0,"amount":1250,"currency":"SEK"},
		{"reference":"T-0042","type":"REFUND","statusId":0,"amount":300,"currency":"SEK","offline":true}]}`), &b); err != nil {
		t.Fatal(err)
	}
	want := instore.BatchReport{MessageID: "b-1", BatchID: "bat_1", Number: 7, Items: []instore.BatchItem{
		{Ref: "txn_1", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1250, Currency: "SEK"},
		{Ref: "T-0042", Type: instore.TypeRefund, StatusID: instore.StatusApproved, Amount: 300, Currency: "SEK", Offline: true},
	}}
	if diff := cmp.Diff(want, b.Report(env(""))); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
	// An empty batch is a batch.
	if err := DecodeData(env(`{"number":1,"transactions":[]}`), &Batch{}); err != nil {
		t.Errorf("DecodeData(empty batch) = %v", err)
	}

	item := func(s string) string { return `{"number":1,"transactions":[` + s + `]}` }
	tests := []struct {
		name, data, field string
	}{
		{"number missing", `{"transactions":[]}`, "data.number"},
		{"number zero", `{"number":0,"transactions":[]}`, "data.number"},
		{"unknown member", item(`{"reference":"a","type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK","x":1}`), `data.transactions."x"`},
		{"reference missing", item(`{"type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK"}`), "data.transactions.0.reference"},
		{"reference with a space", item(`{"reference":"a b","type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK"}`), "data.transactions.0.reference"},
		{"reference twice", item(`{"reference":"a","type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK"},{"reference":"a","type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK"}`), "data.transactions.1.reference"},
		{"type", item(`{"reference":"a","type":"SALE","statusId":0,"amount":1,"currency":"SEK"}`), "data.transactions.0.type"},
		{"status pending", item(`{"reference":"a","type":"PURCHASE","statusId":14,"amount":1,"currency":"SEK"}`), "data.transactions.0.statusId"},
		{"status negative", item(`{"reference":"a","type":"PURCHASE","statusId":-1,"amount":1,"currency":"SEK"}`), "data.transactions.0.statusId"},
		{"amount negative", item(`{"reference":"a","type":"PURCHASE","statusId":0,"amount":-1,"currency":"SEK"}`), "data.transactions.0.amount"},
		{"amount too large", item(`{"reference":"a","type":"PURCHASE","statusId":0,"amount":199999999,"currency":"SEK"}`), "data.transactions.0.amount"},
		{"currency", item(`{"reference":"a","type":"PURCHASE","statusId":0,"amount":1,"currency":"kr"}`), "data.transactions.0.currency"},
		{"too many", item(strings.TrimSuffix(strings.Repeat(`{"reference":"R","type":"PURCHASE","statusId":0,"amount":1,"currency":"SEK"},`, MaxBatchTransactions+1), ",")), "data.transactions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeData(env(tt.data), &Batch{})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeData = %v, want a *protocol.Error", err)
			}
			if pe.Field != tt.field {
				t.Errorf("DecodeData error field = %q (%v), want %q", pe.Field, err, tt.field)
			}
		})
	}
}

func TestCloseAndBatchEnvelopes(t *testing.T) {
	if !FromServer(TypeClose) || FromTerminal(TypeClose) || !FromTerminal(TypeBatch) || FromServer(TypeBatch) {
		t.Errorf("directions: close from server %v, batch from terminal %v", FromServer(TypeClose), FromTerminal(TypeBatch))
	}
	if _, err := Encode(&Envelope{Type: TypeClose, ID: "s-1"}); err == nil {
		t.Error("Encode(close without ref) = nil, want an error")
	}
	frame, err := Encode(&Envelope{Type: TypeClose, ID: "s-1", Ref: "bat_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(frame), `{"type":"close","id":"s-1","ref":"bat_1"}`; got != want {
		t.Errorf("Encode(close) = %s, want %s", got, want)
	}
	if _, err := Decode([]byte(`{"type":"close","id":"s-1","ref":"bat_1","data":{"x":1}}`)); err == nil {
		t.Error("Decode(close with data) = nil, want an error")
	}
}

// TestLargestBatchFits: a batch of MaxBatchTransactions transactions,
// every field at its longest and every string escaped at its longest,
// fits MaxFrameBytes.
func TestLargestBatchFits(t *testing.T) {
	id := strings.Repeat("r", MaxIDLen-4)
	b := Batch{Number: 1<<63 - 1}
	for i := range MaxBatchTransactions {
		ref := fmt.Sprintf("%s%04d", id, i)
		b.Transactions = append(b.Transactions, BatchTransaction{Reference: ref, Type: instore.TypeIncrement,
			StatusID: instore.StatusTransactionDeclined, Amount: 2 * MaxAmount, Currency: "SEK", Offline: true})
	}
	env := Envelope{Type: TypeBatch, ID: strings.Repeat("i", MaxIDLen), Ref: strings.Repeat("f", MaxIDLen)}
	long := longest(t, &env, b)
	if len(long) > MaxFrameBytes {
		t.Errorf("the largest batch is %d bytes, more than MaxFrameBytes %d", len(long), MaxFrameBytes)
	}
	got, err := Decode(long)
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeData(got, &Batch{}); err != nil {
		t.Fatalf("DecodeData of the largest batch: %v", err)
	}
}

package onlineapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// TestStreamMessageIsTheEvent: a stream's message is the event's id, type
// and, on its data line, exactly what encoding/json makes of the event as
// the API shows it (EncodeStreamMessage writes it out by hand); data with line
// breaks is compacted so that it stays on one line.
func TestStreamMessageIsTheEvent(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 33, 17, 152141000, time.FixedZone("CET", 3600))
	// As the service writes data: encoding/json's output (HTML characters
	// escaped), or, not so, with line breaks.
	asWritten, _ := json.Marshal(map[string]any{"onlineAPIRefId": "txn_1", "amount": 1250,
		"ecrReference": "A \"quoted\" <tag> & ÅÄÖ \u2028 \n"})
	for _, data := range []string{string(asWritten), `{"a":[1,2,{"b":null}]}`, "{\n  \"a\": 1\n}"} {
		e := &instore.StoredEvent{Seq: 42, OutboxEvent: instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTransactionFinal,
			At: at, Data: []byte(data)}}
		want, err := json.Marshal(e.Wire())
		if err != nil {
			t.Fatal(err)
		}
		got := EncodeStreamMessage(e)
		wantMsg := "id: evt_0000000000000042\nevent: transaction.final\ndata: " + string(want) + "\n\n"
		if string(got) != wantMsg {
			t.Errorf("message\n%q\nwant\n%q", got, wantMsg)
		}
	}
}

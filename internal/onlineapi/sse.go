package onlineapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/instore-dev/instore"
)

// EncodeStreamMessage is e as a server-sent message, what an event stream
// (GET /events/stream) writes; the server makes it the Service's
// EncodeEvent, so that the shared feed encodes each event once. The
// event's JSON is written out here rather than by encoding/json: its data
// is already the compact JSON the service encoded, and the id, type and
// time need no escaping; TestStreamMessageIsTheEvent checks it is what
// json.Marshal of the event's EventWire gives.
func EncodeStreamMessage(e *instore.StoredEvent) []byte {
	id, at := instore.EventID(e.Seq), e.At.UTC().Format(instore.MicroRFC3339)
	typ, err := json.Marshal(e.Type)
	if err != nil {
		panic(fmt.Sprintf("instore: encode event type: %v", err))
	}
	b := make([]byte, 0, 2*len(id)+2*len(typ)+len(at)+len(e.Data)+64)
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, "\nevent: "...)
	b = append(b, typ[1:len(typ)-1]...)
	b = append(b, "\ndata: {\"id\":\""...)
	b = append(b, id...)
	b = append(b, "\",\"type\":"...)
	b = append(b, typ...)
	b = append(b, ",\"createdAt\":\""...)
	b = append(b, at...)
	b = append(b, "\",\"data\":"...)
	data := e.Data
	if bytes.ContainsAny(data, "\r\n") {
		// Not as the service writes it: compacted, so that no line break
		// ends the message's data line.
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			panic(fmt.Sprintf("instore: event %d: data is not JSON: %v", e.Seq, err))
		}
		data = c.Bytes()
	}
	b = append(b, data...)
	return append(b, "}\n\n"...)
}

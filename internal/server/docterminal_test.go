package server_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// A terminal written from docs/terminal-protocol.md alone: its frames are
// the document's JSON examples with their ids, refs and values replaced,
// and every frame the server sends it is checked against the document's
// message types and field tables. It uses nothing of internal/protocol,
// so that the document, not the Go types, is what the server must agree
// with.

// protocolDoc is what the test reads of the document.
type protocolDoc struct {
	// examples holds the JSON examples of each message type, in order.
	examples map[string][]map[string]any
	// fields holds, per message type and direction, the documented data
	// fields and their types ("string", "integer", ...).
	toTerminal, toServer map[string]map[string]string
}

var backticked = regexp.MustCompile("`([a-z-]+)`")

func readProtocolDoc(t *testing.T) *protocolDoc {
	t.Helper()
	b, err := os.ReadFile("../../docs/terminal-protocol.md")
	must(t, err)
	d := &protocolDoc{examples: map[string][]map[string]any{}, toTerminal: map[string]map[string]string{}, toServer: map[string]map[string]string{}}
	var section map[string]map[string]string // the direction being read
	var types []string                       // the message types of the current heading
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## 4."):
			section = d.toTerminal
		case strings.HasPrefix(line, "## 5."):
			section = d.toServer
		case strings.HasPrefix(line, "## "):
			section, types = nil, nil
		case strings.HasPrefix(line, "### ") && section != nil:
			types = nil
			for _, m := range backticked.FindAllStringSubmatch(line, -1) {
				types = append(types, m[1])
				if section[m[1]] == nil {
					section[m[1]] = map[string]string{}
				}
			}
		case strings.HasPrefix(line, "| `") && section != nil:
			cols := strings.Split(line, "|")
			name, typ := strings.Trim(strings.TrimSpace(cols[1]), "`"), strings.TrimSpace(cols[2])
			for _, m := range types {
				section[m][name] = typ
			}
		case strings.HasPrefix(line, `{"type":`):
			var ex map[string]any
			if err := json.Unmarshal([]byte(line), &ex); err != nil {
				t.Fatalf("example %s: %v", line, err)
			}
			typ := ex["type"].(string)
			d.examples[typ] = append(d.examples[typ], ex)
		}
	}
	for _, typ := range []string{"hello", "ack", "progress", "result", "confirm", "print-result", "update-status"} {
		if len(d.examples[typ]) == 0 {
			t.Fatalf("the document has no example of %s", typ)
		}
	}
	return d
}

// frame is the document's first example of typ (or the first whose data
// field key is match, when match is given), with the envelope fields env
// and the data fields data replaced; a nil value removes a field.
func (d *protocolDoc) frame(t *testing.T, typ string, env, data map[string]any, match ...string) []byte {
	t.Helper()
	var ex map[string]any
	for _, e := range d.examples[typ] {
		if len(match) == 2 {
			if dm, _ := e["data"].(map[string]any); dm[match[0]] != match[1] {
				continue
			}
		}
		ex = e
		break
	}
	if ex == nil {
		t.Fatalf("no example of %s %v in the document", typ, match)
	}
	var f map[string]any // a deep copy
	b, _ := json.Marshal(ex)
	must(t, json.Unmarshal(b, &f))
	set := func(m map[string]any, k string, v any) {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	for k, v := range env {
		set(f, k, v)
	}
	if len(data) > 0 {
		dm, _ := f["data"].(map[string]any)
		if dm == nil {
			dm = map[string]any{}
			f["data"] = dm
		}
		for k, v := range data {
			set(dm, k, v)
		}
	}
	out, err := json.Marshal(f)
	must(t, err)
	return out
}

// check fails unless a server frame is what the document says a server
// sends (problems).
func (d *protocolDoc) check(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	f, problems := d.problems(raw)
	for _, p := range problems {
		t.Errorf("%s: %s", p, raw)
	}
	return f
}

// problems lists how a server frame differs from what the document says
// a server sends: a type of section 4, only the envelope's fields, `re` on
// confirm only, and data fields of the type's table with their types.
func (d *protocolDoc) problems(raw []byte) (map[string]any, []string) {
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, []string{"not a JSON object"}
	}
	typ, _ := f["type"].(string)
	fields, ok := d.toTerminal[typ]
	if !ok {
		return f, []string{fmt.Sprintf("type %q, which section 4 does not document", typ)}
	}
	var out []string
	for k := range f {
		if !slices.Contains([]string{"type", "id", "re", "ref", "data"}, k) {
			out = append(out, fmt.Sprintf("envelope field %q", k))
		}
	}
	if _, ok := f["re"]; ok && typ != "confirm" {
		out = append(out, typ+" with re")
	}
	if id, _ := f["id"].(string); id == "" || len(id) > 64 {
		out = append(out, fmt.Sprintf("id %q", id))
	}
	data, _ := f["data"].(map[string]any)
	for k, v := range data {
		want, ok := fields[k]
		if !ok {
			out = append(out, fmt.Sprintf("%s with data field %q, which its table does not document", typ, k))
			continue
		}
		if !jsonIs(v, want) {
			out = append(out, fmt.Sprintf("%s field %q = %v, want a JSON %s as documented", typ, k, v, want))
		}
	}
	return f, out
}

func jsonIs(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array of strings":
		a, ok := v.([]any)
		for _, e := range a {
			if _, s := e.(string); !s {
				return false
			}
		}
		return ok
	}
	return false
}

// docTerminal is the terminal the document describes, on one session.
type docTerminal struct {
	t    *testing.T
	doc  *protocolDoc
	conn *websocket.Conn
	in   chan []byte
	held []map[string]any // frames read while another type was expected
	n    int
}

func dialDocTerminal(t *testing.T, doc *protocolDoc, gatewayURL, serial, secret string) *docTerminal {
	t.Helper()
	// Section 2: HTTP Basic authentication on the upgrade.
	h := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(serial+":"+secret))}}
	conn, _, err := websocket.DefaultDialer.Dial(gatewayURL+"/terminal/v1/connect", h)
	must(t, err)
	d := &docTerminal{t: t, doc: doc, conn: conn, in: make(chan []byte, 64)}
	t.Cleanup(func() { conn.Close() })
	go func() {
		defer close(d.in)
		for {
			typ, b, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.TextMessage {
				t.Errorf("server sent a frame of WebSocket type %d, want text", typ)
			}
			d.in <- b
		}
	}()
	d.send(d.doc.frame(t, "hello", map[string]any{"id": d.id()}, map[string]any{"model": "countertop", "softwareVersion": "1.0.0"}))
	return d
}

// id returns a new message id, unique over the device's life.
func (d *docTerminal) id() string {
	d.n++
	return fmt.Sprintf("t-%06d", d.n)
}

func (d *docTerminal) send(frame []byte) {
	d.t.Helper()
	must(d.t, d.conn.WriteMessage(websocket.TextMessage, frame))
}

// expect returns the next server frame of type typ (and, when ref is
// given, for ref); frames of other types are kept for later.
func (d *docTerminal) expect(typ, ref string) map[string]any {
	d.t.Helper()
	match := func(f map[string]any) bool { return f["type"] == typ && (ref == "" || f["ref"] == ref) }
	for i, f := range d.held {
		if match(f) {
			d.held = append(d.held[:i], d.held[i+1:]...)
			return f
		}
	}
	timeout := time.After(15 * time.Second)
	for {
		select {
		case b, ok := <-d.in:
			if !ok {
				d.t.Fatalf("the session ended while waiting for %s", typ)
			}
			f := d.doc.check(d.t, b)
			if match(f) {
				return f
			}
			d.held = append(d.held, f)
		case <-timeout:
			d.t.Fatalf("no %s from the server; held %v", typ, d.held)
		}
	}
}

func dataOf(f map[string]any) map[string]any {
	m, _ := f["data"].(map[string]any)
	return m
}

// ack acknowledges the command f, from the document's example.
func (d *docTerminal) ack(f map[string]any) {
	d.send(d.doc.frame(d.t, "ack", map[string]any{"id": d.id(), "ref": f["ref"]}, nil))
}

// confirm confirms the server message f.
func (d *docTerminal) confirm(f map[string]any) {
	d.send(d.doc.frame(d.t, "confirm", map[string]any{"id": d.id(), "re": f["id"], "ref": f["ref"]}, nil))
}

// result reports the outcome of the transaction ref, from the document's
// example (its receipts included), and waits for the server's confirm.
func (d *docTerminal) result(ref string, statusID instore.TransactionStatus) {
	d.t.Helper()
	id := d.id()
	d.send(d.doc.frame(d.t, "result", map[string]any{"id": id, "ref": ref}, map[string]any{"statusId": statusID}))
	for {
		c := d.expect("confirm", ref)
		if c["re"] == id {
			return
		}
	}
}

// TestDocTerminal drives a terminal built from docs/terminal-protocol.md
// through every flow of the document against a real server: purchase,
// print, the ECR's reversal, cancel, the reversal of a late approval, a
// printReceipt purchase and a software update.
func TestDocTerminal(t *testing.T) {
	doc := readProtocolDoc(t)
	// The checks catch what a server could get wrong.
	for frame, want := range map[string]int{
		`{"type":"print","id":"s-1","ref":"prt_1","data":{"lines":["a"]}}`:                           0,
		`{"type":"reversal","id":"s-1","ref":"txn_1","data":{"reason":"ECR","originalRef":"txn_0"}}`: 0,
		`{"type":"reversal","id":"s-1","ref":"txn_1","data":{"reason":"ECR","original":"txn_0"}}`:    1,
		`{"type":"cancel","id":"s-1","re":"t-1","ref":"txn_1","data":{"reason":1}}`:                  2,
		`{"type":"dance","id":"s-1"}`: 1,
	} {
		if _, got := doc.problems([]byte(frame)); len(got) != want {
			t.Errorf("problems(%s) = %q, want %d", frame, got, want)
		}
	}
	ck, clock := newClock()
	s := owedEnv(t, func(*server.Config) {}, func(c *server.Config) {
		clock(c)
		c.AckTimeout = 5 * time.Second
		c.TransactionDeadline = 2 * time.Second
	})
	s.importCatalogue(t, testCatalogue(s.customer.ID))
	term, secret := s.provision(t, "DOC-1")
	d := dialDocTerminal(t, doc, s.srv.URL("terminal"), "DOC-1", secret)
	if l := d.expect("linked", ""); dataOf(l)["terminalId"] != term {
		t.Fatalf("linked %v, want terminal ID %s", l, term)
	}

	// purchase: ack, progress, result, confirm.
	purchase := func(body map[string]any) (string, chan reply) {
		t.Helper()
		done := make(chan reply, 1)
		go func() { done <- s.post(t, "/in-store/api/v1/purchase", body, nil) }()
		cmd := d.expect("purchase", "")
		if data := dataOf(cmd); data["amount"] != float64(body["amount"].(int)) || data["currency"] != "SEK" {
			t.Errorf("purchase data %v, want the ECR's amount and currency", data)
		}
		if _, ok := body["paymentMethodId"]; ok && dataOf(cmd)["paymentMethodCode"] != "SWISH" {
			t.Errorf("purchase data %v, want the payment method's code", dataOf(cmd))
		}
		d.ack(cmd)
		return cmd["ref"].(string), done
	}
	ref, done := purchase(map[string]any{"terminalId": term, "amount": 1250, "currency": "SEK"})
	(<-done).tx(t, 201)
	d.send(doc.frame(t, "progress", map[string]any{"id": d.id(), "ref": ref}, nil))
	d.result(ref, instore.StatusApproved)
	if got := s.transaction(t, ref); got.StatusID != instore.StatusApproved {
		t.Errorf("purchase = %d, want APPROVED", got.StatusID)
	}

	// print: confirm, print-result.
	printed := make(chan reply, 1)
	go func() {
		printed <- s.post(t, "/in-store/api/v1/print", map[string]any{"terminalId": term, "lines": []string{"Thank you", "", "Welcome back"}}, nil)
	}()
	p := d.expect("print", "")
	if lines := dataOf(p)["lines"]; fmt.Sprint(lines) != fmt.Sprint([]any{"Thank you", "", "Welcome back"}) {
		t.Errorf("print lines %v", lines)
	}
	d.confirm(p)
	d.send(doc.frame(t, "print-result", map[string]any{"id": d.id(), "ref": p["ref"]}, map[string]any{"statusId": instore.PrintSuccess}))
	if j := (<-printed).job(t); j.Status != "SUCCESS" || j.PrintID != p["ref"] {
		t.Errorf("print job %+v, want %v SUCCESS", j, p["ref"])
	}

	// The ECR's reversal: a transaction of its own, acknowledged and
	// reported on.
	revDone := make(chan reply, 1)
	go func() { revDone <- s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": ref}, nil) }()
	rev := d.expect("reversal", "")
	if data := dataOf(rev); data["reason"] != "ECR" || data["originalRef"] != ref || rev["ref"] == ref {
		t.Fatalf("ECR reversal %v, want reason ECR, originalRef %s and a ref of its own", rev, ref)
	}
	d.ack(rev)
	(<-revDone).tx(t, 201)
	d.result(rev["ref"].(string), instore.StatusApproved)
	if got := s.transaction(t, ref); got.StatusID != instore.StatusReversed {
		t.Errorf("reversed purchase = %d, want REVERSED", got.StatusID)
	}
	if got := s.get(t, "/in-store/api/v1/transaction/"+rev["ref"].(string)).tx(t, 200); got.StatusID != instore.StatusApproved || got.Type != instore.TypeReversal {
		t.Errorf("reversal = %s %d, want an APPROVED REVERSAL", got.Type, got.StatusID)
	}

	// cancel ECR: confirm, ABORTED_BY_CASHIER.
	// (paid with a payment method, whose code comes with it).
	ref, done = purchase(map[string]any{"terminalId": term, "amount": 2000, "currency": "SEK", "paymentMethodId": 0})
	(<-done).tx(t, 201)
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
	c := d.expect("cancel", ref)
	if dataOf(c)["reason"] != "ECR" {
		t.Errorf("cancel %v, want reason ECR", c)
	}
	d.confirm(c)
	d.result(ref, instore.StatusAbortedByCashier)
	wantStatus(t, s.transaction(t, ref), instore.StatusAbortedByCashier, "WP37", "cancelled purchase")

	// A late approval: cancel DEADLINE, then the reversal LATE_APPROVAL,
	// which the terminal confirms.
	ref, done = purchase(map[string]any{"terminalId": term, "amount": 3000, "currency": "SEK"})
	(<-done).tx(t, 201)
	advance(t, ck, 2*time.Second) // the deadline
	c = d.expect("cancel", ref)
	if dataOf(c)["reason"] != "DEADLINE" {
		t.Errorf("cancel %v, want reason DEADLINE", c)
	}
	d.confirm(c)
	d.result(ref, instore.StatusApproved)
	late := d.expect("reversal", ref)
	if data := dataOf(late); data["reason"] != "LATE_APPROVAL" || data["originalRef"] != nil {
		t.Errorf("late approval reversal %v, want reason LATE_APPROVAL without originalRef", late)
	}
	d.confirm(late)
	wantStatus(t, s.transaction(t, ref), instore.StatusReversed, "WP36", "late approval")

	// printReceipt: the customer receipt of the result is printed.
	ref, done = purchase(map[string]any{"terminalId": term, "amount": 4000, "currency": "SEK", "printReceipt": true})
	(<-done).tx(t, 201)
	d.result(ref, instore.StatusApproved)
	p = d.expect("print", "")
	if want := dataOf(doc.examples["result"][0])["customerReceipt"]; fmt.Sprint(dataOf(p)["lines"]) != fmt.Sprint(want) {
		t.Errorf("receipt print lines %v, want the result's customer receipt %v", dataOf(p)["lines"], want)
	}
	d.confirm(p)
	d.send(doc.frame(t, "print-result", map[string]any{"id": d.id(), "ref": p["ref"]}, map[string]any{"statusId": instore.PrintSuccess}))
	if got := s.waitPrint(t, p["ref"].(string)); got != "SUCCESS" {
		t.Errorf("receipt print = %s, want SUCCESS", got)
	}

	// A software update: DOWNLOADING, INSTALLED, each confirmed.
	u := s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	upd := d.expect("update", u.UpdateID)
	if data := dataOf(upd); data["version"] != "1.2.0" || data["packageId"] != "countertop-1.2.0" {
		t.Errorf("update %v, want countertop-1.2.0", upd)
	}
	for _, st := range []struct{ status, version string }{{"DOWNLOADING", ""}, {"INSTALLED", "1.2.0"}} {
		id := d.id()
		data := map[string]any{"status": st.status}
		if st.version != "" {
			data["softwareVersion"] = st.version
		}
		d.send(doc.frame(t, "update-status", map[string]any{"id": id, "ref": u.UpdateID}, data, "status", st.status))
		if c := d.expect("confirm", u.UpdateID); c["re"] != id {
			t.Errorf("update-status %s confirmed with re %v, want %s", st.status, c["re"], id)
		}
	}
	s.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled))

	// Every message the server sent was one the document describes, and
	// nothing is owed any more.
	for _, f := range d.held {
		if f["type"] != "confirm" {
			t.Errorf("the server sent %v, which no flow expected", f)
		}
	}
}

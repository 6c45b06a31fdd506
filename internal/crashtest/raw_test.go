package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// rawTerminal is a terminal written from the protocol alone, in the test's
// process (the server's is another), so that the test chooses the moment
// it acknowledges. It behaves as the protocol asks: it acknowledges a
// command at once and approves it, keeps each result until confirmed and
// resends it after every reconnect, acknowledges a repeated command again.
// Only a command taken with hold is left for the test to answer.
type rawTerminal struct {
	gateway, serial, secret string

	wmu  sync.Mutex // one writer at a time
	mu   sync.Mutex
	conn *websocket.Conn
	n    int
	// held receives the next new purchase instead of an answer (hold).
	held    chan protocol.Envelope
	known   map[string]bool // refs of the commands seen
	acked   map[string]bool
	results []*rawResult // in the order made; confirmed ones are dropped
	code    chan string
	// reversed holds the reason of each reversal of a transaction the
	// server made on its own (LATE_APPROVAL, CONFIRM_TIMEOUT), by ref.
	reversed map[string]string
	// batches is its day close (close_raw_test.go).
	batches rawBatches
}

type rawResult struct {
	ref string
	env protocol.Envelope
}

func newRawTerminal(gateway, serial, secret string) *rawTerminal {
	return &rawTerminal{gateway: gateway, serial: serial, secret: secret,
		known: map[string]bool{}, acked: map[string]bool{}, code: make(chan string, 1), reversed: map[string]string{}}
}

// run keeps a session with the gateway until ctx ends, reconnecting at
// once (every 100 ms) when it drops.
func (r *rawTerminal) run(ctx context.Context) {
	for ctx.Err() == nil {
		r.session(ctx)
		sleep(ctx, 100*time.Millisecond)
	}
}

func (r *rawTerminal) session(ctx context.Context) {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(r.serial, r.secret)
	h := http.Header{"Authorization": {req.Header.Get("Authorization")}}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, r.gateway, h)
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	r.mu.Lock()
	r.conn = conn
	pending := make([]protocol.Envelope, 0, len(r.results))
	for _, res := range r.results {
		pending = append(pending, res.env)
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.conn == conn {
			r.conn = nil
		}
		r.mu.Unlock()
	}()
	if r.write(conn, r.envelope(protocol.TypeHello, "", "", protocol.Hello{Protocol: 1, Model: instore.ModelCountertop, SoftwareVersion: "1.0.0"})) != nil {
		return
	}
	// Right after hello, every unconfirmed result, with its first id.
	for _, env := range pending {
		if r.write(conn, env) != nil {
			return
		}
	}
	for {
		conn.SetReadDeadline(time.Now().Add(40 * time.Second))
		var env protocol.Envelope
		if err := conn.ReadJSON(&env); err != nil {
			return
		}
		r.handle(conn, env)
	}
}

func (r *rawTerminal) handle(conn *websocket.Conn, env protocol.Envelope) {
	switch env.Type {
	case protocol.TypeLinkCode:
		var lc protocol.LinkCode
		json.Unmarshal(env.Data, &lc)
		select {
		case r.code <- lc.Code:
		default:
		}
	case protocol.TypePurchase, protocol.TypeRefund, protocol.TypePreAuth,
		protocol.TypeIncrement, protocol.TypeCapture, protocol.TypeVoid:
		r.mu.Lock()
		if r.known[env.Ref] {
			// A repetition: acknowledge again (if it was), resend the result.
			acked := r.acked[env.Ref]
			var res *protocol.Envelope
			for _, x := range r.results {
				if x.ref == env.Ref {
					res = &x.env
				}
			}
			r.mu.Unlock()
			if acked {
				r.write(conn, r.envelope(protocol.TypeAck, env.ID, env.Ref, nil))
			}
			if res != nil {
				r.write(conn, *res)
			}
			return
		}
		r.known[env.Ref] = true
		if r.held != nil {
			held := r.held
			r.held = nil
			r.mu.Unlock()
			held <- env
			return
		}
		r.acked[env.Ref] = true
		r.mu.Unlock()
		r.write(conn, r.envelope(protocol.TypeAck, env.ID, env.Ref, nil))
		r.finish(env.Ref, instore.StatusApproved)
	case protocol.TypeClose:
		r.onClose(conn, env)
	case protocol.TypeConfirm:
		r.mu.Lock()
		kept := r.results[:0]
		for _, x := range r.results {
			if x.env.ID != env.Re {
				kept = append(kept, x)
			}
		}
		r.results = kept
		r.mu.Unlock()
	case protocol.TypeReversal:
		// The server reversed a transaction on its own: reversed with the
		// acquirer, and the message confirmed.
		var rv protocol.Reversal
		json.Unmarshal(env.Data, &rv)
		r.mu.Lock()
		r.reversed[env.Ref] = rv.Reason
		r.mu.Unlock()
		r.write(conn, r.envelope(protocol.TypeConfirm, env.ID, env.Ref, nil))
	case protocol.TypeCancel:
		// A command it acknowledged and has no result for ends in
		// TECHNICAL_ERROR; one it never acknowledged is dropped.
		r.mu.Lock()
		has := false
		for _, x := range r.results {
			has = has || x.ref == env.Ref
		}
		acked := r.acked[env.Ref]
		r.mu.Unlock()
		if acked && !has {
			r.finish(env.Ref, instore.StatusTechnicalError)
		}
	}
}

// reversal returns the reason of the reversal of ref the terminal got ("":
// none).
func (r *rawTerminal) reversal(ref string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reversed[ref]
}

// hold makes the next new payment command (a purchase, a refund, a
// pre-auth or an operation on one) come to the returned channel, neither
// acknowledged nor answered.
func (r *rawTerminal) hold() <-chan protocol.Envelope {
	ch := make(chan protocol.Envelope, 1)
	r.mu.Lock()
	r.held = ch
	r.mu.Unlock()
	return ch
}

// ack acknowledges a held command; it returns once the frame is written.
func (r *rawTerminal) ack(cmd protocol.Envelope) error {
	r.mu.Lock()
	r.acked[cmd.Ref] = true
	conn := r.conn
	r.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("no session")
	}
	return r.write(conn, r.envelope(protocol.TypeAck, cmd.ID, cmd.Ref, nil))
}

// finish stores the result of ref and sends it; it is resent after every
// reconnect until confirmed.
func (r *rawTerminal) finish(ref string, statusID instore.TransactionStatus) {
	res := protocol.Result{StatusID: statusID}
	if statusID == instore.StatusApproved {
		res.MaskedPAN, res.AuthorizationCode, res.EntryMode, res.CardBrand = "******0119", "CRASH1", "CHIP", "VISA"
	}
	env := r.envelope(protocol.TypeResult, "", ref, res)
	r.mu.Lock()
	r.results = append(r.results, &rawResult{ref: ref, env: env})
	conn := r.conn
	r.mu.Unlock()
	if conn != nil {
		r.write(conn, env)
	}
}

func (r *rawTerminal) envelope(typ, re, ref string, data any) protocol.Envelope {
	r.mu.Lock()
	r.n++
	id := fmt.Sprintf("raw-%d-%d", time.Now().UnixNano(), r.n)
	r.mu.Unlock()
	env := protocol.Envelope{Type: typ, ID: id, Re: re, Ref: ref}
	if data != nil {
		env.Data, _ = json.Marshal(data)
	}
	return env
}

func (r *rawTerminal) write(conn *websocket.Conn, env protocol.Envelope) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return conn.WriteJSON(env)
}

// linkCode waits for the code the gateway gives the unlinked terminal.
func (r *rawTerminal) linkCode(ctx context.Context) (string, error) {
	return awaitLinkCode(ctx, r.code)
}

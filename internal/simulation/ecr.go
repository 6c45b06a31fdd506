package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// ecr is a till: it sells on its terminal through the real Online API
// handler of a node the load balancer picks, retries with the same
// Idempotency-Key when an answer is lost or not final yet, polls, cancels,
// confirms (or forgets to), refunds, reverses and prints, and gives up
// after a few tries. It never waits inside a request: its requests' context
// is done, so the service answers with what it has at once, as it does a
// client that went away, and the ECR asks again later.
type ecr struct {
	w          *world
	name       string
	terminalID string
	keys       int
	sales      []*sale
	retry      []*request // requests whose answer it does not know yet
}

// sale is what the ECR knows of a transaction it created.
type sale struct {
	ref          string
	kind         instore.TransactionType
	amount       int64
	cashback     int64
	status       instore.TransactionStatus
	confirmAsked bool
	confirmed    bool
	version      int64 // of the state status is from
	// orig is the pre-auth an INCREMENT, CAPTURE, VOID or refund of a
	// pre-auth names; auth a PRE_AUTH's authorisation as last told;
	// counted: a refund of a pre-auth told APPROVED is counted (told).
	orig    string
	auth    *instore.Authorization
	counted bool
	// offline: a purchase told approved offline; forwarding its
	// forwarding state as last told (offline.go).
	offline    bool
	forwarding instore.ForwardingState
}

type request struct {
	name, method, path, key string
	body                    []byte
	tries                   int
	sale                    *sale // what it created or acts on
	// live: the ECR waits for the answer (cancel, confirm: the service
	// answers them without waiting for the terminal), so the
	// Idempotency-Key middleware stores it and a retry replays it.
	live bool
}

// answer is what the ECR reads in an answer: a transaction or a problem.
type answer struct {
	OnlineAPIRefID string                     `json:"onlineAPIRefId"`
	StatusID       *instore.TransactionStatus `json:"statusId"`
	Version        int64                      `json:"version"`
	ErrorCode      string                     `json:"errorCode"`
	Type           string                     `json:"type"`
	Detail         string                     `json:"detail"`
	AcknowledgedAt *time.Time                 `json:"acknowledgedAt"`
	Authorization  *instore.Authorization     `json:"authorization"`
	Result         *instore.Result            `json:"result"`
	Forwarding     *instore.Forwarding        `json:"forwarding"`
}

// act is the ECR's next move, drawn from the seed.
func (e *ecr) act() {
	w := e.w
	if w.quiet {
		return
	}
	defer w.sched.after(time.Duration(1+w.ecrRng.IntN(8))*time.Second, "ecr "+e.name, e.act)
	r := w.ecrRng
	if len(e.retry) > 0 && r.IntN(2) == 0 {
		q := e.retry[0]
		e.retry = e.retry[1:]
		if q.tries < 6 {
			e.call(q)
		}
		return
	}
	open := e.open()
	switch x := r.IntN(100); {
	case open != nil && x < 30:
		e.call(&request{name: "poll", method: http.MethodGet, path: "/transaction/" + open.ref, sale: open})
	case open != nil && x < 38:
		e.call(e.keyed(e.post("cancel", "/cancel", false, map[string]any{"terminalId": e.terminalID, "onlineAPIRefId": open.ref}, open)))
	case r.IntN(3) == 0:
		e.preAuthMove(r.IntN(100))
	case r.Float64() < w.payback:
		e.afterSale(r.IntN(100))
	case r.IntN(4) == 0:
		e.afterSale(72 + r.IntN(8)) // pay a receipt back at two tills at once
	default:
		e.purchase()
	}
}

// open is the ECR's latest sale still PENDING as far as it knows.
func (e *ecr) open() *sale {
	for i := len(e.sales) - 1; i >= 0; i-- {
		if s := e.sales[i]; s.status == instore.StatusPending {
			return s
		}
	}
	return nil
}

func (e *ecr) purchase() {
	r := e.w.ecrRng
	amount := int64(100 + r.IntN(9900))
	body := map[string]any{"terminalId": e.terminalID, "amount": amount, "currency": "EUR"}
	s := &sale{kind: instore.TypePurchase, amount: amount, status: instore.StatusPending}
	if r.IntN(4) == 0 {
		s.cashback = int64(r.IntN(int(amount / 2)))
		body["cashbackAmount"] = s.cashback
	}
	if r.IntN(3) == 0 {
		body["confirmWithinSeconds"] = 10 + r.IntN(30)
		s.confirmAsked = true
	}
	switch r.IntN(6) {
	case 0:
		body["tip"] = map[string]any{"mode": instore.TipPrompt, "suggestions": []int{10, 15, 20}}
	case 1:
		body["tip"] = map[string]any{"mode": instore.TipEnterTotal}
	case 2:
		body["tip"] = map[string]any{"mode": instore.TipFixed, "amount": r.Int64N(amount/4 + 1)}
	}
	e.call(e.post("purchase", "/purchase", true, body, s))
}

// afterSale acts on an approved sale: confirm, refund (at its till or
// another's), pay it back at two tills at once, reverse, print.
func (e *ecr) afterSale(x int) {
	r := e.w.ecrRng
	var approved []*sale
	owner := map[*sale]*ecr{}
	for _, o := range e.w.ecrs {
		for _, s := range o.sales {
			settled := !s.confirmAsked || s.confirmed // one awaiting its confirmation takes no refund
			if s.kind == instore.TypePurchase && s.status == instore.StatusApproved && (o == e || x >= 60 && x < 80 && settled) {
				approved = append(approved, s) // a refund may be made at another till
				owner[s] = o
			}
		}
	}
	if len(approved) == 0 {
		return
	}
	if off := e.w.offlineSales(); len(off) > 0 && r.IntN(2) == 0 {
		e.offlineMove(off[r.IntN(len(off))]) // refunds and reversals of offline sales, the most at stake
		return
	}
	s := approved[r.IntN(len(approved))]
	switch {
	case s.confirmAsked && !s.confirmed && x < 60:
		e.call(e.keyed(e.post("confirm", "/transaction/"+s.ref+"/confirm", false, nil, s)))
	case x < 72:
		e.refund(s, 1+int64(r.IntN(int(s.amount))))
	case x < 80:
		// The same receipt paid back at two tills at the same moment: a
		// refund of most of it here, and another refund at another till,
		// or, when it is still the latest of its own till, its reversal
		// there (only its till may make it).
		if s.confirmAsked && !s.confirmed {
			return
		}
		part := func() int64 { return (s.amount-s.cashback)/2 + 1 + int64(r.IntN(int((s.amount-s.cashback)/2+1))) }
		o := owner[s]
		e.w.note("race %s %s on %s", e.name, o.name, s.ref)
		e.refund(s, part())
		if o.sales[len(o.sales)-1] == s && r.IntN(2) == 0 {
			o.call(o.post("reversal", "/reversal", true, map[string]any{"onlineAPIRefId": s.ref},
				&sale{kind: instore.TypeReversal, amount: s.amount, status: instore.StatusPending}))
		} else if other := e.w.ecrs[(slices.Index(e.w.ecrs, e)+1+r.IntN(len(e.w.ecrs)-1))%len(e.w.ecrs)]; other != e {
			other.refund(s, part())
		}
	case x < 92:
		rs := &sale{kind: instore.TypeReversal, amount: s.amount, status: instore.StatusPending}
		e.call(e.post("reversal", "/reversal", true, map[string]any{"onlineAPIRefId": s.ref}, rs))
	default:
		e.call(e.post("print", "/print", false, map[string]any{"terminalId": e.terminalID, "lines": []string{"Thank you"}}, nil))
	}
}

// refund refunds amount of the sale (or captured pre-auth) s at e's till.
func (e *ecr) refund(s *sale, amount int64) {
	rs := &sale{kind: instore.TypeRefund, amount: amount, orig: s.ref, status: instore.StatusPending}
	e.call(e.post("refund", "/refund", true, map[string]any{"terminalId": e.terminalID, "amount": amount,
		"currency": "EUR", "originalOnlineAPIRefId": s.ref}, rs))
}

// post is a POST request; one that creates a transaction carries a new
// Idempotency-Key, also its ecrReference.
func (e *ecr) post(name, path string, create bool, body map[string]any, s *sale) *request {
	q := &request{name: name, method: http.MethodPost, path: path, sale: s}
	if create {
		e.keys++
		q.key = fmt.Sprintf("%s-%d", e.name, e.keys)
		body["ecrReference"] = q.key
	}
	if body != nil {
		q.body, _ = json.Marshal(body)
	}
	return q
}

// keyed gives a request that changes something but creates no
// transaction an Idempotency-Key, and waits for its answer.
func (e *ecr) keyed(q *request) *request {
	e.keys++
	q.key, q.live = fmt.Sprintf("%s-%d", e.name, e.keys), true
	return q
}

// doneCtx is the context of the ECR's requests: done from the start.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// call sends q to a live node as a task of that node.
func (e *ecr) call(q *request) {
	w := e.w
	n := w.pickNode()
	q.tries++
	if n == nil {
		e.retry = append(e.retry, q)
		return
	}
	w.sched.spawn(n, "ecr "+q.name, func() {
		ctx := doneCtx
		if q.live || q.method == http.MethodGet {
			ctx = context.Background()
		}
		r := w.apiRequest(ctx, q.method, q.path, q.body)
		if q.key != "" {
			r.Header.Set("Idempotency-Key", q.key)
		}
		rec := httptest.NewRecorder()
		n.handler.ServeHTTP(rec, r)
		if !n.up || w.faults.lose() {
			// The node died under it, or the answer was lost: the ECR
			// does not know what happened, and asks again.
			if q.key != "" || q.method == http.MethodGet {
				e.retry = append(e.retry, q)
			}
			return
		}
		e.answered(q, rec.Code, rec.Body.Bytes())
	})
}

func (e *ecr) answered(q *request, code int, body []byte) {
	w := e.w
	var a answer
	_ = json.Unmarshal(body, &a)
	w.note("answer %s %s %d %s %s %s", e.name, q.name, code, a.OnlineAPIRefID, a.ErrorCode, strings.TrimPrefix(a.Type, "urn:instore:problem:")+" "+a.Detail)
	if code == 500 || code == 503 {
		w.fail("no 500 or 503", "%s %s answered %d", q.method, q.path, code)
		return
	}
	if code == http.StatusConflict && q.key != "" && strings.Contains(a.Detail, "still running") {
		e.retry = append(e.retry, q) // the same key at once elsewhere: ask again later
		return
	}
	if q.key != "" && a.OnlineAPIRefID != "" && (code < 300 || a.ErrorCode == instore.WP25 || a.ErrorCode == instore.WP23) {
		if prev := w.keyRef[q.key]; prev != "" && prev != a.OnlineAPIRefID {
			w.fail("one transaction per Idempotency-Key", "key %s answered %s, then %s", q.key, prev, a.OnlineAPIRefID)
		}
		w.keyRef[q.key] = a.OnlineAPIRefID
		if q.sale.ref == "" {
			q.sale.ref = a.OnlineAPIRefID
			e.sales = append(e.sales, q.sale)
			w.sales[q.sale.ref] = q.sale
		}
	}
	s := q.sale
	if s == nil || s.ref == "" {
		return
	}
	switch {
	case code < 300 && a.StatusID != nil && a.OnlineAPIRefID == s.ref:
		if a.Version >= s.version {
			s.status, s.version, s.auth = *a.StatusID, a.Version, a.Authorization
			w.toldOf(s)
			w.toldForwarding(s, &a)
		}
		if q.name == "confirm" {
			s.confirmed, w.confirmed[s.ref] = true, true
		}
		if q.key != "" && s.status == instore.StatusPending && a.AcknowledgedAt == nil {
			e.retry = append(e.retry, q) // not acknowledged yet: ask again with the key
		}
	case code >= 400 && a.OnlineAPIRefID == s.ref && q.key != "":
		s.status = -1 // ended unacknowledged (WP25, WP23): the ECR polls no more
	}
}

// learn tells the ECRs what an event the webhook receiver accepted says
// of their sales: a back office learns outcomes from its webhooks as well
// as from its answers and polls.
func (w *world) learn(body []byte) {
	var ev struct {
		Data answer `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.Data.StatusID == nil {
		return
	}
	if s := w.sales[ev.Data.OnlineAPIRefID]; s != nil && s.version < ev.Data.Version {
		s.status, s.version, s.auth = *ev.Data.StatusID, ev.Data.Version, ev.Data.Authorization
		w.toldOf(s)
		w.toldForwarding(s, &ev.Data)
	}
}

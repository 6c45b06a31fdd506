package simulation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/onlineapi"
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
	AcknowledgedAt *time.Time                 `json:"acknowledgedAt"`
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
	case x < 55:
		e.purchase()
	default:
		e.afterSale(r.IntN(100))
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
	e.call(e.post("purchase", "/purchase", true, body, s))
}

// afterSale acts on an approved sale: confirm, refund, reverse, print.
func (e *ecr) afterSale(x int) {
	r := e.w.ecrRng
	var approved []*sale
	for _, o := range e.w.ecrs {
		for _, s := range o.sales {
			if s.kind == instore.TypePurchase && s.status == instore.StatusApproved && (o == e || x >= 60 && x < 75) {
				approved = append(approved, s) // a refund may be made at another till
			}
		}
	}
	if len(approved) == 0 {
		return
	}
	s := approved[r.IntN(len(approved))]
	switch {
	case s.confirmAsked && !s.confirmed && x < 60:
		e.call(e.keyed(e.post("confirm", "/transaction/"+s.ref+"/confirm", false, nil, s)))
	case x < 75:
		amount := 1 + int64(r.IntN(int(s.amount)))
		rs := &sale{kind: instore.TypeRefund, amount: amount, status: instore.StatusPending}
		e.call(e.post("refund", "/refund", true, map[string]any{"terminalId": e.terminalID, "amount": amount,
			"currency": "EUR", "originalOnlineAPIRefId": s.ref}, rs))
		if o := e.w.ecrs[r.IntN(len(e.w.ecrs))]; o != e && r.IntN(3) == 0 {
			// The same receipt refunded at another till at the same moment.
			rs := &sale{kind: instore.TypeRefund, amount: amount, status: instore.StatusPending}
			o.call(o.post("refund", "/refund", true, map[string]any{"terminalId": o.terminalID, "amount": amount,
				"currency": "EUR", "originalOnlineAPIRefId": s.ref}, rs))
		}
	case x < 90:
		rs := &sale{kind: instore.TypeReversal, amount: s.amount, status: instore.StatusPending}
		e.call(e.post("reversal", "/reversal", true, map[string]any{"onlineAPIRefId": s.ref}, rs))
	default:
		e.call(e.post("print", "/print", false, map[string]any{"terminalId": e.terminalID, "lines": []string{"Thank you"}}, nil))
	}
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
		r := httptest.NewRequestWithContext(ctx, q.method, "http://instore"+onlineapi.Prefix+q.path, bytes.NewReader(q.body))
		r.Header.Set("Authorization", "Bearer "+w.token)
		r.Header.Set("Ocp-Apim-Subscription-Key", w.subscriptionKey)
		if q.body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
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
	w.note("answer %s %s %d %s %s", e.name, q.name, code, a.OnlineAPIRefID, a.ErrorCode)
	if code == 500 || code == 503 {
		w.fail("no 500 or 503", "%s %s answered %d", q.method, q.path, code)
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
		}
	}
	s := q.sale
	if s == nil || s.ref == "" {
		return
	}
	switch {
	case code < 300 && a.StatusID != nil && a.OnlineAPIRefID == s.ref:
		s.status = *a.StatusID
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

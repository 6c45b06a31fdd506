package simulation

import (
	"net/http"

	"github.com/instore-dev/instore"
)

// Pre-authorisation at the ECRs: they open pre-auths (some with a tip),
// increment, capture (some with a tip, around the capture tolerance's
// edge and past it), void and refund them, race two of these on one
// pre-auth from two tills, send one request twice at once with its key,
// try a reversal (never allowed), and leave others alone to expire (the
// world's validity is short: expiries happen within a history).

// preAuthMove is the ECR's move on pre-auths: open one, or act on one it
// was told is APPROVED (mostly one it believes OPEN).
func (e *ecr) preAuthMove(x int) {
	w, r := e.w, e.w.ecrRng
	var approved, open, captured, pending []*sale
	for _, o := range w.ecrs {
		for _, s := range o.sales {
			if o == e && s.kind == instore.TypePreAuth && s.status == instore.StatusPending {
				pending = append(pending, s)
			}
			if s.kind == instore.TypePreAuth && s.status == instore.StatusApproved {
				approved = append(approved, s)
				switch w.believed(s) {
				case instore.AuthOpen:
					open = append(open, s)
				case instore.AuthCaptured:
					captured = append(captured, s)
				}
			}
		}
	}
	if len(pending) > 0 && r.IntN(2) == 0 {
		// Is its pre-auth approved yet?
		p := pending[r.IntN(len(pending))]
		e.call(&request{name: "poll", method: http.MethodGet, path: "/transaction/" + p.ref, sale: p})
		return
	}
	if len(approved) == 0 || x < 15 {
		e.preauthorize()
		return
	}
	p := approved[r.IntN(len(approved))]
	switch {
	case x >= 80 && len(captured) > 0 && r.IntN(4) != 0:
		p = captured[r.IntN(len(captured))] // refunds, mostly of what it was told is captured
	case x < 80 && len(open) > 0 && r.IntN(4) != 0:
		p = open[r.IntN(len(open))]
	}
	other := e.w.ecrs[r.IntN(len(e.w.ecrs))]
	switch {
	case x < 25:
		e.call(&request{name: "poll", method: http.MethodGet, path: "/transaction/" + p.ref, sale: p})
	case x < 37:
		e.twice(e.increment(p))
	case x < 62:
		e.twice(e.capture(p))
	case x < 70:
		e.twice(e.void(p))
	case x < 80:
		// Two tills on one pre-auth at once: capture against void, capture
		// against capture, void against void, increment against capture.
		w.note("race %s %s on %s", e.name, other.name, p.ref)
		ops := func(o *ecr) []func(*sale) *request { return []func(*sale) *request{o.capture, o.void, o.increment} }
		other.call(ops(other)[r.IntN(2)](p))
		e.call(ops(e)[r.IntN(3)](p))
	case x < 88:
		e.refund(p, e.refundAmount(p, false))
	case x < 96:
		// Refunds of one capture at two tills at once, each more than half.
		w.note("race %s %s on %s", e.name, other.name, p.ref)
		e.refund(p, e.refundAmount(p, true))
		other.refund(p, e.refundAmount(p, true))
	default:
		e.call(e.post("reversal", "/reversal", true, map[string]any{"onlineAPIRefId": p.ref},
			&sale{kind: instore.TypeReversal, amount: p.amount, status: instore.StatusPending}))
	}
}

// twice sends q, and now and then sends it again at once with the same
// Idempotency-Key (a till that sent twice): one transaction either way.
func (e *ecr) twice(q *request) {
	e.call(q)
	if e.w.ecrRng.IntN(5) == 0 {
		e.w.note("twice %s %s", e.name, q.key)
		e.call(q)
	}
}

func (e *ecr) preauthorize() {
	r := e.w.ecrRng
	amount := int64(100 + r.IntN(9900))
	body := map[string]any{"terminalId": e.terminalID, "amount": amount, "currency": "EUR"}
	switch r.IntN(6) {
	case 0:
		body["tip"] = map[string]any{"mode": instore.TipPrompt, "suggestions": []int{10, 15, 20}}
	case 1:
		body["tip"] = map[string]any{"mode": instore.TipFixed, "amount": r.Int64N(amount/4 + 1)}
	}
	e.call(e.post("preauthorization", "/preauthorization", true, body,
		&sale{kind: instore.TypePreAuth, amount: amount, status: instore.StatusPending}))
}

// believed is the state of the pre-auth p as the ECRs were told: by its
// authorisation, or by a capture or void of it told approved.
func (w *world) believed(p *sale) instore.AuthorizationState {
	switch end := w.told.end[p.ref]; {
	case p.auth != nil && p.auth.State != instore.AuthOpen:
		return p.auth.State
	case end != nil:
		return stateAfter(end)
	}
	return instore.AuthOpen
}

// authorized is what the ECR believes p holds.
func (p *sale) authorized() int64 {
	if p.auth != nil {
		return p.auth.AuthorizedAmount
	}
	return p.amount
}

func (e *ecr) increment(p *sale) *request {
	amount := 1 + e.w.ecrRng.Int64N(p.authorized()/2+1)
	return e.post("increment", "/increment", true, map[string]any{"onlineAPIRefId": p.ref, "amount": amount},
		&sale{kind: instore.TypeIncrement, amount: amount, orig: p.ref, status: instore.StatusPending})
}

// capture captures p: mostly within the tolerance, often at its edge,
// sometimes past it (the service must refuse those), some with a tip.
func (e *ecr) capture(p *sale) *request {
	r := e.w.ecrRng
	auth := p.authorized()
	limit := instore.CaptureLimit(auth, captureTolerance)
	var amount int64
	switch r.IntN(6) {
	case 0, 1:
		amount = 1 + r.Int64N(auth)
	case 2:
		amount = limit
	case 3:
		amount = limit + 1
	case 4:
		amount = auth + r.Int64N(limit-auth+1)
	default:
		amount = limit + 1 + r.Int64N(auth/10+1)
	}
	body := map[string]any{"onlineAPIRefId": p.ref, "amount": amount}
	if r.IntN(3) == 0 {
		body["tipAmount"] = r.Int64N(amount/5 + 1)
	}
	return e.post("capture", "/capture", true, body,
		&sale{kind: instore.TypeCapture, amount: amount, orig: p.ref, status: instore.StatusPending})
}

func (e *ecr) void(p *sale) *request {
	return e.post("void", "/void", true, map[string]any{"onlineAPIRefId": p.ref},
		&sale{kind: instore.TypeVoid, orig: p.ref, status: instore.StatusPending})
}

// refundAmount is a refund of p: of what the ECR was told is captured
// (the authorised amount if it knows of no capture), all of it, or past
// it up to the authorised amount (the service must refuse those); with
// most, more than half of it (two of them cannot both pass).
func (e *ecr) refundAmount(p *sale, most bool) int64 {
	r := e.w.ecrRng
	captured := p.authorized()
	switch end := e.w.told.end[p.ref]; {
	case p.auth != nil && p.auth.State == instore.AuthCaptured:
		captured = p.auth.CapturedAmount
	case end != nil && end.kind == instore.TypeCapture:
		captured = end.amount
	}
	switch {
	case most:
		return captured/2 + 1 + r.Int64N(captured/2+1)
	case r.IntN(4) == 0:
		return captured + 1 + r.Int64N(max(p.authorized()-captured, 0)+1)
	case r.IntN(3) == 0:
		return captured
	}
	return 1 + r.Int64N(max(captured, 1))
}

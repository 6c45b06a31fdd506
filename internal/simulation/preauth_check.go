package simulation

import (
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// The invariants of pre-authorisation, on the card network (the ledger),
// in the store after every step, at quiescence, and on what the ECRs were
// told.
const (
	invCaptureLimit = "captured at most authorised times the tolerance"
	invNeverBoth    = "never both captured and voided (or expired)"
	invRefunds      = "refunds of a pre-auth at most its captured amount"
	invExpired      = "an OPEN pre-auth past its expiry (or its void's retry) ends EXPIRED"
	invAuthChange   = "every authorisation change has its transaction and its event"
	invAfterExpiry  = "a pre-auth takes nothing but a void from its expiresAt on"
	invNotReversed  = "a pre-auth is never reversed"
)

// cardOp is an INCREMENT, CAPTURE or VOID a terminal carried out on the
// hold of a pre-auth; reversed when the service had it reversed (a late
// approval).
type cardOp struct {
	ref, pre string
	kind     instore.TransactionType
	amount   int64
	reversed bool
}

// onHold records t, an approved INCREMENT, CAPTURE or VOID, on the card
// network.
func (l *ledger) onHold(serial string, t *dtx) {
	l.w.note("ledger %s %s %s on %s %d", serial, t.kind, t.ref, t.original, t.amount)
	if l.ops[t.ref] != nil {
		l.w.fail("one authorisation per purchase", "%s %s carried out twice", t.kind, t.ref)
		return
	}
	if !l.preauths[t.original] || l.auths[t.original] == 0 || l.reversed[t.original] {
		l.w.fail("the terminals' and the service's views agree", "%s %s on %s, which holds nothing on the card", t.kind, t.ref, t.original)
	}
	op := &cardOp{ref: t.ref, pre: t.original, kind: t.kind, amount: t.amount}
	l.ops[t.ref] = op
	l.holdOps[t.original] = append(l.holdOps[t.original], op)
}

func (l *ledger) reverseOp(serial string, op *cardOp, why string) {
	if !op.reversed {
		l.w.note("ledger %s reversed %s %s (%s)", serial, op.kind, op.ref, why)
		op.reversed = true
	}
}

// hold is the pre-auth pre as the card network holds it: authorised (its
// approval and increments), captured, and its captures and voids, none of
// them reversed.
func (l *ledger) hold(pre string) (authorized, captured int64, captures, voids int) {
	authorized = l.amount[pre]
	for _, op := range l.holdOps[pre] {
		switch {
		case op.reversed:
		case op.kind == instore.TypeIncrement:
			authorized += op.amount
		case op.kind == instore.TypeCapture:
			captured += op.amount
			captures++
		case op.kind == instore.TypeVoid:
			voids++
		}
	}
	return authorized, captured, captures, voids
}

// voided reports whether the hold of pre has an approved VOID on the card
// (not reversed).
func (l *ledger) voided(pre string) bool {
	for _, op := range l.holdOps[pre] {
		if op.kind == instore.TypeVoid && !op.reversed {
			return true
		}
	}
	return false
}

// holdMoney: what is refunded on a pre-auth never exceeds what was
// captured of it.
func (l *ledger) holdMoney(pre string) {
	if _, captured, _, _ := l.hold(pre); l.refunded[pre] > captured {
		l.w.fail(invRefunds, "%s: %d refunded to the card, %d captured", pre, l.refunded[pre], captured)
	}
}

// agreeHold compares, at quiescence, the authorisation of the PRE_AUTH t
// with what the card network holds.
func (w *world) agreeHold(t *instore.Transaction) {
	a := t.Authorization
	if a == nil {
		return
	}
	authorized, captured, captures, voids := w.ledger.hold(t.ID)
	if captures+voids > 1 {
		w.fail(invNeverBoth, "%s: %d captures and %d voids carried out on the card", t.ID, captures, voids)
	}
	if captured > instore.CaptureLimit(authorized, captureTolerance) {
		w.fail(invCaptureLimit, "%s: %d captured on the card of %d authorised", t.ID, captured, authorized)
	}
	ended := a.State == instore.AuthVoided || a.State == instore.AuthExpired
	// A pre-auth that lapsed (relink_check.go) ended without a VOID: its
	// hold lapses at the card issuer, on the issuer's own schedule.
	lapsed := w.relinks.lapsed[t.ID]
	if authorized != a.AuthorizedAmount || captured != a.CapturedAmount || ended != (voids > 0) && !(lapsed && ended) {
		w.fail("the terminals' and the service's views agree", "%s is %s, authorised %d, captured %d in the service; on the card authorised %d, captured %d, voided %v",
			t.ID, a.State, a.AuthorizedAmount, a.CapturedAmount, authorized, captured, voids > 0)
	}
}

// checkPreAuths checks, after every step, each pre-auth in the store
// against the transactions that name it.
func (w *world) checkPreAuths(ts []*instore.Transaction) {
	kids := map[string][]*instore.Transaction{}
	for _, t := range ts {
		if t.OriginalID != "" {
			kids[t.OriginalID] = append(kids[t.OriginalID], t)
		}
	}
	for _, p := range ts {
		if p.Type == instore.TypePreAuth {
			w.checkPreAuth(p, kids[p.ID])
		}
	}
}

func (w *world) checkPreAuth(p *instore.Transaction, kids []*instore.Transaction) {
	a := p.Authorization
	var ends []*instore.Transaction // approved captures and voids
	var incremented, refunded int64
	for _, k := range kids {
		switch {
		case k.Type == instore.TypeReversal:
			w.fail(invNotReversed, "%s has the reversal %s", p.ID, k.ID)
		case k.Type == instore.TypeRefund && k.StatusID == instore.StatusApproved:
			refunded += k.Amount
		case w.lateVoid(k):
			ends = append(ends, k) // approved late: it released the hold (lifecycle.NextPair)
		case k.StatusID != instore.StatusApproved:
		case k.Type == instore.TypeIncrement:
			incremented += k.Amount
		case k.Type == instore.TypeCapture, k.Type == instore.TypeVoid:
			ends = append(ends, k)
		}
		if (k.Type == instore.TypeIncrement || k.Type == instore.TypeCapture) && a != nil && !k.CreatedAt.Before(a.ExpiresAt) {
			w.fail(invAfterExpiry, "%s %s created at %v, %s expired at %v", k.Type, k.ID, k.CreatedAt.Sub(epoch), p.ID, a.ExpiresAt.Sub(epoch))
		}
	}
	if (a != nil) != (p.StatusID == instore.StatusApproved) {
		w.fail(invAuthChange, "%s is in status %d with the authorisation %+v", p.ID, p.StatusID, a)
	}
	if a != nil {
		w.checkExpiryRetries(p, kids)
	}
	if p.OpenPreAuth() {
		w.checkRelinkedOpen(p, kids)
	}
	if a == nil {
		if len(ends) > 0 || incremented > 0 || refunded > 0 {
			w.fail(invAuthChange, "%s holds nothing, yet has approved operations or refunds", p.ID)
		}
		return
	}
	if len(ends) > 1 {
		w.fail(invNeverBoth, "%s has %s %s and %s %s approved", p.ID, ends[0].Type, ends[0].ID, ends[1].Type, ends[1].ID)
	}
	limit := instore.CaptureLimit(a.AuthorizedAmount, captureTolerance)
	for _, k := range ends {
		if k.Type == instore.TypeCapture && k.TotalAmount() > limit {
			w.fail(invCaptureLimit, "%s: capture %s of %d approved on %d authorised", p.ID, k.ID, k.TotalAmount(), a.AuthorizedAmount)
		}
	}
	if a.CapturedAmount > limit {
		w.fail(invCaptureLimit, "%s: %d captured of %d authorised", p.ID, a.CapturedAmount, a.AuthorizedAmount)
	}
	if refunded > a.CapturedAmount {
		w.fail(invRefunds, "%s: the store refunds %d of %d captured", p.ID, refunded, a.CapturedAmount)
	}
	state, captured := instore.AuthOpen, int64(0)
	if len(ends) == 1 {
		switch k := ends[0]; {
		case k.Type == instore.TypeCapture:
			state, captured = instore.AuthCaptured, k.TotalAmount()
		case k.ByTimer:
			state = instore.AuthExpired
			if k.CreatedAt.Before(a.ExpiresAt) {
				w.fail(invExpired, "%s: the expiry's void %s created at %v, before its expiry at %v", p.ID, k.ID, k.CreatedAt.Sub(epoch), a.ExpiresAt.Sub(epoch))
			}
		default:
			state = instore.AuthVoided
		}
	}
	if len(ends) == 0 && a.State == instore.AuthExpired && w.sawLapse(p, kids) {
		state = instore.AuthExpired // lapsed: no device could void it (relink_check.go)
	}
	if a.State != state || a.CapturedAmount != captured || a.AuthorizedAmount != p.TotalAmount()+incremented {
		w.fail(invAuthChange, "%s is %s, authorised %d, captured %d; its approved operations make it %s, %d, %d",
			p.ID, a.State, a.AuthorizedAmount, a.CapturedAmount, state, p.TotalAmount()+incremented, captured)
	}
}

// checkExpiryRetries: every expiry VOID of the pre-auth p was created no
// earlier than the service's schedule allowed, given the expiry VOIDs of
// it that had ended before (lifecycle.ExpiryDue): never a retry at once
// after one declined, however stale the read that decided it.
func (w *world) checkExpiryRetries(p *instore.Transaction, kids []*instore.Transaction) {
	open, auth := *p, *p.Authorization
	auth.State = instore.AuthOpen
	open.Authorization = &auth
	for _, k := range kids {
		if k.Type != instore.TypeVoid || !k.ByTimer {
			continue
		}
		var before []*instore.Transaction
		for _, o := range kids {
			if o != k && o.Final() && o.CompletedAt != nil && !o.CompletedAt.After(k.CreatedAt) {
				before = append(before, o)
			}
		}
		if at, _ := lifecycle.ExpiryDue(open, before, lifecycle.Rules{PreAuthValidity: w.validity}); k.CreatedAt.Before(at) {
			w.fail(invExpired, "%s: the expiry's void %s created at %v, before its retry's time %v", p.ID, k.ID, k.CreatedAt.Sub(epoch), at.Sub(epoch))
		}
	}
}

// checkAuthTimeline: every approved INCREMENT, CAPTURE or VOID of the
// pre-auth t has its AUTHORIZATION entry on t's timeline, and its
// transaction.authorization event (told: t's events); so has its lapse
// (relink_check.go), the one entry by the TIMER.
func (w *world) checkAuthTimeline(t *instore.Transaction, tl []instore.TransactionEvent, told []string) {
	var entries []string
	for _, e := range tl {
		if e.Kind == instore.EventAuthorization {
			entries = append(entries, e.Detail)
		}
	}
	events := 0
	for _, e := range told {
		if strings.Contains(e, " "+string(instore.EventTransactionAuthorization)+" ") {
			events++
		}
	}
	ops := 0
	for _, ref := range sortedKeys(w.lastTxs) {
		k := w.lastTxs[ref]
		if k.OriginalID != t.ID || !instore.OnPreAuth(k.Type) || k.StatusID != instore.StatusApproved && !w.lateVoid(k) {
			continue
		}
		ops++
		found := false
		for _, d := range entries {
			found = found || strings.Contains(d, " "+k.ID+" ")
		}
		if !found {
			w.fail(invAuthChange, "%s: %s %s approved, no AUTHORIZATION entry names it (%q)", t.ID, k.Type, k.ID, entries)
		}
	}
	lapses := 0
	if w.relinks.lapsed[t.ID] {
		lapses = 1
	}
	if n := lapseEntries(tl); n != lapses {
		w.fail(invLapse, "%s: lapsed %v, %d AUTHORIZATION entries by the TIMER", t.ID, lapses == 1, n)
	}
	if len(entries) != ops+lapses || events != ops+lapses {
		w.fail(invAuthChange, "%s: %d operations approved, %d lapses, %d AUTHORIZATION entries, %d transaction.authorization events", t.ID, ops, lapses, len(entries), events)
	}
}

// openPreAuths is the latest expiry due of the OPEN pre-auths in the
// store (expiryDue), and whether there is one.
func (w *world) openPreAuths() (latest time.Time, any bool) {
	for _, ref := range sortedKeys(w.lastTxs) {
		if t := w.lastTxs[ref]; t.OpenPreAuth() {
			latest, any = later(latest, w.expiryDue(t)), true
		}
	}
	return latest, any
}

// expiryDue is when the service is to void the OPEN pre-auth t next, by
// its own schedule (lifecycle.ExpiryDue): its expiresAt, or, after expiry
// VOIDs of it that ended without an approval, their retry's time.
func (w *world) expiryDue(t *instore.Transaction) time.Time {
	var kids []*instore.Transaction
	for _, ref := range sortedKeys(w.lastTxs) {
		if k := w.lastTxs[ref]; k.OriginalID == t.ID {
			kids = append(kids, k)
		}
	}
	at, _ := lifecycle.ExpiryDue(*t, kids, lifecycle.Rules{PreAuthValidity: w.validity})
	return at
}

// awaitExpiries runs the calm world on while a pre-auth is OPEN, until
// each ended or is past its expiry plus expiryGrace.
func (w *world) awaitExpiries() {
	for w.failure == nil {
		w.writes++ // a fresh read of the store
		w.check()
		latest, any := w.openPreAuths()
		if !any || w.sched.now.After(latest.Add(expiryGrace)) {
			return
		}
		before := w.sched.now
		w.runUntil(w.sched.now.Add(10 * time.Second))
		if !w.sched.now.After(before) {
			return
		}
	}
}

// checkExpired: at quiescence no pre-auth is OPEN past its expiry plus
// expiryGrace; and what the ECRs were told agrees with the store.
func (w *world) checkExpired() {
	for _, ref := range sortedKeys(w.lastTxs) {
		t := w.lastTxs[ref]
		if t.OpenPreAuth() && w.sched.now.After(w.expiryDue(t).Add(expiryGrace)) {
			w.fail(invExpired, "%s is OPEN %v after its expiry (its void due %v after it)", t.ID,
				w.sched.now.Sub(t.Authorization.ExpiresAt), w.expiryDue(t).Sub(t.Authorization.ExpiresAt))
		}
		if t.Type != instore.TypePreAuth {
			continue
		}
		var captured int64
		if t.Authorization != nil {
			captured = t.Authorization.CapturedAmount
		}
		if r := w.told.refunded[t.ID]; r > captured {
			w.fail(invRefunds, "%s: the ECRs were told refunds of %d approved, %d captured", t.ID, r, captured)
		}
		if end := w.told.end[t.ID]; end != nil && (t.Authorization == nil || t.Authorization.State != stateAfter(end)) {
			w.fail(invNeverBoth, "%s: the ECR was told %s %s approved; the store has %+v", t.ID, end.kind, end.ref, t.Authorization)
		}
	}
}

// told is what the ECRs were told of pre-auths, from answers, polls and
// webhooks: by pre-auth, the CAPTURE or VOID told APPROVED, the final
// state of the authorisation told, and the refunds told APPROVED.
type told struct {
	end      map[string]*sale
	state    map[string]instore.AuthorizationState
	refunded map[string]int64
}

// stateAfter is the state an approved CAPTURE or VOID of the ECR leaves.
func stateAfter(s *sale) instore.AuthorizationState {
	if s.kind == instore.TypeCapture {
		return instore.AuthCaptured
	}
	return instore.AuthVoided
}

// toldOf checks what an ECR was just told of s against what the ECRs
// were told before: never a capture and a void (or two) of one pre-auth
// approved, never two final states of one authorisation, never a capture
// past the tolerance.
func (w *world) toldOf(s *sale) {
	tl := w.told
	var pre string
	switch {
	case s.kind == instore.TypePreAuth && s.auth != nil:
		a := s.auth
		if a.CapturedAmount > instore.CaptureLimit(a.AuthorizedAmount, captureTolerance) {
			w.fail(invCaptureLimit, "%s: an ECR was told %d captured of %d authorised", s.ref, a.CapturedAmount, a.AuthorizedAmount)
		}
		if a.State == instore.AuthOpen {
			return
		}
		if prev := tl.state[s.ref]; prev != "" && prev != a.State {
			w.fail(invNeverBoth, "%s: an ECR was told it is %s, then %s", s.ref, prev, a.State)
		}
		tl.state[s.ref], pre = a.State, s.ref
	case (s.kind == instore.TypeCapture || s.kind == instore.TypeVoid) && s.status == instore.StatusApproved:
		if o := tl.end[s.orig]; o != nil && o != s {
			w.fail(invNeverBoth, "%s: ECRs were told %s %s approved and %s %s approved", s.orig, o.kind, o.ref, s.kind, s.ref)
		}
		tl.end[s.orig], pre = s, s.orig
	case s.kind == instore.TypeRefund && s.status == instore.StatusApproved && !s.counted:
		if p := w.sales[s.orig]; p != nil && p.kind == instore.TypePreAuth {
			s.counted = true
			tl.refunded[s.orig] += s.amount
		}
		return
	default:
		return
	}
	if st, end := tl.state[pre], tl.end[pre]; st != "" && end != nil && st != stateAfter(end) {
		w.fail(invNeverBoth, "%s: an ECR was told %s %s approved, and the pre-auth %s", pre, end.kind, end.ref, st)
	}
}

// lateVoid: k is a VOID the service had ended that the terminal approved
// late (timeline LATE_APPROVAL): it keeps its status and released its
// pre-auth all the same.
func (w *world) lateVoid(k *instore.Transaction) bool {
	return k.Type == instore.TypeVoid && k.StatusID == instore.StatusTechnicalError && k.ResultMessageID != "" &&
		w.hasEntry(k.ID, instore.EventLateApproval)
}

// isHoldOp reports whether kind acts on a pre-auth's hold on the card.
func isHoldOp(kind instore.TransactionType) bool {
	switch kind {
	case instore.TypeIncrement, instore.TypeCapture, instore.TypeVoid:
		return true
	}
	return false
}

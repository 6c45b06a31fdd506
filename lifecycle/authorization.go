package lifecycle

import (
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// The authorisation of a pre-auth (instore.Authorization) moves only
// through NextAuthorization:
//
//	none      --APPROVED------>  OPEN (authorizedAmount: the pre-auth's total; expiresAt: approval + validity)
//	OPEN      --INCREMENT----->  OPEN, authorizedAmount + the increment
//	OPEN      --CAPTURE------->  CAPTURED, capturedAmount: the capture's total
//	OPEN      --VOID---------->  VOIDED
//	OPEN      --EXPIRY_VOID--->  EXPIRED (the service's VOID at expiresAt)
//	OPEN      --LAPSED-------->  EXPIRED without a VOID (at expiresAt, no device holds it: AuthLapsed)
//
// A VOID's approval moves it in time or late (nextLateVoid); an
// INCREMENT's or a CAPTURE's only in time, and one approved in time on a
// pre-auth no longer OPEN is reversed on the terminal (closedApproval).
//
// Every other (state, event) pair changes nothing. The rules that decide
// whether an INCREMENT, CAPTURE or VOID may start at all are
// instore.CheckOnPreAuth's.

// AuthEvent is what happens to a pre-auth's authorisation.
type AuthEvent string

// Authorisation events.
const (
	AuthApproved   AuthEvent = "APPROVED"    // the PRE_AUTH was approved
	AuthIncrement  AuthEvent = "INCREMENT"   // an INCREMENT of it was approved
	AuthCapture    AuthEvent = "CAPTURE"     // a CAPTURE of it was approved
	AuthVoid       AuthEvent = "VOID"        // the ECR's VOID of it was approved
	AuthExpiryVoid AuthEvent = "EXPIRY_VOID" // the service's VOID at its expiry was approved
	// AuthLapsed: at its expiry, no device can void it (its terminal ID is
	// linked to another device than the one that authorised it,
	// instore.CheckHeldByDevice, or to none); the hold lapses at the card
	// issuer.
	AuthLapsed AuthEvent = "LAPSED"
)

// AuthEvents lists every authorisation event.
var AuthEvents = []AuthEvent{AuthApproved, AuthIncrement, AuthCapture, AuthVoid, AuthExpiryVoid, AuthLapsed}

// NextAuthorization applies ev to the authorisation a (nil: the pre-auth
// has none yet) at at: amount is the approved pre-auth's total
// (AuthApproved), the increment (AuthIncrement) or the capture's total
// (AuthCapture); validity is how long an authorisation stays OPEN. ok is
// false when ev changes nothing; a is never changed.
func NextAuthorization(a *instore.Authorization, ev AuthEvent, amount int64, at time.Time, validity time.Duration) (next *instore.Authorization, ok bool) {
	if a == nil {
		if ev != AuthApproved {
			return nil, false
		}
		return &instore.Authorization{State: instore.AuthOpen, AuthorizedAmount: amount, ExpiresAt: at.Add(validity)}, true
	}
	if a.State != instore.AuthOpen {
		return a, false
	}
	n := *a
	switch ev {
	case AuthIncrement:
		n.AuthorizedAmount += amount
	case AuthCapture:
		n.State, n.CapturedAmount = instore.AuthCaptured, amount
	case AuthVoid:
		n.State = instore.AuthVoided
	case AuthExpiryVoid, AuthLapsed:
		n.State = instore.AuthExpired
	default:
		return a, false
	}
	return &n, true
}

// authEventOf is the authorisation event of an approved t that acts on a
// pre-auth, and its amount.
func authEventOf(t *instore.Transaction) (AuthEvent, int64) {
	switch {
	case t.Type == instore.TypeIncrement:
		return AuthIncrement, t.Amount
	case t.Type == instore.TypeCapture:
		return AuthCapture, t.TotalAmount()
	case t.Type == instore.TypeVoid && t.ByTimer:
		return AuthExpiryVoid, 0
	case t.Type == instore.TypeVoid:
		return AuthVoid, 0
	}
	return "", 0
}

// nextOnPreAuth applies e to child, an INCREMENT, CAPTURE or VOID, and to
// its pre-auth pre: child moves as Next moves it and, when e approves it
// (a result in time: a late one is LATE_APPROVAL, reversed on the
// terminal, and leaves the authorisation alone; but a late VOID's
// approval releases the hold: nextLateVoid), the pre-auth's
// authorisation moves (NextAuthorization) in the same write, with its
// timeline entry AUTHORIZATION (st.PairEvent). paired is false when only
// child changes.
func nextOnPreAuth(child, pre instore.Transaction, e Event, r Rules) (newChild, newPre instore.Transaction, st Step, paired bool) {
	if lateVoid(child, e) {
		return nextLateVoid(child, pre, e, r)
	}
	newChild, st = nextAlone(child, e, r)
	if !st.Changed || child.Final() || newChild.StatusID != instore.StatusApproved {
		return newChild, pre, st, false
	}
	ev, amount := authEventOf(&newChild)
	auth, ok := NextAuthorization(pre.Authorization, ev, amount, e.At, r.PreAuthValidity)
	switch {
	case !ok && (ev == AuthIncrement || ev == AuthCapture):
		newChild, st = closedApproval(child, newChild, pre, e, r, st)
		return newChild, pre, st, false
	case !ok:
		return newChild, pre, st, false
	}
	pre, st.PairEvent = moveAuthorization(child, pre, auth, e, r)
	return newChild, pre, st, true
}

// closedApproval ends approved, child's in-time approval (an INCREMENT or
// a CAPTURE), when its pre-auth is no longer OPEN (a VOID whose outcome
// was unknown approved late since, or the pre-auth expired): the card was
// charged, or more money held, for a pre-auth that takes nothing more, so
// it is reversed on the terminal at once (REVERSED, a reversal
// LATE_APPROVAL owed), as a late approval is, and the authorisation stays
// as it is. No receipt is printed for it.
func closedApproval(child, approved, pre instore.Transaction, e Event, r Rules, st Step) (instore.Transaction, Step) {
	approved.StatusID = instore.StatusReversed
	st.Reverse, st.Print = instore.ReversalLateApproval, nil
	approved, st = changed(child, approved, e, r, st, instore.EventLateApproval)
	state := instore.AuthorizationState("not OPEN")
	if pre.Authorization != nil {
		state = pre.Authorization.State
	}
	st.Event.Detail += fmt.Sprintf("; the pre-authorisation is %s: it takes no %s", state, child.Type)
	return approved, st
}

// moveAuthorization gives pre the authorisation auth, which child's
// approval moved, and returns it with its timeline entry AUTHORIZATION.
func moveAuthorization(child, pre instore.Transaction, auth *instore.Authorization, e Event, r Rules) (instore.Transaction, *instore.TransactionEvent) {
	before := pre
	pre.Authorization = auth
	pre, ost := changed(before, pre, e, r, Step{}, instore.EventAuthorization)
	ost.Event.Detail = fmt.Sprintf("%s %s approved: %s, authorized %d, captured %d", child.Type, child.ID, auth.State, auth.AuthorizedAmount, auth.CapturedAmount)
	return pre, ost.Event
}

// EventAuthLapsed is the expiry's event of an OPEN pre-auth, at or past
// its expiresAt, that no device can void: its terminal ID is linked to
// another device than the one that authorised it, which holds nothing of
// it (instore.CheckHeldByDevice), or to none. Its authorisation ends EXPIRED without
// a VOID (AuthLapsed), with its timeline entry AUTHORIZATION (actor
// TIMER) and so its transaction.authorization event: the hold lapses at
// the card issuer on the issuer's own schedule, and the books no longer
// show it OPEN.
const EventAuthLapsed instore.TimelineKind = "AUTH_LAPSED"

// authLapsed applies EventAuthLapsed to t: a PRE_AUTH whose authorisation
// is OPEN and due (e.At at or past its expiresAt) ends EXPIRED; anything
// else is unchanged.
func authLapsed(t instore.Transaction, e Event, r Rules) (instore.Transaction, Step) {
	before := t
	a := t.Authorization
	if t.Type != instore.TypePreAuth || a == nil || a.State != instore.AuthOpen || e.At.Before(a.ExpiresAt) {
		return before, Step{}
	}
	auth, ok := NextAuthorization(a, AuthLapsed, 0, e.At, r.PreAuthValidity)
	if !ok {
		return before, Step{}
	}
	t.Authorization = auth
	t, st := changed(before, t, e, r, Step{}, instore.EventAuthorization)
	st.Event.Actor = instore.ActorTimer
	st.Event.Detail = fmt.Sprintf("expired without a void, authorized %d: the device that holds it is no longer linked to its terminal ID; the hold lapses at the card issuer", auth.AuthorizedAmount)
	return t, st
}

// lateVoid reports whether e is the first result, an approval, of a VOID
// the service had ended TECHNICAL_ERROR (WP25, WP36, WP23).
func lateVoid(t instore.Transaction, e Event) bool {
	return t.Type == instore.TypeVoid && t.StatusID == instore.StatusTechnicalError && t.ResultMessageID == "" &&
		e.Kind == instore.EventResult && e.Result != nil && e.Result.StatusID == instore.StatusApproved
}

// nextLateVoid applies a late approval to a VOID (lateVoid). A void is
// not reversed as a late sale is (LATE_APPROVAL): undoing the release of
// a hold would hold the cardholder's money again for nothing. The money
// was released, as a late-approved REVERSAL gave it back
// (nextReversalPair): the VOID keeps its status (the answer its ECR had)
// and gets the result, and the pre-auth, if still OPEN, moves in the same
// write (VOIDED, or EXPIRED for the expiry's VOID). A pre-auth no longer
// OPEN (captured since, or voided by another) has nothing left to
// release: the result is only kept (LATE_RESULT).
func nextLateVoid(child, pre instore.Transaction, e Event, r Rules) (newChild, newPre instore.Transaction, st Step, paired bool) {
	before := child
	res := e.Result
	result := res.Result
	child.Result, child.ResultMessageID, child.Progress = &result, res.MessageID, instore.ProgressFinal
	if child.AcknowledgedAt == nil {
		child.AcknowledgedAt = ptr(e.At)
	}
	st.EndCancels = true
	ev, _ := authEventOf(&child)
	auth, ok := NextAuthorization(pre.Authorization, ev, 0, e.At, r.PreAuthValidity)
	if !ok {
		child, st = changed(before, child, e, r, st, instore.EventLateResult)
		st.Event.Detail += "; the pre-authorisation is no longer OPEN: nothing to release or reverse"
		return child, pre, st, false
	}
	child, st = changed(before, child, e, r, st, instore.EventLateApproval)
	st.Event.Detail += "; the hold is released: a void is not reversed"
	pre, st.PairEvent = moveAuthorization(child, pre, auth, e, r)
	return child, pre, st, true
}

// Expiry retries: an expiry VOID that ended without an approval
// (declined, a technical error) is tried again ExpiryRetryFirst after it
// ended, then after twice as long each time, at most ExpiryRetryMax
// apart: the hold is the cardholder's money, so the service never stops
// trying to release it, but a terminal or an acquirer that keeps
// refusing gets one VOID an hour, not one a sweep.
const (
	ExpiryRetryFirst = time.Minute
	ExpiryRetryMax   = time.Hour
)

// ExpiryDue is when the pre-auth t is to be voided by the service (ok
// false: it is not OPEN): its expiresAt, or, after expiry VOIDs of it
// (among others, the transactions that name it; nil: none read) ended
// without an approval, the retry's time (ExpiryRetryFirst; the first
// retry waits at most r.PreAuthValidity, which only the sandbox sets
// below a minute).
func ExpiryDue(t instore.Transaction, others []*instore.Transaction, r Rules) (at time.Time, ok bool) {
	if !t.OpenPreAuth() {
		return time.Time{}, false
	}
	at = t.Authorization.ExpiresAt
	tries, backoff := 0, ExpiryRetryFirst
	if r.PreAuthValidity > 0 {
		backoff = min(backoff, r.PreAuthValidity)
	}
	for _, o := range others {
		if o.Type != instore.TypeVoid || !o.ByTimer || !o.Final() || o.StatusID == instore.StatusApproved {
			continue
		}
		if tries++; tries > 1 {
			backoff = min(2*backoff, ExpiryRetryMax)
		}
		ended := o.CreatedAt
		if o.CompletedAt != nil {
			ended = *o.CompletedAt
		}
		at = later(at, ended)
	}
	if tries > 0 {
		at = at.Add(backoff)
	}
	return at, true
}

// CheckExpiryVoid refuses the expiry VOID t of the pre-auth pre before its
// time (ExpiryDue, on pre and others as the store's database transaction
// that creates t reads them, the pre-auth's row locked): a decision to
// void taken on an older read (the last VOID still in flight then, since
// ended without an approval) would otherwise send the retry at once, not
// ExpiryRetryFirst after that VOID ended. A VOID not by the timer is not
// its business.
func CheckExpiryVoid(pre instore.Transaction, others []*instore.Transaction, t *instore.Transaction, r Rules) error {
	if t.Type != instore.TypeVoid || !t.ByTimer {
		return nil
	}
	at, ok := ExpiryDue(pre, others, r)
	if ok && t.CreatedAt.Before(at) {
		return &ExpiryNotDue{At: at}
	}
	return nil
}

// ExpiryNotDue is CheckExpiryVoid's refusal: the expiry VOID is due at At.
// Only the service's timer creates one, so it never reaches an API client.
type ExpiryNotDue struct{ At time.Time }

func (e *ExpiryNotDue) Error() string {
	return "the pre-authorisation's expiry void is not due before " + e.At.UTC().Format(time.RFC3339Nano)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

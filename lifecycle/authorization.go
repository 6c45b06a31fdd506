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
)

// AuthEvents lists every authorisation event.
var AuthEvents = []AuthEvent{AuthApproved, AuthIncrement, AuthCapture, AuthVoid, AuthExpiryVoid}

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
	case AuthExpiryVoid:
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

// NextOnPreAuth applies e to child, an INCREMENT, CAPTURE or VOID, and to
// its pre-auth pre: child moves as Next moves it and, when e approves it
// (a result in time: a late one is LATE_APPROVAL, reversed on the
// terminal, and leaves the authorisation alone), the pre-auth's
// authorisation moves (NextAuthorization) in the same write, with its
// timeline entry AUTHORIZATION (st.PairEvent). paired is false when only
// child changes.
func NextOnPreAuth(child, pre instore.Transaction, e Event, r Rules) (newChild, newPre instore.Transaction, st Step, paired bool) {
	newChild, st = Next(child, e, r)
	if !st.Changed || child.Final() || newChild.StatusID != instore.StatusApproved {
		return newChild, pre, st, false
	}
	ev, amount := authEventOf(&newChild)
	auth, ok := NextAuthorization(pre.Authorization, ev, amount, e.At, r.PreAuthValidity)
	if !ok {
		return newChild, pre, st, false
	}
	before := pre
	pre.Authorization = auth
	pre, ost := changed(before, pre, e, r, Step{}, instore.EventAuthorization)
	ost.Event.Detail = fmt.Sprintf("%s %s approved: %s, authorized %d, captured %d", child.Type, child.ID, auth.State, auth.AuthorizedAmount, auth.CapturedAmount)
	st.PairEvent = ost.Event
	return newChild, pre, st, true
}

// ExpiryDue is when the pre-auth t is to be voided by the service (ok
// false: it is not OPEN).
func ExpiryDue(t instore.Transaction) (at time.Time, ok bool) {
	if !t.OpenPreAuth() {
		return time.Time{}, false
	}
	return t.Authorization.ExpiresAt, true
}

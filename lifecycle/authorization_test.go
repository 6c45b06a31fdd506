package lifecycle_test

import (
	"errors"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextAuthorization runs every (state, event) pair of a pre-auth's
// authorisation: none (not approved yet) and each state, by each event.
func TestNextAuthorization(t *testing.T) {
	validity := 7 * 24 * time.Hour
	expires := t0.Add(time.Hour)
	in := func(state instore.AuthorizationState) *instore.Authorization {
		return &instore.Authorization{State: state, AuthorizedAmount: 10000, CapturedAmount: map[bool]int64{true: 9000}[state == instore.AuthCaptured], ExpiresAt: expires}
	}
	// want: the state after, authorized and captured amounts ("": unchanged).
	type want struct {
		state                instore.AuthorizationState
		authorized, captured int64
	}
	wants := map[instore.AuthorizationState]map[lifecycle.AuthEvent]want{
		"": {lifecycle.AuthApproved: {instore.AuthOpen, 500, 0}},
		instore.AuthOpen: {
			lifecycle.AuthIncrement:  {instore.AuthOpen, 10500, 0},
			lifecycle.AuthCapture:    {instore.AuthCaptured, 10000, 500},
			lifecycle.AuthVoid:       {instore.AuthVoided, 10000, 0},
			lifecycle.AuthExpiryVoid: {instore.AuthExpired, 10000, 0},
			lifecycle.AuthLapsed:     {instore.AuthExpired, 10000, 0},
		},
	}
	of := func(state instore.AuthorizationState) *instore.Authorization {
		if state == "" {
			return nil
		}
		return in(state)
	}
	next := func(a *instore.Authorization, ev lifecycle.AuthEvent) (*instore.Authorization, bool) {
		return lifecycle.NextAuthorization(a, ev, 500, t0, validity)
	}
	everyRecordPair(t, append([]instore.AuthorizationState{""}, instore.AuthorizationStates...), lifecycle.AuthEvents, wants, of, next,
		func(t *testing.T, state instore.AuthorizationState, next *instore.Authorization, ok bool, w want) {
			wantExpiry := expires
			if state == "" {
				wantExpiry = t0.Add(validity)
			}
			if !ok || next.State != w.state || next.AuthorizedAmount != w.authorized || next.CapturedAmount != w.captured || !next.ExpiresAt.Equal(wantExpiry) {
				t.Fatalf("NextAuthorization = %+v, %v; want %+v, expires %s", next, ok, w, wantExpiry)
			}
		})
}

// TestNextOnPreAuth: an approved INCREMENT, CAPTURE or VOID in time moves
// its pre-auth's authorisation in the same step; a declined one, a late
// approval, or one on a pre-auth no longer OPEN leaves it alone; an
// approved PRE_AUTH opens its authorisation.
func TestNextOnPreAuth(t *testing.T) {
	r := testRules()
	at := t0.Add(time.Minute)
	pending := instore.Transaction{ID: "txn_p", Type: instore.TypePreAuth, Amount: 10000, Currency: "EUR", StatusID: instore.StatusPending,
		Progress: instore.ProgressAcknowledged, Version: 2, CreatedAt: t0, AcknowledgedAt: &t0, PrintReceipt: false}
	result := func(status instore.TransactionStatus) lifecycle.Event {
		return lifecycle.Event{Kind: instore.EventResult, At: at, Result: &instore.TerminalResult{MessageID: "m-1", StatusID: status}}
	}
	pre, _ := lifecycle.Next(pending, result(instore.StatusApproved), r)
	if a := pre.Authorization; a == nil || a.State != instore.AuthOpen || a.AuthorizedAmount != 10000 || !a.ExpiresAt.Equal(at.Add(r.PreAuthValidity)) {
		t.Fatalf("approved PRE_AUTH: authorization %+v", a)
	}
	if declined, _ := lifecycle.Next(pending, result(instore.StatusTransactionDeclined), r); declined.Authorization != nil {
		t.Fatalf("declined PRE_AUTH: authorization %+v", declined.Authorization)
	}
	child := func(typ instore.TransactionType, amount, tip int64, status instore.TransactionStatus) instore.Transaction {
		c := pending
		c.ID, c.Type, c.Amount, c.TipAmount, c.OriginalID, c.StatusID = "txn_c", typ, amount, tip, "txn_p", status
		return c
	}
	voided, captured := pre, pre
	voided.Authorization = &instore.Authorization{State: instore.AuthVoided, AuthorizedAmount: 10000}
	captured.Authorization = &instore.Authorization{State: instore.AuthCaptured, AuthorizedAmount: 10000, CapturedAmount: 10000}
	expired := pre
	expired.Authorization = &instore.Authorization{State: instore.AuthExpired, AuthorizedAmount: 10000}
	byTimer := child(instore.TypeVoid, 10000, 0, instore.StatusPending)
	byTimer.ByTimer = true
	for _, tc := range []struct {
		name   string
		child  instore.Transaction
		pre    instore.Transaction
		status instore.TransactionStatus
		paired bool
		want   instore.Authorization
	}{
		{"increment approved", child(instore.TypeIncrement, 2000, 0, instore.StatusPending), pre, instore.StatusApproved, true,
			instore.Authorization{State: instore.AuthOpen, AuthorizedAmount: 12000}},
		{"capture with a tip approved", child(instore.TypeCapture, 9000, 1500, instore.StatusPending), pre, instore.StatusApproved, true,
			instore.Authorization{State: instore.AuthCaptured, AuthorizedAmount: 10000, CapturedAmount: 10500}},
		{"void approved", child(instore.TypeVoid, 10000, 0, instore.StatusPending), pre, instore.StatusApproved, true,
			instore.Authorization{State: instore.AuthVoided, AuthorizedAmount: 10000}},
		{"the expiry's void approved", byTimer, pre, instore.StatusApproved, true,
			instore.Authorization{State: instore.AuthExpired, AuthorizedAmount: 10000}},
		{"capture declined", child(instore.TypeCapture, 9000, 0, instore.StatusPending), pre, instore.StatusTransactionDeclined, false, *pre.Authorization},
		{"capture approved late", child(instore.TypeCapture, 9000, 0, instore.StatusTechnicalError), pre, instore.StatusApproved, false, *pre.Authorization},
		// Approved in time on a pre-auth no longer OPEN (a VOID whose
		// outcome was unknown approved late, the expiry): reversed on the
		// terminal, the authorisation left as it is.
		{"capture of a voided pre-auth", child(instore.TypeCapture, 9000, 0, instore.StatusPending), voided, instore.StatusApproved, false, *voided.Authorization},
		{"increment of a voided pre-auth", child(instore.TypeIncrement, 2000, 0, instore.StatusPending), voided, instore.StatusApproved, false, *voided.Authorization},
		{"capture of a captured pre-auth", child(instore.TypeCapture, 9000, 0, instore.StatusPending), captured, instore.StatusApproved, false, *captured.Authorization},
		{"increment of an expired pre-auth", child(instore.TypeIncrement, 2000, 0, instore.StatusPending), expired, instore.StatusApproved, false, *expired.Authorization},
		{"void of a captured pre-auth", child(instore.TypeVoid, 10000, 0, instore.StatusPending), captured, instore.StatusApproved, false, *captured.Authorization},
		{"increment of a voided pre-auth declined", child(instore.TypeIncrement, 2000, 0, instore.StatusPending), voided, instore.StatusTransactionDeclined, false, *voided.Authorization},
		// A late VOID's approval released the hold: not reversed, the
		// pre-auth moves; one no longer OPEN keeps only the result.
		{"void approved late", child(instore.TypeVoid, 10000, 0, instore.StatusTechnicalError), pre, instore.StatusApproved, true,
			instore.Authorization{State: instore.AuthVoided, AuthorizedAmount: 10000}},
		{"the expiry's void approved late", func() instore.Transaction { c := byTimer; c.StatusID = instore.StatusTechnicalError; return c }(), pre,
			instore.StatusApproved, true, instore.Authorization{State: instore.AuthExpired, AuthorizedAmount: 10000}},
		{"void of a captured pre-auth approved late", child(instore.TypeVoid, 10000, 0, instore.StatusTechnicalError), captured, instore.StatusApproved, false,
			*captured.Authorization},
		{"void declined late", child(instore.TypeVoid, 10000, 0, instore.StatusTechnicalError), pre, instore.StatusTransactionDeclined, false, *pre.Authorization},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := result(tc.status)
			approved, late := tc.status == instore.StatusApproved, tc.child.Final()
			lateVoid := approved && late && tc.child.Type == instore.TypeVoid
			if got := lifecycle.Pairs(tc.child, e); got != (approved && !late || lateVoid) {
				t.Errorf("Pairs = %v", got)
			}
			c, p, st, paired := lifecycle.NextPair(tc.child, tc.pre, e, r)
			if !st.Changed || paired != tc.paired {
				t.Fatalf("changed %v paired %v, want paired %v", st.Changed, paired, tc.paired)
			}
			closed := approved && !late && tc.pre.Authorization.State != instore.AuthOpen && tc.child.Type != instore.TypeVoid
			switch {
			case closed && (c.StatusID != instore.StatusReversed || st.Reverse != instore.ReversalLateApproval || st.Event.Kind != instore.EventLateApproval || !st.Ended):
				t.Errorf("%s approved on a %s pre-auth: status %d, reverse %q, timeline %s, ended %v; want REVERSED, reversed on the terminal (LATE_APPROVAL)",
					c.Type, tc.pre.Authorization.State, c.StatusID, st.Reverse, st.Event.Kind, st.Ended)
			case approved && !late && !closed && (c.StatusID != instore.StatusApproved || st.Reverse != ""):
				t.Errorf("child status %d, reverse %q, want APPROVED", c.StatusID, st.Reverse)
			case late && c.StatusID != tc.child.StatusID && !(approved && !lateVoid):
				t.Errorf("late child status %d, want %d kept", c.StatusID, tc.child.StatusID)
			case approved && late && !lateVoid && (c.StatusID != instore.StatusReversed || st.Reverse != instore.ReversalLateApproval):
				t.Errorf("late approval of a %s: status %d, reverse %q, want REVERSED and reversed on the terminal", c.Type, c.StatusID, st.Reverse)
			case lateVoid && (st.Reverse != "" || c.ResultMessageID != "m-1" || c.Result == nil):
				t.Errorf("late approval of a VOID: reverse %q, result %q, want no reversal and the result kept", st.Reverse, c.ResultMessageID)
			case lateVoid && paired != (st.Event.Kind == instore.EventLateApproval):
				t.Errorf("late approval of a VOID: timeline %s, paired %v", st.Event.Kind, paired)
			}
			got, want := *p.Authorization, tc.want
			got.ExpiresAt, want.ExpiresAt = time.Time{}, time.Time{}
			if got != want {
				t.Errorf("authorization %+v, want %+v", got, tc.want)
			}
			if !paired {
				if p.Version != tc.pre.Version || st.PairEvent != nil {
					t.Errorf("pre-auth changed: version %d, pair event %+v", p.Version, st.PairEvent)
				}
				return
			}
			if p.Version != tc.pre.Version || st.PairEvent == nil || st.PairEvent.Kind != instore.EventAuthorization ||
				st.PairEvent.Version != tc.pre.Version+1 || st.PairEvent.StatusAfter != "APPROVED" {
				t.Errorf("pair event %+v (pre-auth version %d)", st.PairEvent, p.Version)
			}
		})
	}
	if _, ok := lifecycle.ExpiryDue(voided, nil, r); ok {
		t.Errorf("ExpiryDue(voided) = ok, want none")
	}
	// The expiry's retries: after each expiry VOID that ended without an
	// approval, 1 min, 2, 4, ... at most an hour after the last one ended.
	exp := pre.Authorization.ExpiresAt
	ended := func(typ instore.TransactionType, byTimer bool, status instore.TransactionStatus, after time.Duration) *instore.Transaction {
		c := child(typ, 10000, 0, status)
		done := exp.Add(after)
		c.ByTimer, c.CreatedAt, c.CompletedAt = byTimer, exp.Add(after-time.Second), &done
		if status == instore.StatusPending {
			c.CompletedAt = nil
		}
		return &c
	}
	declined := func(after time.Duration) *instore.Transaction {
		return ended(instore.TypeVoid, true, instore.StatusTransactionDeclined, after)
	}
	var many []*instore.Transaction
	for i := range 12 {
		many = append(many, declined(time.Duration(i)*time.Minute))
	}
	for _, tc := range []struct {
		name   string
		others []*instore.Transaction
		want   time.Time
	}{
		{"none tried", nil, exp},
		{"others of it do not count", []*instore.Transaction{ended(instore.TypeIncrement, false, instore.StatusTransactionDeclined, 0),
			ended(instore.TypeVoid, false, instore.StatusTransactionDeclined, 0), ended(instore.TypeVoid, true, instore.StatusPending, 0)}, exp},
		{"one declined", []*instore.Transaction{declined(0)}, exp.Add(time.Minute)},
		{"one failed an hour late", []*instore.Transaction{ended(instore.TypeVoid, true, instore.StatusTechnicalError, time.Hour)}, exp.Add(time.Hour + time.Minute)},
		{"three declined", []*instore.Transaction{declined(0), declined(time.Minute), declined(3 * time.Minute)}, exp.Add(7 * time.Minute)},
		{"at most an hour apart", many, exp.Add(11*time.Minute + lifecycle.ExpiryRetryMax)},
	} {
		if at, ok := lifecycle.ExpiryDue(pre, tc.others, r); !ok || !at.Equal(tc.want) {
			t.Errorf("ExpiryDue(open, %s) = %s, %v; want %s", tc.name, at.Sub(exp), ok, tc.want.Sub(exp))
		}
	}
	// A validity below a minute (the sandbox's) shortens the first retry.
	short := r
	short.PreAuthValidity = 4 * time.Second
	if at, _ := lifecycle.ExpiryDue(pre, []*instore.Transaction{declined(0), declined(time.Minute)}, short); !at.Equal(exp.Add(time.Minute + 8*time.Second)) {
		t.Errorf("ExpiryDue(two declined, validity 4 s) = %s, want 1m8s", at.Sub(exp))
	}
	// The store's check of an expiry VOID, inside the database
	// transaction that creates it: refused before ExpiryDue, with its
	// time; a VOID asked for by the ECR, or of a pre-auth no longer OPEN,
	// is not its business.
	void := func(byTimer bool, at time.Time) *instore.Transaction {
		return &instore.Transaction{Type: instore.TypeVoid, ByTimer: byTimer, CreatedAt: at}
	}
	for _, tc := range []struct {
		name   string
		pre    instore.Transaction
		others []*instore.Transaction
		t      *instore.Transaction
		notDue time.Time // zero: allowed
	}{
		{"first, at the expiry", pre, nil, void(true, exp), time.Time{}},
		{"first, before the expiry", pre, nil, void(true, exp.Add(-time.Second)), exp},
		{"retry at once after a declined one", pre, []*instore.Transaction{declined(0)}, void(true, exp), exp.Add(time.Minute)},
		{"retry a second early", pre, []*instore.Transaction{declined(0)}, void(true, exp.Add(time.Minute-time.Second)), exp.Add(time.Minute)},
		{"retry at its time", pre, []*instore.Transaction{declined(0)}, void(true, exp.Add(time.Minute)), time.Time{}},
		{"the ECR's void", pre, []*instore.Transaction{declined(0)}, void(false, exp), time.Time{}},
		{"a capture", pre, nil, &instore.Transaction{Type: instore.TypeCapture, ByTimer: true, CreatedAt: exp.Add(-time.Hour)}, time.Time{}},
		{"not OPEN", voided, []*instore.Transaction{declined(0)}, void(true, exp), time.Time{}},
	} {
		err := lifecycle.CheckExpiryVoid(tc.pre, tc.others, tc.t, r)
		var nd *lifecycle.ExpiryNotDue
		switch {
		case tc.notDue.IsZero() && err != nil:
			t.Errorf("CheckExpiryVoid(%s) = %v, want nil", tc.name, err)
		case !tc.notDue.IsZero() && (!errors.As(err, &nd) || !nd.At.Equal(tc.notDue)):
			t.Errorf("CheckExpiryVoid(%s) = %v, want not due before %s", tc.name, err, tc.notDue.Sub(exp))
		}
	}
	timerVoid, st := lifecycle.Create(byTimer, r)
	if st.Event.Actor != instore.ActorTimer || timerVoid.StatusID != instore.StatusPending {
		t.Errorf("Create(the expiry's void): actor %s", st.Event.Actor)
	}
}

// TestAuthLapsed: the expiry's EventAuthLapsed ends an OPEN pre-auth at
// or past its expiresAt EXPIRED without a VOID, with its AUTHORIZATION
// timeline entry by the TIMER; before its expiry, once no longer OPEN,
// or on any other transaction, it changes nothing.
func TestAuthLapsed(t *testing.T) {
	r := testRules()
	expires := t0.Add(time.Hour)
	pre := instore.Transaction{ID: "txn_p", Type: instore.TypePreAuth, StatusID: instore.StatusApproved, Progress: instore.ProgressFinal,
		Version: 4, Authorization: &instore.Authorization{State: instore.AuthOpen, AuthorizedAmount: 12000, ExpiresAt: expires}}
	lapse := func(at time.Time) lifecycle.Event { return lifecycle.Event{Kind: lifecycle.EventAuthLapsed, At: at} }
	next, st := lifecycle.Next(pre, lapse(expires), r)
	if !st.Changed || next.Authorization.State != instore.AuthExpired || next.Authorization.AuthorizedAmount != 12000 ||
		next.StatusID != instore.StatusApproved || st.Ended || st.Event == nil || st.Event.Kind != instore.EventAuthorization ||
		st.Event.Actor != instore.ActorTimer || st.Event.Version != 5 {
		t.Fatalf("lapsed at its expiry: %+v, step %+v event %+v", next.Authorization, st, st.Event)
	}
	if pre.Authorization.State != instore.AuthOpen {
		t.Fatalf("the pre-auth given was changed")
	}
	voided := pre
	voided.Authorization = &instore.Authorization{State: instore.AuthVoided, AuthorizedAmount: 12000, ExpiresAt: expires}
	sale := pre
	sale.Type, sale.Authorization = instore.TypePurchase, nil
	for name, tc := range map[string]struct {
		t  instore.Transaction
		at time.Time
	}{
		"before its expiry": {pre, expires.Add(-time.Millisecond)},
		"voided":            {voided, expires.Add(time.Hour)},
		"a purchase":        {sale, expires.Add(time.Hour)},
	} {
		if _, st := lifecycle.Next(tc.t, lapse(tc.at), r); st.Changed || st.Refused != nil {
			t.Errorf("%s: step %+v, want unchanged", name, st)
		}
	}
}

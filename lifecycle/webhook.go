package lifecycle

import (
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// The life of a webhook delivery (one event owed to one endpoint) and of
// its endpoint's health. A pending delivery is attempted when due; an
// attempt answered 2xx ends it succeeded, any other ends the attempt and
// the delivery waits instore.RetrySchedule's next wait (±20 % jitter),
// or, past the schedule's end, is given up (failed). A delivery whose
// event expired before it could be sent is given up. The merchant's retry
// makes any delivery pending and due at once. An endpoint whose deliveries
// keep failing for instore.WebhookDisableAfter is disabled
// (DisabledReason); any success clears its failing time.
//
//	pending    --ANSWERED 2xx------------------->  succeeded (the endpoint is healthy again)
//	pending    --ANSWERED other, n <= schedule-->  pending, due after RetrySchedule[n-1] ± 20 %
//	pending    --ANSWERED other, n >  schedule-->  failed (given up)
//	pending    --EVENT_GONE-------------------->  failed (given up)
//	any        --RETRIED----------------------->  pending, due now
//	succeeded, failed --ANSWERED, EVENT_GONE---->  unchanged
//
// The store records it (internal/sqlstore/deliveries.go, RecordAttempts):
// the attempt, the delivery's new status or next time, and the endpoint's
// failing time and disabling, by compare-and-set.

// DeliveryState is a delivery's status.
type DeliveryState = instore.DeliveryState

// Delivery states: the delivery statuses of the contract.
const (
	DeliveryPending   = instore.DeliveryPending
	DeliverySucceeded = instore.DeliverySucceeded
	DeliveryFailed    = instore.DeliveryFailed
)

// DeliveryEventKind is what happens to a delivery.
type DeliveryEventKind string

// Delivery events.
const (
	DeliveryAnswered  DeliveryEventKind = "ANSWERED"   // an attempt ended (Code, Err)
	DeliveryEventGone DeliveryEventKind = "EVENT_GONE" // claimed, but its event expired
	DeliveryRetried   DeliveryEventKind = "RETRIED"    // the merchant asked for it again
)

// DeliveryEvent is something that happens to a delivery.
type DeliveryEvent struct {
	Kind DeliveryEventKind
	// At is when it happened (an attempt's start).
	At time.Time
	// Attempts is how many attempts were made before this one.
	Attempts int
	// Code is the endpoint's answer (0: none), Err the failure of the
	// attempt (nil: it got an answer).
	Code int
	Err  error
	// Rand, in [0, 1), draws the retry's jitter (the caller's random
	// source: the function stays pure).
	Rand float64
}

// DeliveryStep is what one event does to a delivery.
type DeliveryStep struct {
	// Changed: the delivery is to be written with State (and NextAt).
	Changed bool
	State   DeliveryState
	// N is the number of the attempt (ANSWERED).
	N int
	// NextAt is when a pending delivery is due next.
	NextAt time.Time
	// Succeeded: the attempt was answered 2xx (the endpoint is healthy).
	Succeeded bool
	// GiveUp: the delivery ends failed.
	GiveUp bool
	// Failure is the attempt's error as recorded ("": it succeeded).
	Failure string
	// DisableBefore: after a failed attempt, the endpoint is disabled with
	// DisableReason if it has been failing since before this time.
	DisableBefore time.Time
	DisableReason string
}

// RetryJitter is the jitter of a retry's wait: ±20 %, so that endpoints
// that failed together do not come back together.
const RetryJitter = 0.2

// RetryWait is the wait after the failed attempt n (1-based) drawn with r
// in [0, 1), and false past the schedule's end: given up.
func RetryWait(n int, r float64) (time.Duration, bool) {
	if n < 1 || n > len(instore.RetrySchedule) {
		return 0, false
	}
	wait := instore.RetrySchedule[n-1]
	return wait + time.Duration((r*2*RetryJitter-RetryJitter)*float64(wait)), true
}

// DisabledReason is the reason an endpoint disabled for failing gets: it
// names instore.WebhookDisableAfter.
func DisabledReason() string {
	return "every delivery failed for " + Span(instore.WebhookDisableAfter) +
		"; fix the endpoint and enable it again (PATCH status enabled)"
}

// Span writes d for a person: whole days as "N days" ("1 day"), whole
// hours as "N hours", else as time.Duration does.
func Span(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	switch {
	case d > 0 && d%(24*time.Hour) == 0:
		return unit(int64(d/(24*time.Hour)), "day")
	case d > 0 && d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	}
	return d.String()
}

// NextDelivery applies e to a delivery in state from.
func NextDelivery(from DeliveryState, e DeliveryEvent) DeliveryStep {
	st := DeliveryStep{State: from}
	switch {
	case e.Kind == DeliveryRetried:
		st.Changed, st.State, st.NextAt = true, DeliveryPending, e.At
	case from != DeliveryPending:
		// Ended: an attempt or a give-up of a lease run out changes nothing.
	case e.Kind == DeliveryEventGone:
		st.Changed, st.State, st.GiveUp = true, DeliveryFailed, true
	case e.Kind == DeliveryAnswered:
		st.Changed, st.N = true, e.Attempts+1
		if e.Err == nil && e.Code >= 200 && e.Code < 300 {
			st.State, st.Succeeded = DeliverySucceeded, true
			return st
		}
		if e.Err != nil {
			st.Failure = e.Err.Error()
		} else {
			st.Failure = fmt.Sprintf("the endpoint answered %d; 2xx expected", e.Code)
		}
		st.DisableBefore, st.DisableReason = e.At.Add(-instore.WebhookDisableAfter), DisabledReason()
		if wait, ok := RetryWait(st.N, e.Rand); ok {
			st.NextAt = e.At.Add(wait)
		} else {
			st.State, st.GiveUp = DeliveryFailed, true
		}
	}
	return st
}

// An endpoint's health, as the dispatcher's attempts move it, one outcome
// at a time (the store folds a round's outcomes of the endpoint, in
// order, on the endpoint's row as last committed, locked):
//
//	any                 --succeeded-------------------------------->  failing time cleared
//	not failing         --failed at A------------------------------>  failing since A
//	enabled, failing    --failed, failing since before DisableBefore->  disabled, reason DisableReason
//	disabled            --failed----------------------------------->  disabled as it was (a PATCH enables it)

// Health is what the dispatcher's attempts change of an endpoint.
type Health struct {
	Status         instore.WebhookStatus
	DisabledReason string
	FailingSince   *time.Time
}

// NextHealth applies one attempt's outcome o (NextDelivery decided its
// DisableBefore and DisableReason) to an endpoint's health h.
func NextHealth(h Health, o instore.AttemptOutcome) Health {
	if o.Succeeded {
		h.FailingSince = nil
		return h
	}
	if h.FailingSince == nil {
		at := o.Attempt.At
		h.FailingSince = &at
	}
	if h.Status == instore.WebhookEnabled && h.FailingSince.Before(o.DisableBefore) {
		h.Status, h.DisabledReason = instore.WebhookDisabled, o.DisableReason
	}
	return h
}

// The merchant's changes of an endpoint: a PATCH /webhooks/{id} and a
// rotation of its secret. The store applies them to the endpoint as last
// committed, in the transaction that writes them (ChangeWebhook), so that
// a change committed meanwhile (another PATCH, a rotation, the
// dispatcher's failing time or disabling) is kept, not written over.
//
//	any       --PATCHED-------------------------->  the fields the request gives, others as they are
//	enabled   --PATCHED status disabled---------->  disabled, reason MerchantDisabledReason
//	disabled  --PATCHED status enabled----------->  enabled, reason and failing time cleared
//	any       --PATCHED its own status----------->  status, reason and failing time as they are
//	any       --ROTATED-------------------------->  the new secret; the current one signs beside it until At + SecretOverlap

// WebhookEventKind is what the merchant does to an endpoint.
type WebhookEventKind string

// Endpoint events.
const (
	WebhookPatched WebhookEventKind = "PATCHED" // a PATCH (Request)
	WebhookRotated WebhookEventKind = "ROTATED" // a rotation of the secret (Secret, At)
)

// WebhookEvent is a change the merchant makes to an endpoint.
type WebhookEvent struct {
	Kind WebhookEventKind
	// Request is a PATCH's body, validated.
	Request *instore.WebhookRequest
	// Secret is a rotation's new secret (the caller draws it: the
	// function stays pure), At when the rotation is made.
	Secret string
	At     time.Time
}

// MerchantDisabledReason is the reason of an endpoint the merchant
// disabled.
const MerchantDisabledReason = "disabled by the merchant"

// NextWebhook applies e to the endpoint w.
func NextWebhook(w instore.Webhook, e WebhookEvent) instore.Webhook {
	switch e.Kind {
	case WebhookPatched:
		r := e.Request
		r.Apply(&w)
		if r.Status == nil || *r.Status == w.Status {
			break
		}
		if *r.Status == instore.WebhookEnabled {
			w.DisabledReason, w.FailingSince = "", nil
		} else {
			w.DisabledReason = MerchantDisabledReason
		}
		w.Status = *r.Status
	case WebhookRotated:
		until := e.At.Add(instore.SecretOverlap)
		w.PreviousSecret, w.PreviousUntil, w.Secret = w.Secret, &until, e.Secret
	}
	return w
}

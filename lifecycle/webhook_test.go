package lifecycle_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextDeliveryEveryStateAndEvent runs a webhook delivery's life over
// every pair of a state and an event: the state after, the next attempt's
// time, the give-up, and the endpoint's disabling after a failure.
func TestNextDeliveryEveryStateAndEvent(t *testing.T) {
	start := t0
	last := len(instore.RetrySchedule)
	events := map[string]lifecycle.DeliveryEvent{
		"answered 204":                    {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: 0, Code: 204, Rand: 0.5},
		"answered 500, first":             {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: 0, Code: 500, Rand: 0.5},
		"no answer, first":                {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: 0, Err: errors.New("connection refused"), Rand: 0},
		"answered 500, second":            {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: 1, Code: 500, Rand: 0.999},
		"answered 410, last retry":        {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: last - 1, Code: 410, Rand: 0.5},
		"answered 500, past the schedule": {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: last, Code: 500, Rand: 0.5},
		"answered 204, past the schedule": {Kind: lifecycle.DeliveryAnswered, At: start, Attempts: last, Code: 204},
		"2xx with an error":               {Kind: lifecycle.DeliveryAnswered, At: start, Code: 200, Err: errors.New("body cut")},
		"event gone":                      {Kind: lifecycle.DeliveryEventGone, At: start},
		"retried":                         {Kind: lifecycle.DeliveryRetried, At: start},
	}
	type want struct {
		state     lifecycle.DeliveryState
		changed   bool
		wait      time.Duration // the next attempt after start (0: none)
		giveUp    bool
		failure   string // the attempt's recorded error ("" none)
		disabling bool   // a failed attempt: the endpoint may be disabled
	}
	pending, succeeded, failed := lifecycle.DeliveryPending, lifecycle.DeliverySucceeded, lifecycle.DeliveryFailed
	retry := func(wait time.Duration, failure string) want {
		return want{state: pending, changed: true, wait: wait, failure: failure, disabling: true}
	}
	s := instore.RetrySchedule
	table := map[lifecycle.DeliveryState]map[string]want{
		pending: {
			"answered 204":                    {state: succeeded, changed: true},
			"answered 500, first":             retry(s[0], "the endpoint answered 500; 2xx expected"),
			"no answer, first":                retry(s[0]-s[0]/5, "connection refused"),
			"answered 500, second":            retry(s[1]+time.Duration(0.999*0.4*float64(s[1]))-s[1]/5, "the endpoint answered 500; 2xx expected"),
			"answered 410, last retry":        retry(s[last-1], "the endpoint answered 410; 2xx expected"),
			"answered 500, past the schedule": {state: failed, changed: true, giveUp: true, failure: "the endpoint answered 500; 2xx expected", disabling: true},
			"answered 204, past the schedule": {state: succeeded, changed: true},
			"2xx with an error":               retry(s[0]-s[0]/5, "body cut"),
			"event gone":                      {state: failed, changed: true, giveUp: true},
			"retried":                         {state: pending, changed: true},
		},
	}
	for _, ended := range []lifecycle.DeliveryState{succeeded, failed} {
		row := map[string]want{}
		for name := range events {
			row[name] = want{state: ended}
		}
		row["retried"] = want{state: pending, changed: true}
		table[ended] = row
	}
	states := map[lifecycle.DeliveryState]struct{}{pending: {}, succeeded: {}, failed: {}} // a delivery is only its state
	everyPair(t, states, events, table, func(t *testing.T, sname lifecycle.DeliveryState, _ struct{}, ev lifecycle.DeliveryEvent, w want) {
		st := lifecycle.NextDelivery(sname, ev)
		if st.State != w.state || st.Changed != w.changed || st.GiveUp != w.giveUp || st.Failure != w.failure ||
			st.Succeeded != (w.changed && w.state == succeeded) {
			t.Fatalf("step %+v, want %+v", st, w)
		}
		switch {
		case ev.Kind == lifecycle.DeliveryRetried:
			if !st.NextAt.Equal(start) {
				t.Errorf("retried: due %v, want now", st.NextAt)
			}
		case w.wait > 0:
			if got := st.NextAt.Sub(start); got < w.wait-time.Millisecond || got > w.wait+time.Millisecond {
				t.Errorf("next attempt after %v, want %v", got, w.wait)
			}
		case !st.NextAt.IsZero():
			t.Errorf("next attempt at %v, want none", st.NextAt)
		}
		if w.disabling != (st.DisableReason != "") || w.disabling && !st.DisableBefore.Equal(start.Add(-instore.WebhookDisableAfter)) {
			t.Errorf("disable before %v (%q), want disabling %v", st.DisableBefore, st.DisableReason, w.disabling)
		}
		if w.changed && ev.Kind == lifecycle.DeliveryAnswered && st.N != ev.Attempts+1 {
			t.Errorf("attempt %d, want %d", st.N, ev.Attempts+1)
		}
	})
}

// TestRetryWait: each wait of the schedule with its jitter's bounds, and
// none past its end.
func TestRetryWait(t *testing.T) {
	for n, base := range instore.RetrySchedule {
		lo, _ := lifecycle.RetryWait(n+1, 0)
		mid, _ := lifecycle.RetryWait(n+1, 0.5)
		hi, ok := lifecycle.RetryWait(n+1, 0.999999)
		if !ok || lo != base-base/5 || mid != base || hi > base+base/5 || hi < base+base/5-base/1000 {
			t.Errorf("RetryWait(%d) = %v %v %v, want %v ±20 %%", n+1, lo, mid, hi, base)
		}
	}
	for _, n := range []int{0, len(instore.RetrySchedule) + 1} {
		if w, ok := lifecycle.RetryWait(n, 0.5); ok || w != 0 {
			t.Errorf("RetryWait(%d) = %v %v, want none", n, w, ok)
		}
	}
}

// TestDisabledReason: the reason names WebhookDisableAfter as a person
// reads it.
func TestDisabledReason(t *testing.T) {
	if got, want := lifecycle.DisabledReason(), "every delivery failed for 5 days; fix the endpoint and enable it again (PATCH status enabled)"; instore.WebhookDisableAfter == 5*24*time.Hour && got != want {
		t.Errorf("DisabledReason() = %q, want %q", got, want)
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "1 day", 5 * 24 * time.Hour: "5 days", time.Hour: "1 hour",
		36 * time.Hour: "36 hours", 90 * time.Minute: "1h30m0s", 0: "0s"} {
		if got := lifecycle.Span(d); got != want {
			t.Errorf("Span(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestNextWebhookEveryStateAndEvent runs the merchant's changes of an
// endpoint over every pair of an endpoint's state and a change: its
// status, disabled reason and failing time after, its secrets after a
// rotation, and the fields a PATCH gives; anything else stays as it was.
func TestNextWebhookEveryStateAndEvent(t *testing.T) {
	failing, until := t0.Add(-time.Hour), t0.Add(-time.Minute)
	base := instore.Webhook{ID: "wh_1", MerchantID: "mer_1", URL: "https://example.com/h", Description: "d",
		Status: instore.WebhookEnabled, Secret: "whsec_cur", CreatedAt: t0.Add(-48 * time.Hour), Concurrency: 1}
	with := func(f func(w *instore.Webhook)) instore.Webhook {
		w := base
		f(&w)
		return w
	}
	states := map[string]instore.Webhook{
		"enabled":          base,
		"enabled, failing": with(func(w *instore.Webhook) { w.FailingSince = &failing }),
		"enabled, rotated": with(func(w *instore.Webhook) { w.PreviousSecret, w.PreviousUntil = "whsec_old", &until }),
		"disabled for failing": with(func(w *instore.Webhook) {
			w.Status, w.DisabledReason, w.FailingSince = instore.WebhookDisabled, lifecycle.DisabledReason(), &failing
		}),
		"disabled by merchant": with(func(w *instore.Webhook) {
			w.Status, w.DisabledReason = instore.WebhookDisabled, lifecycle.MerchantDisabledReason
		}),
	}
	patch := func(r instore.WebhookRequest) lifecycle.WebhookEvent {
		return lifecycle.WebhookEvent{Kind: lifecycle.WebhookPatched, Request: &r}
	}
	enabled, disabled := instore.WebhookEnabled, instore.WebhookDisabled
	url, desc, conc, types := "https://example.com/new", "new", 4, []instore.EventType{instore.EventTerminalOnline}
	events := map[string]lifecycle.WebhookEvent{
		"patch nothing":  patch(instore.WebhookRequest{}),
		"patch fields":   patch(instore.WebhookRequest{URL: &url, EventTypes: &types, Description: &desc, Concurrency: &conc}),
		"patch enabled":  patch(instore.WebhookRequest{Status: &enabled}),
		"patch disabled": patch(instore.WebhookRequest{Status: &disabled, Description: &desc}),
		"rotate":         {Kind: lifecycle.WebhookRotated, Secret: "whsec_new", At: t0},
	}
	type want struct {
		status  instore.WebhookStatus
		reason  string // the disabled reason after
		cleared bool   // the failing time cleared
		fields  bool   // the request's url, types and concurrency
		desc    bool   // the request's description
		rotated bool   // the new secret, the one before signing beside it for SecretOverlap
	}
	same := func(w instore.Webhook) want { return want{status: w.Status, reason: w.DisabledReason} }
	byMerchant := want{status: disabled, reason: lifecycle.MerchantDisabledReason, desc: true}
	table := map[string]map[string]want{}
	for name, w := range states {
		row := map[string]want{
			"patch nothing":  same(w),
			"patch fields":   same(w),
			"patch enabled":  same(w),
			"patch disabled": byMerchant,
			"rotate":         same(w),
		}
		f := row["patch fields"]
		f.fields, f.desc = true, true
		row["patch fields"] = f
		r := row["rotate"]
		r.rotated = true
		row["rotate"] = r
		if w.Status == disabled {
			row["patch enabled"] = want{status: enabled, cleared: true}
			d := same(w) // already disabled: its reason (failing) stays
			d.desc = true
			row["patch disabled"] = d
		}
		table[name] = row
	}
	everyPair(t, states, events, table, func(t *testing.T, _ string, from instore.Webhook, e lifecycle.WebhookEvent, w want) {
		before := from
		got := lifecycle.NextWebhook(from, e)
		if !reflect.DeepEqual(from, before) {
			t.Fatalf("the endpoint given was changed: %+v", from)
		}
		exp := from
		exp.Status, exp.DisabledReason = w.status, w.reason
		if w.cleared {
			exp.FailingSince = nil
		}
		if w.fields {
			exp.URL, exp.EventTypes, exp.Concurrency = url, types, conc
		}
		if w.desc {
			exp.Description = desc
		}
		if w.rotated {
			over := t0.Add(instore.SecretOverlap)
			exp.Secret, exp.PreviousSecret, exp.PreviousUntil = "whsec_new", from.Secret, &over
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("got  %+v\nwant %+v", got, exp)
		}
	})
}

// TestNextHealth: every (health, outcome) pair of an endpoint. A success
// clears the failing time (a disabled endpoint stays disabled: the
// merchant enables it); a failure starts it once; an enabled endpoint
// failing since before the outcome's DisableBefore is disabled with its
// reason, one failing since later is not, and a disabled one keeps its
// own reason.
func TestNextHealth(t *testing.T) {
	at := t0.Add(10 * 24 * time.Hour)
	old, recent := t0, at.Add(-time.Hour)
	ok := instore.AttemptOutcome{Succeeded: true, Attempt: instore.WebhookAttempt{At: at}}
	failed := instore.AttemptOutcome{Attempt: instore.WebhookAttempt{At: at},
		DisableBefore: at.Add(-instore.WebhookDisableAfter), DisableReason: lifecycle.DisabledReason()}
	enabled, disabled := instore.WebhookEnabled, instore.WebhookDisabled
	healths := map[string]lifecycle.Health{
		"enabled":                  {Status: enabled},
		"enabled, failing lately":  {Status: enabled, FailingSince: &recent},
		"enabled, failing long":    {Status: enabled, FailingSince: &old},
		"disabled by the merchant": {Status: disabled, DisabledReason: lifecycle.MerchantDisabledReason},
		"disabled, failing long":   {Status: disabled, DisabledReason: lifecycle.MerchantDisabledReason, FailingSince: &old},
	}
	outcomes := map[string]instore.AttemptOutcome{"succeeded": ok, "failed": failed}
	type want struct {
		status  instore.WebhookStatus
		reason  string
		failing *time.Time
	}
	merchant := lifecycle.MerchantDisabledReason
	table := map[string]map[string]want{
		"enabled":                  {"succeeded": {enabled, "", nil}, "failed": {enabled, "", &at}},
		"enabled, failing lately":  {"succeeded": {enabled, "", nil}, "failed": {enabled, "", &recent}},
		"enabled, failing long":    {"succeeded": {enabled, "", nil}, "failed": {disabled, lifecycle.DisabledReason(), &old}},
		"disabled by the merchant": {"succeeded": {disabled, merchant, nil}, "failed": {disabled, merchant, &at}},
		"disabled, failing long":   {"succeeded": {disabled, merchant, nil}, "failed": {disabled, merchant, &old}},
	}
	everyPair(t, healths, outcomes, table, func(t *testing.T, _ string, h lifecycle.Health, o instore.AttemptOutcome, w want) {
		before := h
		if h.FailingSince != nil {
			f := *h.FailingSince
			before.FailingSince = &f
		}
		got := lifecycle.NextHealth(h, o)
		if got.Status != w.status || got.DisabledReason != w.reason || (got.FailingSince == nil) != (w.failing == nil) ||
			got.FailingSince != nil && !got.FailingSince.Equal(*w.failing) {
			t.Errorf("NextHealth = %s %q failing since %v; want %s %q %v", got.Status, got.DisabledReason, got.FailingSince, w.status, w.reason, w.failing)
		}
		if h.FailingSince != nil && !h.FailingSince.Equal(*before.FailingSince) {
			t.Errorf("the health given was changed")
		}
	})
}

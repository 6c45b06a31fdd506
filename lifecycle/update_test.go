package lifecycle_test

import (
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextUpdateEveryStateAndEvent runs a software update's life over
// every pair of a state and an event: the table gives the status after,
// what is written (and from which stored statuses), and what the step
// owes (a timer, a delivery, a send, a resend, the delivery mark cleared,
// the device's version recorded), or that the event is refused.
func TestNextUpdateEveryStateAndEvent(t *testing.T) {
	notBefore := t0.Add(time.Hour)
	deliveredAt := notBefore.Add(time.Minute)
	const timeout = 15 * time.Minute
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	scheduled := instore.Update{ID: "upd_1", TerminalID: "10000001", PackageID: "pkg_1", Status: instore.UpdateScheduled,
		NotBefore: &notBefore, CreatedAt: t0, UpdatedAt: t0}
	fresh := scheduled
	fresh.Status, fresh.UpdatedAt = "", time.Time{}
	delivered := scheduled
	delivered.DeliveredAt = &deliveredAt
	downloading := delivered
	downloading.Status, downloading.UpdatedAt = instore.UpdateDownloading, deliveredAt.Add(time.Minute)
	installed := downloading
	installed.Status, installed.SoftwareVersion, installed.DeliveredAt = instore.UpdateInstalled, "2.0.0", nil
	states := map[lifecycle.UpdateState]instore.Update{
		lifecycle.UpdateNew: fresh, lifecycle.UpdateScheduled: scheduled, lifecycle.UpdateDelivered: delivered,
		lifecycle.UpdateDownloading: downloading, lifecycle.UpdateEnded: installed,
	}

	hello := func(version string, helloAt time.Time) lifecycle.UpdateEvent {
		return lifecycle.UpdateEvent{Kind: lifecycle.UpdateHello, At: at(2 * time.Hour), SoftwareVersion: version, PackageVersion: "2.0.0", HelloAt: helloAt}
	}
	report := func(status instore.UpdateStatus, version, reason string) lifecycle.UpdateEvent {
		return lifecycle.UpdateEvent{Kind: lifecycle.UpdateReported, At: at(2 * time.Hour), Status: status, SoftwareVersion: version, Reason: reason}
	}
	events := map[string]lifecycle.UpdateEvent{
		"requested":                      {Kind: lifecycle.UpdateRequested, At: t0},
		"deliver before notBefore":       {Kind: lifecycle.UpdateDeliver, At: at(30 * time.Minute)},
		"deliver due":                    {Kind: lifecycle.UpdateDeliver, At: at(2 * time.Hour)},
		"send failed":                    {Kind: lifecycle.UpdateSendFailed, At: at(2 * time.Hour)},
		"reported downloading":           report(instore.UpdateDownloading, "", ""),
		"reported installed":             report(instore.UpdateInstalled, "2.0.0", ""),
		"reported installed, no version": report(instore.UpdateInstalled, "", ""),
		"reported failed":                report(instore.UpdateFailed, "", "disk full"),
		"reported failed, no reason":     report(instore.UpdateFailed, "", ""),
		"reported bogus":                 report("BOGUS", "", ""),
		"hello on the package version":   hello("2.0.0", at(2*time.Hour)),
		"hello on another version":       hello("1.0.0", at(2*time.Hour)),
		"hello, sent on this session":    hello("1.0.0", t0),
		"swept within the time-out":      {Kind: lifecycle.UpdateSwept, At: downloading.UpdatedAt.Add(timeout), InstallTimeout: timeout},
		"swept past the time-out":        {Kind: lifecycle.UpdateSwept, At: downloading.UpdatedAt.Add(timeout + time.Second), InstallTimeout: timeout},
		"unknown":                        {Kind: "BOGUS", At: at(2 * time.Hour)},
	}

	type want struct {
		status    instore.UpdateStatus // the status after
		version   string               // its SoftwareVersion after
		reason    string               // its Reason after
		delivered bool                 // DeliveredAt set after
		changed   bool
		from      []instore.UpdateStatus
		device    string // DeviceVersion
		arm       bool   // a timer at notBefore
		try       bool   // TryDeliver
		clear     bool   // ClearDelivered
		send      bool
		resend    bool
		refused   bool
	}
	sd := []instore.UpdateStatus{instore.UpdateScheduled, instore.UpdateDownloading}
	// Outcomes shared by several states; each state's row sets what the
	// update is before.
	refused := func(u instore.Update) want {
		return want{status: u.Status, version: u.SoftwareVersion, delivered: u.DeliveredAt != nil, refused: true}
	}
	same := func(u instore.Update) want {
		return want{status: u.Status, version: u.SoftwareVersion, delivered: u.DeliveredAt != nil}
	}
	with := func(w want, f func(*want)) want { f(&w); return w }
	reports := func(u instore.Update) map[string]want {
		return map[string]want{
			"reported installed": {status: instore.UpdateInstalled, version: "2.0.0", delivered: u.DeliveredAt != nil,
				changed: true, from: sd, device: "2.0.0"},
			"reported installed, no version": refused(u),
			"reported failed":                {status: instore.UpdateFailed, reason: "disk full", delivered: u.DeliveredAt != nil, changed: true, from: sd},
			"reported failed, no reason":     {status: instore.UpdateFailed, reason: lifecycle.NoReason, delivered: u.DeliveredAt != nil, changed: true, from: sd},
			"reported bogus":                 refused(u),
			"requested":                      refused(u),
			"unknown":                        refused(u),
		}
	}
	table := map[lifecycle.UpdateState]map[string]want{
		lifecycle.UpdateNew: {
			"requested": {status: instore.UpdateScheduled, changed: true, try: true},
		},
		lifecycle.UpdateScheduled: {
			"deliver before notBefore":     with(same(scheduled), func(w *want) { w.arm = true }),
			"deliver due":                  with(same(scheduled), func(w *want) { w.send, w.delivered = true, true }),
			"send failed":                  same(scheduled),
			"reported downloading":         {status: instore.UpdateDownloading, changed: true, from: []instore.UpdateStatus{instore.UpdateScheduled}},
			"hello on the package version": with(same(scheduled), func(w *want) { w.try = true }),
			"hello on another version":     with(same(scheduled), func(w *want) { w.try = true }),
			"hello, sent on this session":  with(same(scheduled), func(w *want) { w.try = true }),
			"swept within the time-out":    with(same(scheduled), func(w *want) { w.try = true }),
			"swept past the time-out":      with(same(scheduled), func(w *want) { w.try = true }),
		},
		lifecycle.UpdateDelivered: {
			"deliver before notBefore":     with(same(delivered), func(w *want) { w.arm = true }),
			"deliver due":                  with(same(delivered), func(w *want) { w.send = true }),
			"send failed":                  {status: instore.UpdateScheduled, clear: true},
			"reported downloading":         {status: instore.UpdateDownloading, delivered: true, changed: true, from: []instore.UpdateStatus{instore.UpdateScheduled}},
			"hello on the package version": {status: instore.UpdateInstalled, version: "2.0.0", delivered: true, changed: true, from: sd},
			"hello on another version":     {status: instore.UpdateScheduled, clear: true, try: true},
			"hello, sent on this session":  same(delivered),
			"swept within the time-out":    with(same(delivered), func(w *want) { w.try = true }),
			"swept past the time-out":      with(same(delivered), func(w *want) { w.try = true }),
		},
		lifecycle.UpdateDownloading: {
			"deliver before notBefore":     same(downloading),
			"deliver due":                  same(downloading),
			"send failed":                  same(downloading),
			"reported downloading":         same(downloading),
			"hello on the package version": {status: instore.UpdateInstalled, version: "2.0.0", delivered: true, changed: true, from: sd},
			"hello on another version":     with(same(downloading), func(w *want) { w.resend = true }),
			"hello, sent on this session":  with(same(downloading), func(w *want) { w.resend = true }),
			"swept within the time-out":    same(downloading),
			"swept past the time-out": {status: instore.UpdateFailed, reason: lifecycle.InstallTimeoutReason(timeout), delivered: true,
				changed: true, from: []instore.UpdateStatus{instore.UpdateDownloading}},
		},
		lifecycle.UpdateEnded: {
			"reported installed": with(same(installed), func(w *want) { w.device = "2.0.0" }),
			"reported failed":    same(installed), "reported failed, no reason": same(installed), "reported downloading": same(installed),
			"deliver before notBefore": same(installed), "deliver due": same(installed), "send failed": same(installed),
			"hello on the package version": same(installed), "hello on another version": same(installed),
			"hello, sent on this session": same(installed), "swept within the time-out": same(installed),
			"swept past the time-out": same(installed), "unknown": same(installed),
		},
	}
	// A state's row falls back on the report outcomes, which only the
	// update before tells apart; a stored update refuses REQUESTED and an
	// unknown event only while unfinished, a new one every other event.
	for state, u := range states {
		for name, w := range reports(u) {
			if _, ok := table[state][name]; ok {
				continue
			}
			switch {
			case state == lifecycle.UpdateNew:
				w = refused(u)
			case state == lifecycle.UpdateEnded && w.changed:
				continue // set in the row
			}
			table[state][name] = w
		}
		if state == lifecycle.UpdateNew {
			for name := range events {
				if _, ok := table[state][name]; !ok {
					table[state][name] = refused(u)
				}
			}
		}
	}

	for sname, u := range states {
		if got := lifecycle.UpdateStateOf(&u); sname != lifecycle.UpdateNew && got != sname {
			t.Errorf("UpdateStateOf(%s) = %s", sname, got)
		}
	}
	everyPair(t, states, events, table, func(t *testing.T, sname lifecycle.UpdateState, u instore.Update, ev lifecycle.UpdateEvent, w want) {
		next, st := lifecycle.NextUpdate(sname, u, ev)
		if (st.Refused != nil) != w.refused || st.Changed != w.changed || !slices.Equal(st.From, w.from) ||
			st.DeviceVersion != w.device || !st.Arm.IsZero() != w.arm || st.TryDeliver != w.try ||
			st.ClearDelivered != w.clear || st.Send != w.send || st.Resend != w.resend {
			t.Fatalf("step %+v, want %+v", st, w)
		}
		if st.Ended != (w.changed && (w.status == instore.UpdateInstalled || w.status == instore.UpdateFailed)) {
			t.Errorf("ended %v for status %s", st.Ended, w.status)
		}
		if w.arm && !st.Arm.Equal(notBefore) {
			t.Errorf("timer at %v, want notBefore %v", st.Arm, notBefore)
		}
		if next.Status != w.status || next.SoftwareVersion != w.version || next.Reason != w.reason {
			t.Errorf("update %s %q %q, want %s %q %q", next.Status, next.SoftwareVersion, next.Reason, w.status, w.version, w.reason)
		}
		if (next.DeliveredAt != nil) != w.delivered {
			t.Errorf("delivered at %v, want set %v", next.DeliveredAt, w.delivered)
		}
		if w.send && !next.DeliveredAt.Equal(ev.At) {
			t.Errorf("delivered at %v, want the event's %v", next.DeliveredAt, ev.At)
		}
		if wantAt := u.UpdatedAt; w.changed && !next.UpdatedAt.Equal(ev.At) || !w.changed && !next.UpdatedAt.Equal(wantAt) {
			t.Errorf("updated at %v (changed %v, event at %v)", next.UpdatedAt, w.changed, ev.At)
		}
		if next.ID != u.ID || next.CreatedAt != u.CreatedAt || next.PackageID != u.PackageID {
			t.Errorf("the update changed identity: %+v", next)
		}
	})
	if got := lifecycle.UpdateStateOf(nil); got != lifecycle.UpdateNew {
		t.Errorf("UpdateStateOf(nil) = %s", got)
	}
	failed := installed
	failed.Status = instore.UpdateFailed
	if got := lifecycle.UpdateStateOf(&failed); got != lifecycle.UpdateEnded {
		t.Errorf("UpdateStateOf(FAILED) = %s", got)
	}
}

// TestUpdateBusy: an update keeps its terminal busy while DOWNLOADING, or
// handed to the device within the ack time-out.
func TestUpdateBusy(t *testing.T) {
	const ack = 10 * time.Second
	sent := t0.Add(-ack + time.Millisecond)
	stale := t0.Add(-ack)
	for _, c := range []struct {
		name string
		u    *instore.Update
		want bool
	}{
		{"none", nil, false},
		{"scheduled", &instore.Update{Status: instore.UpdateScheduled}, false},
		{"delivered within the ack time-out", &instore.Update{Status: instore.UpdateScheduled, DeliveredAt: &sent}, true},
		{"delivered an ack time-out ago", &instore.Update{Status: instore.UpdateScheduled, DeliveredAt: &stale}, false},
		{"downloading", &instore.Update{Status: instore.UpdateDownloading}, true},
		{"downloading, delivered long ago", &instore.Update{Status: instore.UpdateDownloading, DeliveredAt: &stale}, true},
	} {
		if got := lifecycle.UpdateBusy(c.u, t0, ack); got != c.want {
			t.Errorf("%s: UpdateBusy = %v, want %v", c.name, got, c.want)
		}
	}
}

package lifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// The life of a software update over the terminal session. An update is
// created SCHEDULED and delivered (handed to the device's session) once
// its notBefore passed and the device is online and runs no transaction;
// the device reports DOWNLOADING, then INSTALLED or FAILED. A device that
// says hello running the package's version after the update was handed to
// it installed it (it restarted into it); one that says hello on a new
// session while DOWNLOADING is sent it again. An update DOWNLOADING past
// the install time-out without a report ends FAILED. A final status stands.
//
//	(new)       --REQUESTED---------------------------->  scheduled (delivery tried)
//	scheduled   --DELIVER, before notBefore------------->  unchanged (timer at notBefore)
//	scheduled, delivered --DELIVER, due----------------->  delivered (marked and sent, if the device is online and idle)
//	delivered   --SEND_FAILED--------------------------->  scheduled (to be sent again)
//	scheduled, delivered --REPORTED DOWNLOADING--------->  DOWNLOADING
//	scheduled, delivered, DOWNLOADING --REPORTED INSTALLED v-->  INSTALLED v
//	scheduled, delivered, DOWNLOADING --REPORTED FAILED-------->  FAILED
//	delivered, DOWNLOADING --HELLO on the package's version--->  INSTALLED
//	DOWNLOADING --HELLO on another version------------>  unchanged (sent again)
//	delivered   --HELLO on another version, new session-->  scheduled (delivery tried)
//	scheduled   --HELLO--------------------------------->  unchanged (delivery tried)
//	DOWNLOADING --SWEPT, past the install time-out------>  FAILED
//	scheduled, delivered --SWEPT------------------------>  unchanged (delivery tried)
//	final       --any----------------------------------->  unchanged
//
// The store writes a status by compare-and-set (SetUpdateStatus, from the
// statuses the step names) and marks delivery by compare-and-set too
// (MarkUpdateDelivered: SCHEDULED, not delivered since a stale time, no
// PENDING transaction); internal/service/update.go reads, calls
// NextUpdate and carries the step out.

// UpdateState is where an update is in its life.
type UpdateState string

// Update states.
const (
	UpdateNew         UpdateState = "NEW"                                  // not stored yet
	UpdateScheduled   UpdateState = UpdateState(instore.UpdateScheduled)   // SCHEDULED, not handed to the device (DeliveredAt nil)
	UpdateDelivered   UpdateState = "DELIVERED"                            // SCHEDULED, handed to the device's session (DeliveredAt set), no report yet
	UpdateDownloading UpdateState = UpdateState(instore.UpdateDownloading) // the device reported DOWNLOADING
	UpdateEnded       UpdateState = "ENDED"                                // INSTALLED or FAILED
)

// UpdateStateOf is the state of the update u (nil: an update not stored
// yet).
func UpdateStateOf(u *instore.Update) UpdateState {
	switch {
	case u == nil:
		return UpdateNew
	case u.Final():
		return UpdateEnded
	case u.Status == instore.UpdateDownloading:
		return UpdateDownloading
	case u.DeliveredAt != nil:
		return UpdateDelivered
	}
	return UpdateScheduled
}

// UpdateEventKind is what happens to an update.
type UpdateEventKind string

// Update events.
const (
	UpdateRequested  UpdateEventKind = "REQUESTED"   // the Access API's POST /updates
	UpdateDeliver    UpdateEventKind = "DELIVER"     // delivery is tried: created, notBefore came, a transaction ended, hello, the sweep
	UpdateSendFailed UpdateEventKind = "SEND_FAILED" // the gateway could not send the delivered update
	UpdateReported   UpdateEventKind = "REPORTED"    // the device's update-status (Status, SoftwareVersion, Reason)
	UpdateHello      UpdateEventKind = "HELLO"       // the device said hello (SoftwareVersion, PackageVersion)
	UpdateSwept      UpdateEventKind = "SWEPT"       // the update sweep (InstallTimeout)
)

// UpdateEvent is something that happens to an update.
type UpdateEvent struct {
	Kind UpdateEventKind
	// At is when it is applied (the time a change is written with).
	At time.Time
	// Status, SoftwareVersion, Reason: (REPORTED) what the device reported.
	// SoftwareVersion is also (HELLO) the version the device runs.
	Status          instore.UpdateStatus
	SoftwareVersion string
	Reason          string
	// PackageVersion: (HELLO) the version of the update's package.
	PackageVersion string
	// HelloAt: (HELLO) when the device's session said hello.
	HelloAt time.Time
	// InstallTimeout: (SWEPT) how long an update may stay DOWNLOADING
	// without a report.
	InstallTimeout time.Duration
}

// UpdateStep is what one event does to an update.
type UpdateStep struct {
	// Changed: the status is to be written (SetUpdateStatus: compare-and-set
	// on the stored status being one of From; a conflict means it moved on
	// and is not an error).
	Changed bool
	From    []instore.UpdateStatus
	// Ended: the update is INSTALLED or FAILED with this change.
	Ended bool
	// DeviceVersion: the device reported running this version: record it
	// before the write (and whether or not the write applies).
	DeviceVersion string
	// Arm: a timer is to try delivery again at this time (zero: none).
	Arm time.Time
	// TryDeliver: delivery is to be tried now (a DELIVER event after a
	// fresh read).
	TryDeliver bool
	// ClearDelivered: the stored delivery mark is to be cleared (the update
	// is to be sent again), before TryDeliver.
	ClearDelivered bool
	// Send: the update is due: mark it delivered at the event's time (the
	// store's compare-and-set) and send it, if the device is online.
	Send bool
	// Resend: send the update again; nothing is written.
	Resend bool
	// Refused: the event cannot apply (a bad report, an event of an update
	// not stored, an update created twice).
	Refused error
}

// UpdateBusy reports whether the unfinished update u (nil: none) keeps its
// terminal busy at now: DOWNLOADING, or handed to the device within the
// ack time-out and not reported on yet. A transaction then answers WP09.
func UpdateBusy(u *instore.Update, now time.Time, ackTimeout time.Duration) bool {
	return u != nil && (u.Status == instore.UpdateDownloading || u.DeliveredAt != nil && now.Sub(*u.DeliveredAt) < ackTimeout)
}

// InstallTimeoutReason is the reason of an update the sweep ended FAILED.
func InstallTimeoutReason(timeout time.Duration) string {
	return fmt.Sprintf("the terminal did not report the end of the installation within %v", timeout)
}

// NoReason is the reason of a FAILED report that gave none.
const NoReason = "the terminal gave no reason"

// NextUpdate applies e to the update u (a copy the caller owns; for
// UpdateRequested, the new update with its ids, notBefore and CreatedAt)
// in state from, and returns its next state and what the change owes.
func NextUpdate(from UpdateState, u instore.Update, e UpdateEvent) (instore.Update, UpdateStep) {
	var st UpdateStep
	device := "" // an INSTALLED report's version
	end := func(status instore.UpdateStatus, froms ...instore.UpdateStatus) (instore.Update, UpdateStep) {
		u.Status, u.UpdatedAt = status, e.At
		st.Changed, st.Ended, st.From, st.DeviceVersion = true, true, froms, device
		return u, st
	}
	if e.Kind == UpdateReported {
		// A report is checked before the state: a bad one is an error
		// whatever the update's status.
		switch e.Status {
		case instore.UpdateDownloading:
		case instore.UpdateInstalled:
			if e.SoftwareVersion == "" {
				st.Refused = errors.New("update status INSTALLED without the software version")
				return u, st
			}
			device = e.SoftwareVersion
		case instore.UpdateFailed:
		default:
			st.Refused = fmt.Errorf("update status %q is not one a terminal reports", e.Status)
			return u, st
		}
	}
	switch {
	case e.Kind == UpdateRequested && from == UpdateNew:
		u.Status, u.UpdatedAt, u.DeliveredAt = instore.UpdateScheduled, e.At, nil
		st.Changed, st.TryDeliver = true, true
	case e.Kind == UpdateRequested:
		st.Refused = fmt.Errorf("update %s exists already", u.ID)
	case from == UpdateNew:
		st.Refused = fmt.Errorf("update event %s of an update not stored", e.Kind)
	case from == UpdateEnded:
		// The first final status stands; the device's version is news
		// all the same.
		st.DeviceVersion = device
	case e.Kind == UpdateReported:
		switch {
		case e.Status == instore.UpdateDownloading && from == UpdateDownloading:
			// Reported already.
		case e.Status == instore.UpdateDownloading:
			u.Status, u.UpdatedAt = instore.UpdateDownloading, e.At
			st.Changed, st.From = true, []instore.UpdateStatus{instore.UpdateScheduled}
		case e.Status == instore.UpdateInstalled:
			u.SoftwareVersion = e.SoftwareVersion
			return end(instore.UpdateInstalled, instore.UpdateScheduled, instore.UpdateDownloading)
		default:
			u.Reason = e.Reason
			if u.Reason == "" {
				u.Reason = NoReason
			}
			return end(instore.UpdateFailed, instore.UpdateScheduled, instore.UpdateDownloading)
		}
	case e.Kind == UpdateHello:
		switch {
		case from != UpdateScheduled && e.SoftwareVersion == e.PackageVersion:
			// Handed to the device, which now runs the package's version:
			// it restarted into it.
			u.SoftwareVersion = e.SoftwareVersion
			return end(instore.UpdateInstalled, instore.UpdateScheduled, instore.UpdateDownloading)
		case from == UpdateDownloading:
			st.Resend = true
		case from == UpdateDelivered && !u.DeliveredAt.Before(e.HelloAt):
			// Sent on this session already (created while its hello was
			// being answered): clearing it would let a purchase start on a
			// terminal that is installing.
		case from == UpdateDelivered:
			// Sent on an earlier session, which may have lost it.
			u.DeliveredAt = nil
			st.ClearDelivered, st.TryDeliver = true, true
		default:
			st.TryDeliver = true
		}
	case e.Kind == UpdateDeliver:
		switch {
		case from == UpdateDownloading:
		case u.NotBefore != nil && e.At.Before(*u.NotBefore):
			st.Arm = *u.NotBefore
		default:
			u.DeliveredAt = &e.At
			st.Send = true
		}
	case e.Kind == UpdateSendFailed:
		if from == UpdateDelivered {
			u.DeliveredAt = nil
			st.ClearDelivered = true
		}
	case e.Kind == UpdateSwept:
		switch {
		case from == UpdateDownloading && e.At.Sub(u.UpdatedAt) > e.InstallTimeout:
			u.Reason = InstallTimeoutReason(e.InstallTimeout)
			return end(instore.UpdateFailed, instore.UpdateDownloading)
		case from == UpdateDownloading:
		default:
			st.TryDeliver = true
		}
	default:
		st.Refused = fmt.Errorf("unknown update event %q", e.Kind)
	}
	return u, st
}

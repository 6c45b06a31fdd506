package service_test

import (
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// TestTransactionEventTypes: the integrator event of each kind of timeline
// change; a change that moves no status and is not a stage, an ack or a
// confirmation is no event, except a late result, which gives the final
// transaction its result.
func TestTransactionEventTypes(t *testing.T) {
	for _, tc := range []struct {
		kind          instore.TimelineKind
		before, after string
		want          instore.EventType
	}{
		{instore.EventCreated, "", "PENDING", instore.EventTransactionCreated},
		{instore.EventAcknowledged, "PENDING", "PENDING", instore.EventTransactionAcknowledged},
		{instore.EventProgress, "PENDING", "PENDING", instore.EventTransactionProgress},
		{instore.EventCancelRequested, "PENDING", "PENDING", ""},
		{instore.EventResult, "PENDING", "APPROVED", instore.EventTransactionFinal},
		{instore.EventDeadline, "PENDING", "TECHNICAL_ERROR", instore.EventTransactionFinal},
		{instore.EventLateApproval, "TECHNICAL_ERROR", "REVERSED", instore.EventTransactionFinal},
		{instore.EventLateResult, "TECHNICAL_ERROR", "TECHNICAL_ERROR", instore.EventTransactionFinal},
		{instore.EventReversed, "APPROVED", "REVERSED", instore.EventTransactionFinal},
		{instore.EventConfirmed, "APPROVED", "APPROVED", instore.EventTransactionConfirmed},
		{instore.EventAutoReversed, "APPROVED", "REVERSED", instore.EventTransactionAutoReversed},
	} {
		got := service.TransactionEventType(instore.TransactionEvent{Kind: tc.kind, StatusBefore: tc.before, StatusAfter: tc.after})
		if got != tc.want {
			t.Errorf("%s %s->%s: %q, want %q", tc.kind, tc.before, tc.after, got, tc.want)
		}
	}
}

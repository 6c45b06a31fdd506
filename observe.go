package instore

import (
	"time"
)

// Observer is told what an operator watches the Service for (the metrics
// of internal/metrics implement it). Its methods are called after the
// change they report is committed, once per change, on the goroutine that
// committed it: they must be quick and must not call the Service.
type Observer interface {
	// TransactionEnded reports a transaction that reached its final
	// status: once per transaction, whichever path ended it (the
	// terminal's result, the ECR's cancel, the ack time-out, the deadline,
	// a command that could not be sent, an approved reversal).
	TransactionEnded(e TransactionEnd)
	// LateApprovalReversed reports a transaction the service had ended
	// (WP25, WP36) whose terminal then approved it: it is reversed on the
	// terminal and its status becomes REVERSED.
	LateApprovalReversed(t *Transaction)
}

// TransactionEnd is what the Service reports of a transaction that ended.
type TransactionEnd struct {
	Transaction *Transaction
	// Status is the code of its final status (APPROVED, TECHNICAL_ERROR,
	// ...) and ErrorCode the WP code of its error ("" when it has none).
	Status, ErrorCode string
	// AckDuration is the time from its creation to the terminal's
	// acknowledgement (Acknowledged false: it was never acknowledged);
	// Duration the time from its creation to its final status. Both are
	// taken from its stored times, so a transaction ended after a restart
	// (or by another node's timer) counts from its real creation.
	AckDuration  time.Duration
	Acknowledged bool
	Duration     time.Duration
}

package instore

import (
	"context"
	"log/slog"
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

// ended reports a transaction that just reached its final status: the
// "transaction ended" log line and the Observer. Both commit paths of a
// final status call it once the change is committed (finishWith for a
// change from PENDING to final, applyReversal for an approved reversal),
// so that every ended transaction is reported exactly once.
func (s *Service) ended(t *Transaction) {
	e := TransactionEnd{Transaction: t}
	if c, ok := s.Metadata.TransactionStatus(t.StatusID); ok {
		e.Status = c.Code
	}
	if t.ErrorID != nil {
		if c, ok := lookup(s.Metadata.ErrorCodes, *t.ErrorID); ok {
			e.ErrorCode = c.Code
		}
	}
	end := s.now()
	if t.CompletedAt != nil {
		end = *t.CompletedAt
	}
	e.Duration = max(end.Sub(t.CreatedAt), 0)
	if t.AcknowledgedAt != nil {
		e.Acknowledged, e.AckDuration = true, max(t.AcknowledgedAt.Sub(t.CreatedAt), 0)
	}
	if l := s.log(); l.Enabled(context.Background(), slog.LevelInfo) {
		// The terminal and merchant ids are fingerprinted by the service's
		// redacting logger (internal/logging); `instore admin fingerprint
		// VALUE` finds their lines.
		attrs := make([]slog.Attr, 0, 9)
		attrs = append(attrs, slog.String("ref", t.ID), slog.String("type", t.Type), slog.String("status", e.Status),
			slog.String("errorCode", e.ErrorCode), slog.Int64("durationMs", e.Duration.Milliseconds()))
		if e.Acknowledged {
			attrs = append(attrs, slog.Int64("ackMs", e.AckDuration.Milliseconds()))
		}
		attrs = append(attrs, slog.String("terminalId", t.TerminalID), slog.String("merchantId", t.MerchantID))
		l.LogAttrs(context.Background(), slog.LevelInfo, "transaction ended", attrs...)
	}
	if s.Observer != nil {
		s.Observer.TransactionEnded(e)
	}
}

// lateApprovalReversed reports a late approval turned REVERSED.
func (s *Service) lateApprovalReversed(t *Transaction) {
	if s.Observer != nil {
		s.Observer.LateApprovalReversed(t)
	}
}

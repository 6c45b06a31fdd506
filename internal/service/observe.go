package service

import (
	"context"
	"log/slog"

	"github.com/instore-dev/instore"
)

// ended reports a transaction that just reached its final status: the
// "transaction ended" log line and the Observer. The one commit path of a
// transaction's change calls it once the change that made it final is
// committed (apply.go, committed), so that every ended transaction is
// reported exactly once.
func (s *Service) ended(t *instore.Transaction) {
	e := instore.TransactionEnd{Transaction: t}
	if c, ok := s.Metadata.TransactionStatus(t.StatusID); ok {
		e.Status = c.Code
	}
	if t.ErrorID != nil {
		if c, ok := s.Metadata.ErrorCodeByID(*t.ErrorID); ok {
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
		attrs = append(attrs, slog.String("ref", t.ID), slog.String("type", string(t.Type)), slog.String("status", e.Status),
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
func (s *Service) lateApprovalReversed(t *instore.Transaction) {
	if s.Observer != nil {
		s.Observer.LateApprovalReversed(t)
	}
}

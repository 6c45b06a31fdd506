package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

// A day close (docs/decisions.md, "Day close"): CloseBatch stores a
// PENDING close, sends it and waits for the terminal's batch up to the
// close time-out (the ack time-out); TerminalBatch applies the answer,
// whenever it comes. The close is the record: its timer is re-armed by
// Recover, ended by the sweep, and a PENDING close is sent again after
// every hello of its device (closeOnHello).

// newBatchID is a new batchId: "bat_" and 32 hex digits (newID).
func (s *Service) newBatchID() string { return s.newID("bat_", s.now()) }

// batchErrorIDs maps the codes a close fails with to their errorCodes ids.
func (s *Service) batchErrorIDs() map[string]int {
	ids := map[string]int{}
	for _, code := range []string{instore.WP25, instore.WP23} {
		if c, ok := s.Metadata.ErrorCode(code); ok {
			ids[code] = c.ID
		}
	}
	return ids
}

// closing answers WP09 (reason BATCH_CLOSE) while the terminal ID closes
// its batch: no command starts then.
func (s *Service) closing(ctx context.Context, terminalID string) error {
	b, err := s.Store.PendingBatch(ctx, terminalID)
	if ok, err := found(err, "pending close"); !ok {
		return err
	}
	e := instore.Errorf(instore.WP09, "The terminal is closing its batch; retry once the close (batchId %s) ended.", b.ID)
	e.Reason = instore.ReasonBatchClose
	return e
}

// CloseBatch closes a terminal's batch and answers with the batch once the
// terminal answered. Errors, in order: validation (terminalId), WP03, WP16,
// WP01, WP30, WP23, WP09 (a transaction, an update or a close runs); WP25
// when the terminal does not answer within the ack time-out (the close is
// FAILED; a late answer still closes it). With an Idempotency-Key
// (claim), the close is tied to the key's record in the database
// transaction that creates it: a retry, after a crash too, answers about
// that close (resumeClose) and never closes the batch again.
func (s *Service) CloseBatch(ctx context.Context, p *instore.Principal, terminalID string, claim *instore.IdempotencyClaim) (*instore.Batch, error) {
	if claim != nil && claim.Resume != "" {
		return s.resumeClose(ctx, p, claim.Resume)
	}
	term, err := s.terminalOp(ctx, p, terminalIDRequest(terminalID), terminalID)
	if err != nil {
		return nil, err
	}
	serial, _, err := s.readiness(ctx, term, needIdle)
	if err != nil {
		return nil, err
	}
	bg, ok := s.Gateway.(instore.BatchGateway)
	if !ok {
		return nil, instore.Errorf(instore.WP23, "The terminal is offline.")
	}
	now := s.now()
	opened := term.CreatedAt
	if last, err := s.Store.LastClosedBatch(ctx, term.TerminalID); err == nil {
		opened = last.ClosedAt
	} else if !errors.Is(err, instore.ErrNotFound) {
		return nil, fmt.Errorf("last closed batch: %w", err)
	}
	if mutant.On(mutant.CloseWindowNotMoved) {
		opened = term.CreatedAt
	}
	b, _ := lifecycle.NextBatch(instore.Batch{ID: s.newBatchID(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, SerialNumber: serial,
		OpenedAt: opened, ClosedAt: now}, lifecycle.BatchEvent{Kind: lifecycle.BatchRequested, At: now}, nil)
	ch, release := s.changes.watch(b.ID)
	defer func() { release() }()
	switch err := s.Store.CreateBatch(ctx, &b, claim); {
	case errors.Is(err, instore.ErrConflict):
		return nil, s.busy(ctx, term.TerminalID)
	case errors.Is(err, instore.ErrIdempotencyLost):
		return nil, instore.Errorf(instore.EConflict, "Another request with this Idempotency-Key took it over; retry with the same key for its answer.")
	case err != nil:
		return nil, fmt.Errorf("create batch: %w", err)
	}
	until := lifecycle.BatchDue(&b, s.ackTimeout())
	s.arm(b.ID, until, s.closeExpired)
	s.log().Info("batch close sent", "batchId", b.ID)
	// A close goes like a command (owed.go): after the cancels the
	// terminal is owed, so that a transaction the service ended but the
	// terminal still runs ends there first and is in this batch, not
	// the next (docs/terminal-protocol.md section 14).
	err = s.cancelsBefore(ctx, serial, "")
	if err == nil {
		err = bg.SendClose(ctx, serial, b.ID)
	}
	if err != nil {
		s.completeBatch(context.WithoutCancel(ctx), b.ID, lifecycle.BatchEvent{Kind: lifecycle.BatchSendFailed})
		return nil, instore.Errorf(instore.WP23, "The terminal is offline.")
	}
	return s.awaitClose(ctx, b.ID, until, ch, &release)
}

// awaitClose waits until the close id ended (or times it out at until)
// and answers it (batchAnswer).
func (s *Service) awaitClose(ctx context.Context, id string, until time.Time, ch <-chan struct{}, release *func()) (*instore.Batch, error) {
	got, err := awaitEnded(ctx, s, id, until, ch, release, func(ctx context.Context) (*instore.Batch, bool, error) {
		got, err := s.Store.Batch(ctx, id)
		return got, err == nil && got.State != instore.BatchPending, err
	}, func(ctx context.Context) {
		s.completeBatch(ctx, id, lifecycle.BatchEvent{Kind: lifecycle.BatchTimedOut})
	})
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	return s.batchAnswer(got)
}

// resumeClose answers a retry of a request that created the close id (its
// idempotency record is tied to it), after a crash or while the first
// still runs, as the first answered or would have: once the close ended.
// It creates and sends nothing.
func (s *Service) resumeClose(ctx context.Context, p *instore.Principal, id string) (*instore.Batch, error) {
	ch, release := s.changes.watch(id)
	defer func() { release() }()
	b, err := s.Batch(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if b.State != instore.BatchPending {
		return s.batchAnswer(b)
	}
	return s.awaitClose(ctx, id, lifecycle.BatchDue(b, s.ackTimeout()), ch, &release)
}

// batchAnswer is what CloseBatch answers for a close that ended: the batch,
// or the error of a close that failed.
func (s *Service) batchAnswer(b *instore.Batch) (*instore.Batch, error) {
	switch b.State {
	case instore.BatchClosed:
		return b, nil
	case instore.BatchFailed:
		if wp23, ok := s.batchErrorIDs()[instore.WP23]; ok && b.ErrorID != nil && *b.ErrorID == wp23 {
			return nil, instore.Errorf(instore.WP23, "The terminal is offline.")
		}
	}
	return nil, instore.Errorf(instore.WP25, "The terminal did not answer the close in time; GET /batch/%s shows the batch if it answers later.", b.ID)
}

// closeExpired ends a close its terminal did not answer in time.
func (s *Service) closeExpired(id string) {
	s.completeBatch(context.Background(), id, lifecycle.BatchEvent{Kind: lifecycle.BatchTimedOut})
}

// TerminalBatch applies a terminal's batch to the close it answers, once:
// a resent answer, or one after the time-out, is stored (or found stored)
// and the gateway confirms it.
func (s *Service) TerminalBatch(ctx context.Context, serial string, r instore.BatchReport) error {
	b, err := s.Store.Batch(ctx, r.BatchID)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if b.SerialNumber != serial {
		return fmt.Errorf("batch answered by a device it was not sent to")
	}
	return s.completeBatch(ctx, b.ID, lifecycle.BatchEvent{Kind: lifecycle.BatchReported, Report: r})
}

// completeBatch applies e (its time set here) to a close and writes what
// NextBatch decides by compare-and-set on its state, reading it again when
// another write came first. A terminal's answer is compared with the
// service's transactions of the window read here.
func (s *Service) completeBatch(ctx context.Context, id string, e lifecycle.BatchEvent) error {
	e.At = s.now()
	for range 3 {
		b, err := s.Store.Batch(ctx, id)
		if err != nil {
			s.log().Error("complete batch", "batchId", id, "error", err)
			return fmt.Errorf("batch: %w", err)
		}
		cur := *b
		if mutant.On(mutant.BatchAppliedTwice) && cur.State == instore.BatchClosed {
			cur.State = instore.BatchFailed // the once-check skipped: a resent batch applied again
		}
		if e.Kind == lifecycle.BatchReported && cur.State != instore.BatchClosed {
			if e.Service, err = s.batchItems(ctx, b); err != nil {
				return err
			}
		}
		next, st := lifecycle.NextBatch(cur, e, s.batchErrorIDs())
		if st.Refused != nil {
			return st.Refused
		}
		if !st.Changed {
			s.changes.publish(id)
			return nil
		}
		var evs []instore.OutboxEvent
		if st.Closed {
			evs = append(evs, instore.OutboxEvent{MerchantID: next.MerchantID, TerminalID: next.TerminalID, Type: instore.EventBatchClosed,
				At: e.At, Data: mustJSON(s.Metadata.BatchWire(&next))})
		}
		err = s.Store.UpdateBatch(ctx, &next, b.State, evs...)
		if errors.Is(err, instore.ErrConflict) {
			continue // another write came first: read it again
		}
		if err != nil {
			s.log().Error("complete batch", "batchId", id, "error", err)
			return fmt.Errorf("update batch: %w", err)
		}
		if len(evs) > 0 {
			s.eventsWritten()
		}
		if st.Ended {
			s.disarm(id)
		}
		s.log().Info("batch close ended", "batchId", id, "state", next.State, "matched", next.Matched, "differences", len(next.Differences))
		s.changes.publish(id)
		return nil
	}
	return fmt.Errorf("complete batch: %w (it kept changing)", instore.ErrConflict)
}

// batchItems is the service's record of b's window: its terminal ID's
// transactions InBatch.
func (s *Service) batchItems(ctx context.Context, b *instore.Batch) ([]instore.BatchItem, error) {
	ts, err := s.Store.TerminalTransactions(ctx, b.TerminalID, b.OpenedAt, b.ClosedAt)
	if err != nil {
		return nil, fmt.Errorf("terminal transactions: %w", err)
	}
	items := []instore.BatchItem{}
	for _, t := range ts {
		if instore.InBatch(t, b.OpenedAt, b.ClosedAt) {
			items = append(items, instore.BatchItemOf(t))
		}
	}
	return items, nil
}

// closeOnHello sends a device that said hello the PENDING close of its
// terminal ID again (the first send may have been lost with its session);
// the terminal answers a close it answered already with the same batch.
func (s *Service) closeOnHello(ctx context.Context, term *instore.Terminal, rows *terminalRows) {
	var id, sentTo string
	if rows != nil { // the hello read it
		id, sentTo = rows.batchID, rows.batchSerial
	} else if b, err := s.Store.PendingBatch(ctx, term.TerminalID); err == nil {
		id, sentTo = b.ID, b.SerialNumber
	}
	if id == "" || sentTo != term.SerialNumber {
		return
	}
	if bg, ok := s.Gateway.(instore.BatchGateway); ok {
		if err := bg.SendClose(ctx, term.SerialNumber, id); err != nil && !errors.Is(err, instore.ErrOffline) {
			s.log().Warn("resend close", "batchId", id, "error", err)
		}
	}
}

// recoverBatches arms the time-out of every PENDING close (Recover).
func (s *Service) recoverBatches(ctx context.Context) error {
	bs, err := s.Store.PendingBatches(ctx)
	if err != nil {
		return fmt.Errorf("pending batches: %w", err)
	}
	for _, b := range bs {
		s.arm(b.ID, lifecycle.BatchDue(b, s.ackTimeout()), s.closeExpired)
	}
	return nil
}

// sweepBatches ends FAILED every PENDING close past its time-out (Sweep):
// a timer lost in a crash or on a dead node.
func (s *Service) sweepBatches(ctx context.Context) {
	bs, err := s.Store.PendingBatches(ctx)
	if s.sweepFailed(ctx, "sweep: pending batches", err) {
		return
	}
	now := s.now()
	for _, b := range bs {
		if !now.Before(lifecycle.BatchDue(b, s.ackTimeout())) {
			_ = s.completeBatch(ctx, b.ID, lifecycle.BatchEvent{Kind: lifecycle.BatchTimedOut})
		}
	}
}

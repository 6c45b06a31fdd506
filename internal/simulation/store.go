package simulation

import (
	"context"
	"errors"
	"time"

	"github.com/instore-dev/instore"
)

// errCrashed is what a crashed node's store calls answer: the process is
// gone, and with it every call it had under way.
var errCrashed = errors.New("simulation: the node crashed")

// store is a node's view of the one store of the world (the real
// sqlstore on SQLite). Every call gives the baton back first (sched.yield),
// so that the seed picks which task's call comes next; a write may be the
// last thing a node does before it crashes, with the write lost (the
// crash came before it) or kept (after it, before its answer). Calls not
// listed here go straight to the store: the simulated flows do not make
// them while tasks run.
type store struct {
	instore.Store
	n *node
}

// enter yields and answers errCrashed on a node that is down.
func (s *store) enter(ctx context.Context) (context.Context, error) {
	s.n.w.sched.yield()
	if !s.n.up {
		return nil, errCrashed
	}
	// The request's context may be done (the simulated ECR never waits):
	// the store still runs its call, as it would for a client that left.
	return context.WithoutCancel(ctx), nil
}

// write runs a write, and perhaps the crash of the node around it.
func (s *store) write(ctx context.Context, f func(context.Context) error) error {
	ctx, err := s.enter(ctx)
	if err != nil {
		return err
	}
	if s.n.w.faults.crashBeforeWrite() {
		s.n.crash("before a write")
		return errCrashed
	}
	s.n.w.writes++
	if err := f(ctx); err != nil {
		return err
	}
	if s.n.w.faults.crashAfterWrite() {
		s.n.crash("after a write")
		return errCrashed
	}
	return nil
}

func read[T any](s *store, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, err := s.enter(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(ctx)
}

// readBy is read of a one-argument read.
func readBy[A, T any](s *store, ctx context.Context, f func(context.Context, A) (T, error), a A) (T, error) {
	return read(s, ctx, func(ctx context.Context) (T, error) { return f(ctx, a) })
}

func written[T any](s *store, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var v T
	err := s.write(ctx, func(ctx context.Context) (err error) { v, err = f(ctx); return err })
	return v, err
}

// Reads.

func (s *store) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	return readBy(s, ctx, s.Store.APIClient, id)
}

func (s *store) SubscriptionKeyByHash(ctx context.Context, hash []byte) (*instore.SubscriptionKey, error) {
	return read(s, ctx, func(ctx context.Context) (*instore.SubscriptionKey, error) {
		return s.Store.SubscriptionKeyByHash(ctx, hash)
	})
}

func (s *store) Customer(ctx context.Context, id string) (*instore.Customer, error) {
	return readBy(s, ctx, s.Store.Customer, id)
}

func (s *store) Device(ctx context.Context, serial string) (*instore.Device, error) {
	return readBy(s, ctx, s.Store.Device, serial)
}

func (s *store) DevicesBySerial(ctx context.Context, serials []string) ([]*instore.Device, error) {
	return readBy(s, ctx, s.Store.DevicesBySerial, serials)
}

func (s *store) TransactionEvents(ctx context.Context, ref string) ([]instore.TransactionEvent, error) {
	return read(s, ctx, func(ctx context.Context) ([]instore.TransactionEvent, error) {
		return s.Store.TransactionEvents(ctx, ref)
	})
}

func (s *store) Setting(ctx context.Context, name string) (string, error) {
	return readBy(s, ctx, s.Store.Setting, name)
}

func (s *store) Merchant(ctx context.Context, id string) (*instore.Merchant, error) {
	return readBy(s, ctx, s.Store.Merchant, id)
}

func (s *store) TerminalBySerial(ctx context.Context, serial string) (*instore.Terminal, error) {
	return readBy(s, ctx, s.Store.TerminalBySerial, serial)
}

func (s *store) DeviceSessions(ctx context.Context, serials []string) ([]*instore.DeviceSession, error) {
	return read(s, ctx, func(ctx context.Context) ([]*instore.DeviceSession, error) {
		return s.Store.DeviceSessions(ctx, serials)
	})
}

func (s *store) Terminal(ctx context.Context, id string) (*instore.Terminal, error) {
	return readBy(s, ctx, s.Store.Terminal, id)
}

func (s *store) TerminalWithOpenUpdate(ctx context.Context, id string) (*instore.Terminal, *instore.Update, error) {
	var u *instore.Update
	t, err := read(s, ctx, func(ctx context.Context) (t *instore.Terminal, err error) {
		t, u, err = s.Store.TerminalWithOpenUpdate(ctx, id)
		return t, err
	})
	return t, u, err
}

func (s *store) Transaction(ctx context.Context, id string) (*instore.Transaction, error) {
	return readBy(s, ctx, s.Store.Transaction, id)
}

func (s *store) ActiveTransaction(ctx context.Context, terminalID string) (*instore.Transaction, error) {
	return read(s, ctx, func(ctx context.Context) (*instore.Transaction, error) {
		return s.Store.ActiveTransaction(ctx, terminalID)
	})
}

func (s *store) PendingTransactions(ctx context.Context) ([]*instore.Transaction, error) {
	return read(s, ctx, s.Store.PendingTransactions)
}

func (s *store) UnconfirmedTransactions(ctx context.Context, dueBy time.Time) ([]*instore.Transaction, error) {
	return read(s, ctx, func(ctx context.Context) ([]*instore.Transaction, error) {
		return s.Store.UnconfirmedTransactions(ctx, dueBy)
	})
}

func (s *store) OpenPreAuths(ctx context.Context, dueBy time.Time) ([]*instore.Transaction, error) {
	return readBy(s, ctx, s.Store.OpenPreAuths, dueBy)
}

func (s *store) OnOriginal(ctx context.Context, id string) ([]*instore.Transaction, error) {
	return readBy(s, ctx, s.Store.OnOriginal, id)
}

func (s *store) ListTransactions(ctx context.Context, f instore.TransactionFilter) ([]*instore.Transaction, error) {
	return readBy(s, ctx, s.Store.ListTransactions, f)
}

func (s *store) IdempotencyRecord(ctx context.Context, merchantID, key string) (*instore.IdempotencyRecord, error) {
	return read(s, ctx, func(ctx context.Context) (*instore.IdempotencyRecord, error) {
		return s.Store.IdempotencyRecord(ctx, merchantID, key)
	})
}

func (s *store) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	return readBy(s, ctx, s.Store.OpenEffects, serial)
}

func (s *store) Effect(ctx context.Context, id string) (*instore.Effect, error) {
	return readBy(s, ctx, s.Store.Effect, id)
}

func (s *store) PrintJob(ctx context.Context, id string) (*instore.PrintJob, error) {
	return readBy(s, ctx, s.Store.PrintJob, id)
}

func (s *store) RunningPrintJobs(ctx context.Context) ([]*instore.PrintJob, error) {
	return read(s, ctx, s.Store.RunningPrintJobs)
}

func (s *store) OpenUpdate(ctx context.Context, terminalID string) (*instore.Update, error) {
	return readBy(s, ctx, s.Store.OpenUpdate, terminalID)
}

func (s *store) LatestUpdate(ctx context.Context, terminalID string) (*instore.Update, error) {
	return readBy(s, ctx, s.Store.LatestUpdate, terminalID)
}

func (s *store) Terminals(ctx context.Context, merchantID string) ([]*instore.Terminal, error) {
	return readBy(s, ctx, s.Store.Terminals, merchantID)
}

// Writes.

func (s *store) CreateTransaction(ctx context.Context, c *instore.Change) error {
	return s.write(ctx, func(ctx context.Context) error { return s.n.w.creation(c, s.Store.CreateTransaction(ctx, c)) })
}

func (s *store) Commit(ctx context.Context, c *instore.Change) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.Commit(ctx, c) })
}

func (s *store) CreateOnOriginal(ctx context.Context, c *instore.Change) error {
	return s.write(ctx, func(ctx context.Context) error { return s.n.w.creation(c, s.Store.CreateOnOriginal(ctx, c)) })
}

func (s *store) BeginIdempotency(ctx context.Context, rec *instore.IdempotencyRecord) (*instore.IdempotencyRecord, error) {
	return written(s, ctx, func(ctx context.Context) (*instore.IdempotencyRecord, error) {
		return s.Store.BeginIdempotency(ctx, rec)
	})
}

func (s *store) CompleteIdempotency(ctx context.Context, merchantID, key, attempt string, status int, header map[string]string, body []byte) error {
	return s.write(ctx, func(ctx context.Context) error {
		return s.Store.CompleteIdempotency(ctx, merchantID, key, attempt, status, header, body)
	})
}

func (s *store) DeleteIdempotency(ctx context.Context, merchantID, key, attempt string) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.DeleteIdempotency(ctx, merchantID, key, attempt) })
}

func (s *store) CreatePrintJob(ctx context.Context, p *instore.PrintJob) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.CreatePrintJob(ctx, p) })
}

func (s *store) CompletePrintJob(ctx context.Context, id string, statusID instore.PrintStatus, at time.Time, evs ...instore.OutboxEvent) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.CompletePrintJob(ctx, id, statusID, at, evs...) })
}

func (s *store) CreatePrintJobEffect(ctx context.Context, p *instore.PrintJob, e *instore.Effect) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.CreatePrintJobEffect(ctx, p, e) })
}

func (s *store) EndEffect(ctx context.Context, id, serial string, outcome instore.EffectOutcome, at time.Time) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.EndEffect(ctx, id, serial, outcome, at) })
}

func (s *store) EndEffectsOf(ctx context.Context, ref string, kind instore.EffectKind, outcome instore.EffectOutcome, at time.Time) (int, error) {
	return written(s, ctx, func(ctx context.Context) (int, error) { return s.Store.EndEffectsOf(ctx, ref, kind, outcome, at) })
}

func (s *store) ExpireEffects(ctx context.Context, before, at time.Time) ([]*instore.Effect, error) {
	return written(s, ctx, func(ctx context.Context) ([]*instore.Effect, error) { return s.Store.ExpireEffects(ctx, before, at) })
}

func (s *store) DevicesSeen(ctx context.Context, seen []instore.DeviceSeen) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.DevicesSeen(ctx, seen) })
}

func (s *store) SetLinkCode(ctx context.Context, serial, code string) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.SetLinkCode(ctx, serial, code) })
}

func (s *store) InitSetting(ctx context.Context, name, value string) (string, error) {
	return written(s, ctx, func(ctx context.Context) (string, error) { return s.Store.InitSetting(ctx, name, value) })
}

func (s *store) AppendEvents(ctx context.Context, evs []instore.OutboxEvent) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.AppendEvents(ctx, evs) })
}

func (s *store) SequenceEvents(ctx context.Context, limit int) (int, error) {
	return written(s, ctx, func(ctx context.Context) (int, error) { return s.Store.SequenceEvents(ctx, limit) })
}

// Calls the simulated flows reach only now and then (a listing of
// events, the expiry of idempotency records, links, updates, a change of
// a webhook endpoint), wrapped all the same so that none runs without its
// yield and a crashed node writes nothing.

func (s *store) ListEvents(ctx context.Context, f instore.EventFilter) ([]instore.StoredEvent, error) {
	return readBy(s, ctx, s.Store.ListEvents, f)
}

func (s *store) LastEventSeq(ctx context.Context, merchantID string) (int64, error) {
	return readBy(s, ctx, s.Store.LastEventSeq, merchantID)
}

func (s *store) OwedDevices(ctx context.Context) (map[string]time.Time, error) {
	return read(s, ctx, s.Store.OwedDevices)
}

func (s *store) OpenUpdates(ctx context.Context) ([]*instore.Update, error) {
	return read(s, ctx, s.Store.OpenUpdates)
}

func (s *store) ExpireIdempotency(ctx context.Context, before time.Time) (int, error) {
	return written(s, ctx, func(ctx context.Context) (int, error) { return s.Store.ExpireIdempotency(ctx, before) })
}

func (s *store) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	return written(s, ctx, func(ctx context.Context) (int, error) { return s.Store.ExpireEvents(ctx, before) })
}

func (s *store) PutSetting(ctx context.Context, name, value string) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.PutSetting(ctx, name, value) })
}

// LinkTerminal and UnlinkTerminal tell the world the link they committed
// (relink.go) inside the write: a crash right after it keeps it.
func (s *store) LinkTerminal(ctx context.Context, terminalID, serial string, at time.Time, evs ...instore.OutboxEvent) (string, string, error) {
	var prevTerminal string
	prevSerial, err := written(s, ctx, func(ctx context.Context) (prev string, err error) {
		prev, prevTerminal, err = s.Store.LinkTerminal(ctx, terminalID, serial, at, evs...)
		if err == nil {
			s.n.w.linked(terminalID, serial, prev, prevTerminal)
		}
		return prev, err
	})
	return prevSerial, prevTerminal, err
}

func (s *store) UnlinkTerminal(ctx context.Context, terminalID string, evs ...instore.OutboxEvent) (string, error) {
	return written(s, ctx, func(ctx context.Context) (string, error) {
		serial, err := s.Store.UnlinkTerminal(ctx, terminalID, evs...)
		if err == nil {
			s.n.w.unlinked(terminalID, serial)
		}
		return serial, err
	})
}

func (s *store) DeviceByLinkCode(ctx context.Context, code string) (*instore.Device, error) {
	return readBy(s, ctx, s.Store.DeviceByLinkCode, code)
}

func (s *store) SetUpdateStatus(ctx context.Context, u *instore.Update, evs []instore.OutboxEvent, from ...instore.UpdateStatus) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.SetUpdateStatus(ctx, u, evs, from...) })
}

func (s *store) MarkUpdateDelivered(ctx context.Context, id string, at, staleBefore time.Time) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.MarkUpdateDelivered(ctx, id, at, staleBefore) })
}

func (s *store) ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, q instore.ClaimQuota) ([]*instore.DueDelivery, error) {
	return written(s, ctx, func(ctx context.Context) ([]*instore.DueDelivery, error) {
		return s.Store.ClaimDeliveries(ctx, now, leaseUntil, q)
	})
}

func (s *store) RecordAttempts(ctx context.Context, rs []instore.AttemptRecord) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.RecordAttempts(ctx, rs) })
}

func (s *store) ChangeWebhook(ctx context.Context, merchantID, id string, change func(*instore.Webhook) error) (*instore.Webhook, error) {
	return written(s, ctx, func(ctx context.Context) (*instore.Webhook, error) {
		return s.Store.ChangeWebhook(ctx, merchantID, id, change)
	})
}

// Closes (close.go).

func (s *store) CreateBatch(ctx context.Context, b *instore.Batch, claim *instore.IdempotencyClaim) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.CreateBatch(ctx, b, claim) })
}

func (s *store) UpdateBatch(ctx context.Context, b *instore.Batch, from instore.BatchState, evs ...instore.OutboxEvent) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.UpdateBatch(ctx, b, from, evs...) })
}

func (s *store) Batch(ctx context.Context, id string) (*instore.Batch, error) {
	return readBy(s, ctx, s.Store.Batch, id)
}

func (s *store) PendingBatch(ctx context.Context, terminalID string) (*instore.Batch, error) {
	return readBy(s, ctx, s.Store.PendingBatch, terminalID)
}

func (s *store) LastClosedBatch(ctx context.Context, terminalID string) (*instore.Batch, error) {
	return readBy(s, ctx, s.Store.LastClosedBatch, terminalID)
}

func (s *store) PendingBatches(ctx context.Context) ([]*instore.Batch, error) {
	return read(s, ctx, s.Store.PendingBatches)
}

func (s *store) TerminalTransactions(ctx context.Context, terminalID string, from, to time.Time) ([]*instore.Transaction, error) {
	return read(s, ctx, func(ctx context.Context) ([]*instore.Transaction, error) {
		return s.Store.TerminalTransactions(ctx, terminalID, from, to)
	})
}

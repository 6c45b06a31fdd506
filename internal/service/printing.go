package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// DefaultPrintTimeout is how long a print job waits for the terminal.
const DefaultPrintTimeout = 30 * time.Second

func (s *Service) printTimeout() time.Duration {
	if s.PrintTimeout > 0 {
		return s.PrintTimeout
	}
	return DefaultPrintTimeout
}

// Print prints lines, or a stored transaction's customer or merchant
// receipt, on a terminal and answers with the job in its final print
// status: BUSY at once while the terminal is in a transaction (a print
// never disturbs one), TIMEOUT when the terminal does not answer within the
// print timeout, else what the terminal reports. Errors, in order:
// validation, WP03, WP16, WP04 (transaction), validation (no receipt),
// WP01, WP23.
func (s *Service) Print(ctx context.Context, p *instore.Principal, req *instore.PrintRequest) (*instore.PrintJob, error) {
	term, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	job := &instore.PrintJob{ID: s.NewPrintID(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, Lines: req.Lines, CreatedAt: s.now()}
	if req.OnlineAPIRefID != "" {
		t, err := s.ownTransaction(ctx, p, req.OnlineAPIRefID)
		if err != nil {
			return nil, err
		}
		var lines []string
		if t.Result != nil {
			lines = t.Result.Receipt.Customer
			if req.Copy == instore.CopyMerchant {
				lines = t.Result.Receipt.Merchant
			}
		}
		if len(lines) == 0 {
			return nil, &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.",
				Fields: []instore.FieldError{{Field: "/onlineAPIRefId", Message: "the transaction has no " + req.Copy + " receipt"}}}
		}
		job.TransactionID, job.Copy, job.Lines = t.ID, req.Copy, lines
	}
	serial, active, err := s.readiness(ctx, term, needOnline)
	if err != nil {
		return nil, err
	}
	created, st := lifecycle.NextPrint(lifecycle.PrintNew, *job, lifecycle.PrintEvent{Kind: lifecycle.PrintRequested, At: job.CreatedAt, Busy: active != nil})
	if !st.Send {
		if err := s.Store.CreatePrintJob(ctx, &created); err != nil {
			return nil, fmt.Errorf("create print job: %w", err)
		}
		s.changes.publish(created.ID)
		return &created, nil
	}
	return s.runPrint(ctx, serial, &created)
}

// runPrint stores a running job with the effect that sends it, sends it
// and waits for its final status up to the print timeout, woken by the
// terminal's answer. The job does not depend on the wait: a timer, re-armed
// by Recover after a restart and backed by the sweep, ends it TIMEOUT, and
// until then it is sent again after every hello of the device.
func (s *Service) runPrint(ctx context.Context, serial string, job *instore.PrintJob) (*instore.PrintJob, error) {
	e := s.newEffect(instore.EffectPrint, serial, job.ID, "")
	ch, release := s.changes.watch(job.ID)
	defer func() { release() }()
	if err := s.Store.CreatePrintJobEffect(ctx, job, e); err != nil {
		return nil, fmt.Errorf("create print job: %w", err)
	}
	until := s.startPrint(context.WithoutCancel(ctx), job, e)
	return awaitEnded(ctx, s, job.ID, until, ch, &release, func(ctx context.Context) (*instore.PrintJob, bool, error) {
		j, err := s.Store.PrintJob(ctx, job.ID)
		return j, err == nil && j.StatusID != nil, err
	}, func(ctx context.Context) {
		s.completePrint(ctx, job.ID, lifecycle.PrintEvent{Kind: lifecycle.PrintTimedOut})
	})
}

// startPrint arms the time-out of a stored running job and sends it with
// its effect e; it returns when the job times out. A device offline now
// gets it after its next hello, within the time-out; a job that cannot be
// sent at all (a message the gateway refuses) ends ERROR.
func (s *Service) startPrint(ctx context.Context, job *instore.PrintJob, e *instore.Effect) time.Time {
	until := lifecycle.PrintDue(job, s.printTimeout())
	s.arm(job.ID, until, s.printExpired)
	if err := s.deliver(ctx, e, job.Lines); err != nil && !errors.Is(err, instore.ErrOffline) {
		s.completePrint(ctx, job.ID, lifecycle.PrintEvent{Kind: lifecycle.PrintSendFailed})
	}
	return until
}

// printExpired ends a job the terminal did not answer within the print
// timeout.
func (s *Service) printExpired(id string) {
	s.completePrint(context.Background(), id, lifecycle.PrintEvent{Kind: lifecycle.PrintTimedOut})
}

// completePrint applies e (its time set here) to a job: the final status
// NextPrint decides is set unless the job has one (its print is then owed
// no longer: CompletePrintJob).
func (s *Service) completePrint(ctx context.Context, id string, e lifecycle.PrintEvent) {
	s.disarm(id)
	at := s.now()
	e.At = at
	// A job that cannot be read is completed all the same (the store's
	// compare-and-set decides), without its event.
	from, job := lifecycle.PrintRunning, &instore.PrintJob{ID: id}
	j, rerr := s.Store.PrintJob(ctx, id)
	if rerr == nil {
		from, job = lifecycle.PrintStateOf(j), j
	}
	done, st := lifecycle.NextPrint(from, *job, e)
	if !st.Changed {
		s.changes.publish(id) // it has its final status already
		return
	}
	statusID := *done.StatusID
	var evs []instore.OutboxEvent
	if rerr == nil {
		evs = append(evs, instore.OutboxEvent{MerchantID: done.MerchantID, TerminalID: done.TerminalID, Type: instore.EventPrintFinal,
			At: at, Data: mustJSON(s.Metadata.PrintJobWire(&done))})
	}
	err := s.Store.CompletePrintJob(ctx, id, statusID, at, evs...)
	if err == nil {
		s.eventsWritten()
	}
	if err != nil && !errors.Is(err, instore.ErrConflict) {
		s.log().Error("complete print job", "printId", id, "error", err)
	}
	if err == nil && statusID == instore.PrintTimeout {
		s.log().Info("print job timed out", "printId", id)
	}
	s.changes.publish(id)
}

// receiptJob is the print job of a transaction's customer copy for
// printReceipt, and the effect that sends it to the device serial; the
// result that brings the receipt stores both with it.
func (s *Service) receiptJob(t *instore.Transaction, serial string, lines []string) (*instore.PrintJob, *instore.Effect) {
	job := &instore.PrintJob{ID: s.NewPrintID(), MerchantID: t.MerchantID, TerminalID: t.TerminalID, TransactionID: t.ID,
		Copy: instore.CopyCustomer, Lines: lines, CreatedAt: s.now()}
	return job, s.newEffect(instore.EffectPrint, serial, job.ID, "")
}

// PrintJob returns one of the merchant's print jobs (not-found otherwise).
func (s *Service) PrintJob(ctx context.Context, p *instore.Principal, id string) (*instore.PrintJob, error) {
	return merchantsByRef(ctx, s, p, id, s.Store.PrintJob, func(j *instore.PrintJob) string { return j.MerchantID },
		"No print job with this printId.", "print job")
}

// TerminalPrintResult records the final status a terminal reported for a
// print job sent to it.
func (s *Service) TerminalPrintResult(ctx context.Context, serial, printID string, statusID instore.PrintStatus) error {
	if _, ok := s.Metadata.PrintStatus(statusID); !ok {
		return fmt.Errorf("print status %d is not in the printStatuses list", statusID)
	}
	j, err := s.Store.PrintJob(ctx, printID)
	if err != nil {
		return fmt.Errorf("print job: %w", err)
	}
	if _, err := s.terminalOf(ctx, serial, j.TerminalID, "print job"); err != nil {
		return err
	}
	s.completePrint(ctx, printID, lifecycle.PrintEvent{Kind: lifecycle.PrintReported, Status: statusID})
	return nil
}

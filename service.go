package instore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"
)

// Service runs the Online API's operations on terminals and transactions
// and handles what terminals report. Rules, validation order, error codes
// and state changes live here, once; HTTP handlers and the gateway only
// translate.
type Service struct {
	Store    Store
	Gateway  Gateway
	Metadata *Metadata
	Logger   *slog.Logger
	// NewRef returns a new onlineAPIRefId (unique, time-sortable).
	NewRef func() string
	// Now is the clock.
	Now func() time.Time
	// AckTimeout is how long a purchase waits for the terminal's ack (WP25).
	AckTimeout time.Duration
	// Deadline is how long after the ack a transaction may stay PENDING (WP36).
	Deadline time.Duration
	// PrintTimeout is how long a print job waits for the terminal (TIMEOUT).
	PrintTimeout time.Duration
	// NewPrintID returns a new printId.
	NewPrintID func() string
	// EffectTTL bounds how long a message owed to a terminal (a cancel, a
	// reversal, a print: effect.go) is kept owed; DefaultEffectTTL when 0.
	EffectTTL time.Duration
	// Observer, if set, is told of every transaction that ends
	// (observe.go).
	Observer Observer

	changes changes
	running running
	// updateWaits holds the terminal IDs whose SCHEDULED update this node
	// saw waiting for a transaction to end (terminalIdle).
	updateWaits sync.Map
	timersMu    sync.Mutex
	timers      map[string]*time.Timer
	closed      bool
}

// Defaults of the Service's time-outs.
const (
	DefaultAckTimeout = 10 * time.Second
	DefaultDeadline   = 120 * time.Second
)

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

func (s *Service) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Service) errorID(code string) *int {
	c, ok := s.Metadata.ErrorCode(code)
	if !ok {
		return nil
	}
	id := c.ID
	return &id
}

// Close stops the Service's timers.
func (s *Service) Close() {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
}

// merchant loads the principal's merchant and answers WP03 when inactive.
func (s *Service) merchant(ctx context.Context, p *Principal) (*Merchant, error) {
	m := p.Merchant
	if m == nil || m.ID != p.MerchantID {
		var err error
		if m, err = s.Store.Merchant(ctx, p.MerchantID); err != nil {
			return nil, fmt.Errorf("merchant: %w", err)
		}
	}
	if !m.Active {
		return nil, Errorf(WP03, "The merchant is inactive.")
	}
	return m, nil
}

// terminalOp runs the checks an operation on one terminal ID starts with,
// in the contract's order: the request's own validation, WP03, WP16.
func (s *Service) terminalOp(ctx context.Context, p *Principal, req interface{ Validate() error }, terminalID string) (*Terminal, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	return s.ownTerminal(ctx, p, terminalID)
}

// ActiveMerchant returns the principal's merchant; WP03 when inactive.
func (s *Service) ActiveMerchant(ctx context.Context, p *Principal) (*Merchant, error) {
	return s.merchant(ctx, p)
}

// ownTerminal loads a terminal ID of the merchant; WP16 when it is not one
// of the merchant's, whether it exists elsewhere or not.
func (s *Service) ownTerminal(ctx context.Context, p *Principal, terminalID string) (*Terminal, error) {
	t, err := s.Store.Terminal(ctx, terminalID)
	return ownedBy(p, t, err)
}

// ownTerminalWithUpdate is ownTerminal that also returns the terminal's
// unfinished software update (nil if none), read with it.
func (s *Service) ownTerminalWithUpdate(ctx context.Context, p *Principal, terminalID string) (*Terminal, *Update, error) {
	t, u, err := s.Store.TerminalWithOpenUpdate(ctx, terminalID)
	if t, err = ownedBy(p, t, err); err != nil {
		return nil, nil, err
	}
	return t, u, nil
}

// ownedBy is the terminal of a read (t, err) if it is the principal's
// merchant's; WP16 if there is none or it is another's.
func ownedBy(p *Principal, t *Terminal, err error) (*Terminal, error) {
	if errors.Is(err, ErrNotFound) || err == nil && t.MerchantID != p.MerchantID {
		return nil, Errorf(WP16, "The terminal ID is not one of this merchant's.")
	} else if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return t, nil
}

// view builds what the Online API shows of a terminal ID.
func (s *Service) view(ctx context.Context, t *Terminal) (*TerminalView, error) {
	v := &TerminalView{TerminalID: t.TerminalID, Linked: t.Linked(), LinkedAt: t.LinkedAt}
	if t.Linked() {
		d, err := s.Store.Device(ctx, t.SerialNumber)
		if err != nil {
			return nil, fmt.Errorf("device: %w", err)
		}
		serial, model, version := d.SerialNumber, d.Model, d.SoftwareVersion
		v.SerialNumber, v.Model, v.SoftwareVersion, v.LastSeenAt = &serial, &model, &version, d.LastSeenAt
		v.Online = s.Gateway.Online(d.SerialNumber)
	}
	active, err := s.Store.ActiveTransaction(ctx, t.TerminalID)
	switch {
	case err == nil:
		v.Busy, v.CurrentRefID = true, &active.ID
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("active transaction: %w", err)
	}
	u, err := s.Store.OpenUpdate(ctx, t.TerminalID)
	switch {
	case err == nil:
		if s.installs(u) {
			v.Busy, v.Updating = true, true
		}
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("open update: %w", err)
	}
	return v, nil
}

// Terminals lists the merchant's terminal IDs.
func (s *Service) Terminals(ctx context.Context, p *Principal) ([]*TerminalView, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	ts, err := s.Store.Terminals(ctx, p.MerchantID)
	if err != nil {
		return nil, fmt.Errorf("terminals: %w", err)
	}
	out := make([]*TerminalView, 0, len(ts))
	for _, t := range ts {
		v, err := s.view(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Terminal shows one of the merchant's terminal IDs. Errors: WP03, WP16.
func (s *Service) Terminal(ctx context.Context, p *Principal, terminalID string) (*TerminalView, error) {
	if !ValidTerminalID(terminalID) {
		return nil, &Error{Code: EValidation, Detail: "The request is not valid; see errors.", Fields: []FieldError{{Field: "terminalId", Message: "must be 8 digits"}}}
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	t, err := s.ownTerminal(ctx, p, terminalID)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, t)
}

// OwnTerminal returns one of the merchant's terminal IDs (WP03, WP16), for
// surfaces that act on a terminal outside the transaction life (sandbox).
func (s *Service) OwnTerminal(ctx context.Context, p *Principal, terminalID string) (*Terminal, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	return s.ownTerminal(ctx, p, terminalID)
}

// Link binds the device showing req.LinkCode to req.TerminalID. Relinking
// replaces the old binding on both sides: the terminal ID's previous device
// shows a new link code, the device's previous terminal ID is unlinked.
// Errors, in order: validation, WP03, WP16, link-code-invalid, WP09.
func (s *Service) Link(ctx context.Context, p *Principal, req *LinkRequest) (*TerminalView, error) {
	t, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	d, err := s.Store.DeviceByLinkCode(ctx, req.LinkCode)
	if errors.Is(err, ErrNotFound) || err == nil && d.CustomerID != "" && d.CustomerID != t.CustomerID {
		return nil, Errorf(ELinkCodeInvalid, "No terminal shows this link code.")
	} else if err != nil {
		return nil, fmt.Errorf("device by link code: %w", err)
	}
	prevSerial, _, err := s.Store.LinkTerminal(ctx, t.TerminalID, d.SerialNumber, s.now())
	if errors.Is(err, ErrConflict) {
		return nil, s.busy(ctx, t.TerminalID)
	} else if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	if err := s.Gateway.SendLinked(ctx, d.SerialNumber, t.TerminalID); err != nil && !errors.Is(err, ErrOffline) {
		s.log().Warn("send linked", "serialNumber", d.SerialNumber, "error", err)
	}
	if prevSerial != "" && prevSerial != d.SerialNumber {
		s.showLinkCode(ctx, prevSerial)
	}
	t, err = s.Store.Terminal(ctx, t.TerminalID)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return s.view(ctx, t)
}

// Unlink removes the binding of a terminal ID; its device shows a new link
// code. Errors, in order: validation, WP03, WP16, WP02, WP09.
func (s *Service) Unlink(ctx context.Context, p *Principal, req *TerminalRequest) (*TerminalView, error) {
	t, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	serial, err := s.Store.UnlinkTerminal(ctx, t.TerminalID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, Errorf(WP02, "The terminal ID is not linked to a terminal.")
	case errors.Is(err, ErrConflict):
		return nil, s.busy(ctx, t.TerminalID)
	case err != nil:
		return nil, fmt.Errorf("unlink: %w", err)
	}
	s.showLinkCode(ctx, serial)
	t, err = s.Store.Terminal(ctx, t.TerminalID)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return s.view(ctx, t)
}

// busy is WP09 naming the transaction that occupies the terminal.
func (s *Service) busy(ctx context.Context, terminalID string) error {
	a, err := s.Store.ActiveTransaction(ctx, terminalID)
	if err != nil {
		a = nil
	}
	if e := wp30(a, s.Gateway); e != nil {
		return e
	}
	e := Errorf(WP09, "The terminal is processing a transaction.")
	e.Reason = ReasonTransaction
	if a != nil {
		e.OnlineAPIRefID = a.ID
	}
	return e
}

// wp30 is the WP30 error when active (nil: none) was acknowledged by a
// device that has since gone offline, and nil otherwise.
func wp30(active *Transaction, g Gateway) *Error {
	if active == nil || !active.Acknowledged() || g.Online(active.SerialNumber) {
		return nil
	}
	e := Errorf(WP30, "The terminal acknowledged the previous transaction, lost its connection and has not sent its result yet.")
	e.OnlineAPIRefID = active.ID
	return e
}

// showLinkCode gives an unlinked device a fresh link code and tells it.
func (s *Service) showLinkCode(ctx context.Context, serial string) {
	code, err := s.assignLinkCode(ctx, serial)
	if err != nil {
		s.log().Error("assign link code", "serialNumber", serial, "error", err)
		return
	}
	if err := s.Gateway.SendLinkCode(ctx, serial, code); err != nil && !errors.Is(err, ErrOffline) {
		s.log().Warn("send link code", "serialNumber", serial, "error", err)
	}
}

// assignLinkCode stores a new random 6-digit code unique among devices.
func (s *Service) assignLinkCode(ctx context.Context, serial string) (string, error) {
	for range 20 {
		n, err := rand.Int(rand.Reader, big.NewInt(1000000))
		if err != nil {
			return "", err
		}
		code := fmt.Sprintf("%06d", n.Int64())
		err = s.Store.SetLinkCode(ctx, serial, code)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return code, err
	}
	return "", errors.New("no free link code after 20 tries")
}

// Purchase creates a purchase on a terminal and answers once the terminal
// acknowledged it. Errors, in the contract's order: validation, WP03, WP22,
// WP16, WP01, WP30, WP23, WP09; WP25 when no ack came in time.
func (s *Service) Purchase(ctx context.Context, p *Principal, req *PurchaseRequest) (*Transaction, error) {
	if c := idempotencyOf(ctx); c != nil && c.Resume != "" {
		return s.resume(ctx, p, c.Resume)
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if req.PaymentMethodID != nil {
		if _, ok := s.Metadata.PaymentMethod(*req.PaymentMethodID); !ok {
			return nil, Errorf(WP22, "paymentMethodId %d is not in the paymentMethods list.", *req.PaymentMethodID)
		}
	}
	term, update, err := s.ownTerminalWithUpdate(ctx, p, req.TerminalID)
	if err != nil {
		return nil, err
	}
	serial, err := s.readyToCreate(ctx, term, update)
	if err != nil {
		return nil, err
	}
	t := &Transaction{
		ID: s.NewRef(), MerchantID: p.MerchantID, TerminalID: term.TerminalID, SerialNumber: serial,
		Type: TypePurchase, Amount: *req.Amount, VATAmount: req.VATAmount, Currency: req.Currency,
		PaymentMethodID: req.PaymentMethodID, ECRReference: req.ECRReference, PrintReceipt: req.PrintReceipt,
		StatusID: StatusPending, Progress: ProgressSent, CreatedAt: s.now(),
	}
	if req.CashbackAmount != nil {
		t.CashbackAmount = *req.CashbackAmount
	}
	return s.start(ctx, t, s.Store.CreateTransaction, func(ctx context.Context) error {
		return s.Gateway.SendPayment(ctx, serial, t)
	})
}

// ready runs the checks between WP16 and the creation of a transaction:
// WP01, WP30, WP23, WP09. It returns the serial number of the linked device.
func (s *Service) ready(ctx context.Context, term *Terminal) (string, error) {
	if !term.Linked() {
		return "", Errorf(WP01, "The terminal ID has no linked terminal.")
	}
	active, err := s.Store.ActiveTransaction(ctx, term.TerminalID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("active transaction: %w", err)
	}
	if e := wp30(active, s.Gateway); e != nil {
		return "", e
	}
	if !s.Gateway.Ready(term.SerialNumber) {
		return "", Errorf(WP23, "The terminal is offline.")
	}
	if active != nil {
		e := Errorf(WP09, "The terminal is processing a transaction.")
		e.OnlineAPIRefID, e.Reason = active.ID, ReasonTransaction
		return "", e
	}
	// Access API: a terminal installing a software update is busy (WP09).
	if err := s.installing(ctx, term.TerminalID); err != nil {
		return "", err
	}
	return term.SerialNumber, nil
}

// readyToCreate is ready for an operation whose creation is its next step
// and has no check of its own between (a purchase): with the terminal
// online, a running transaction is found by the creation itself, which the
// store refuses while the terminal ID has one (ErrConflict; busy then tells
// WP30 from WP09), so the check costs no read of its own. The answers are
// ready's. u is the terminal's unfinished software update (nil if none),
// read with the terminal.
func (s *Service) readyToCreate(ctx context.Context, term *Terminal, u *Update) (string, error) {
	if !term.Linked() || !s.Gateway.Ready(term.SerialNumber) {
		return s.ready(ctx, term)
	}
	if err := s.installingWith(term.TerminalID, u); err != nil {
		return "", err
	}
	return term.SerialNumber, nil
}

// start stores a new PENDING transaction with create, sends it to its
// terminal with send and waits for the ack (or a final status) up to the
// ack timeout. With an idempotency record in ctx, the record gets the
// transaction in the creation's database transaction.
func (s *Service) start(ctx context.Context, t *Transaction, create func(context.Context, *Transaction) error, send func(context.Context) error) (*Transaction, error) {
	// Until the ack, the deadline the terminal is told is the latest the
	// result can be awaited; the ack sets the real one.
	t.DeadlineAt = ptr(t.CreatedAt.Add(s.ackTimeout() + s.deadline()))
	t.Idempotency = idempotencyOf(ctx)
	t.Events = []TransactionEvent{{Version: 1, At: t.CreatedAt, Kind: EventCreated, Actor: ActorECR,
		StatusAfter: s.rules().Status(t.StatusID), Detail: "the ECR's request; command sent to the terminal"}}
	// Subscribed before anything can change it: the wait for the ack starts
	// from the created state without reading it back.
	w, gen, release := s.changes.subscribe(t.ID)
	defer release()
	var rule *Error
	switch err := create(ctx, t); {
	case err == nil:
	case errors.As(err, &rule):
		return nil, rule
	case errors.Is(err, ErrConflict):
		return nil, s.busy(ctx, t.TerminalID)
	case errors.Is(err, ErrIdempotencyLost):
		return nil, Errorf(EConflict, "Another request with this Idempotency-Key took it over; retry with the same key for its answer.")
	default:
		return nil, fmt.Errorf("create transaction: %w", err)
	}
	t.Idempotency, t.Events = nil, nil
	created := *t
	s.running.put(&created)
	s.changes.publishState(t.ID, &created)
	s.arm(t.ID, t.CreatedAt.Add(s.ackTimeout()), s.ackExpired)
	if err := send(ctx); err != nil {
		// The session went away between the check and the send: the command
		// most likely never left. Record it as a technical error and say so;
		// in case its frame reached the terminal all the same, the terminal
		// is owed a cancel ACK_TIMEOUT (it drops a command it never
		// acknowledged, and ignores a ref it does not know), sent after its
		// next hello.
		if _, _, err := s.apply(context.WithoutCancel(ctx), t.ID, nil, Event{Kind: EventSendFailed, At: s.now()}); err != nil {
			s.log().Error("end a transaction whose command was not sent", "ref", t.ID, "error", err)
		}
		return nil, s.wp23(t.ID)
	}
	return s.awaitAck(ctx, &created, w, gen)
}

// resume answers a retry of a request that created the transaction ref
// (its idempotency record is tied to it), after a crash or while the first
// still runs, as the first answered or would have: once the terminal
// acknowledged it or it ended, with the problem the first got (WP25,
// WP23). It creates and sends nothing.
func (s *Service) resume(ctx context.Context, p *Principal, ref string) (*Transaction, error) {
	w, gen, release := s.changes.subscribe(ref)
	defer release()
	t := s.running.get(ref)
	if t == nil || t.MerchantID != p.MerchantID {
		var err error
		if t, err = s.ownTransaction(ctx, p, ref); err != nil {
			return nil, err
		}
	}
	return s.awaitAck(ctx, t, w, gen)
}

// awaitAck waits until the transaction t (its state read or created after
// w was subscribed at generation gen) is acknowledged or final, at most
// until its ack time-out has passed, and answers as a creating request
// does: the transaction, or WP25 / WP23 when it ended unacknowledged for
// that reason.
func (s *Service) awaitAck(ctx context.Context, t *Transaction, w *watch, gen uint64) (*Transaction, error) {
	ackBy := t.CreatedAt.Add(s.ackTimeout())
	got, err := s.waitOn(ctx, t.ID, w, gen, t, ackBy.Add(time.Second), func(t *Transaction) bool { return t.Acknowledged() || t.Final() })
	if err != nil {
		return nil, err
	}
	if !got.Acknowledged() && !got.Final() && !s.Now().Before(ackBy) {
		// Its ack time passed and its timer has not ended it (late, or not
		// armed yet after a start): end it now, so that the answer is the
		// WP25 the first request got or would have got, never a 201 for a
		// sale that is about to fail.
		s.ackExpired(got.ID)
		if got, err = s.Store.Transaction(context.WithoutCancel(ctx), got.ID); err != nil {
			return nil, fmt.Errorf("transaction: %w", err)
		}
	}
	if !got.Acknowledged() && got.Final() && got.ErrorID != nil {
		switch *got.ErrorID {
		case *s.errorID(WP25):
			e := Errorf(WP25, "The terminal did not acknowledge the request in time.")
			e.OnlineAPIRefID = got.ID
			return nil, e
		case *s.errorID(WP23):
			return nil, s.wp23(got.ID)
		}
	}
	return got, nil
}

// wp23 is the problem of a transaction whose command never reached its
// terminal.
func (s *Service) wp23(ref string) error {
	e := Errorf(WP23, "The terminal went offline before the request reached it.")
	e.OnlineAPIRefID = ref
	return e
}

func (s *Service) ackTimeout() time.Duration {
	if s.AckTimeout > 0 {
		return s.AckTimeout
	}
	return DefaultAckTimeout
}

func (s *Service) deadline() time.Duration {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return DefaultDeadline
}

func ptr[T any](v T) *T { return &v }

// Transaction returns one of the merchant's transactions. With wait > 0 it
// holds the answer while the transaction is PENDING, until it is final or
// wait passes; with afterVersion as well, also until its version is past
// afterVersion (any change: a progress stage, the acknowledgement), which
// is how a till follows the terminal's progress. Errors: WP03, WP04.
func (s *Service) Transaction(ctx context.Context, p *Principal, ref string, wait time.Duration, afterVersion *int64) (*Transaction, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !ValidRef(ref) {
		return nil, Errorf(WP04, "No transaction with this onlineAPIRefId.")
	}
	var w *watch
	var gen uint64
	if wait > 0 {
		// Subscribed before the read, so that the read serves the wait too.
		var release func()
		w, gen, release = s.changes.subscribe(ref)
		defer release()
	}
	// A running transaction is read from running (this node commits every
	// change of it, and puts each there before answering anyone), a
	// finished one from the store.
	t := s.running.get(ref)
	if t == nil || t.MerchantID != p.MerchantID {
		var err error
		if t, err = s.ownTransaction(ctx, p, ref); err != nil {
			return nil, err
		}
	}
	if wait <= 0 || t.Final() {
		return t, nil
	}
	cond := (*Transaction).Final
	if afterVersion != nil {
		after := *afterVersion
		cond = func(t *Transaction) bool { return t.Version > after || t.Final() }
	}
	return s.waitOn(ctx, ref, w, gen, t, s.Now().Add(wait), cond)
}

// waitOn waits until cond holds for the transaction ref, the deadline
// passes or ctx ends, and returns its latest state in every case but a
// store error. t is its state read (or created) after w was subscribed at
// generation gen, so no change is missed. It is woken by the changes
// themselves (no polling), and a change published with its state costs no
// read.
func (s *Service) waitOn(ctx context.Context, ref string, w *watch, gen uint64, t *Transaction, until time.Time, cond func(*Transaction) bool) (*Transaction, error) {
	var err error
	// Durations are taken against the service's clock, which tests may set.
	timer := time.NewTimer(until.Sub(s.Now()))
	defer timer.Stop()
	for {
		if cond(t) {
			return t, nil
		}
		newGen, latest, changed, ch := s.changes.since(w, gen)
		if changed {
			gen = newGen
			switch {
			case latest == nil:
				if t, err = s.Store.Transaction(ctx, ref); err != nil {
					return nil, fmt.Errorf("transaction: %w", err)
				}
			case latest.Version > t.Version:
				cp := *latest
				t = &cp
			}
			continue
		}
		select {
		case <-ch:
		case <-timer.C:
			return t, nil
		case <-ctx.Done():
			return t, nil
		}
	}
}

// Cancel asks the terminal to abort its running transaction (the one
// req names, if it names one). The transaction ends ABORTED_BY_CASHIER
// with WP37, or in the final status the terminal reached first. Errors, in
// order: validation, WP03, WP16, WP01, WP30, WP23, WP18.
func (s *Service) Cancel(ctx context.Context, p *Principal, req *CancelRequest) (*Transaction, error) {
	term, err := s.terminalOp(ctx, p, req, req.TerminalID)
	if err != nil {
		return nil, err
	}
	if !term.Linked() {
		return nil, Errorf(WP01, "The terminal ID has no linked terminal.")
	}
	active, err := s.Store.ActiveTransaction(ctx, term.TerminalID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("active transaction: %w", err)
	}
	if active != nil && active.Acknowledged() && !s.Gateway.Online(active.SerialNumber) {
		e := Errorf(WP30, "The terminal acknowledged the transaction, lost its connection and has not sent its result yet.")
		e.OnlineAPIRefID = active.ID
		return nil, e
	}
	if !s.Gateway.Online(term.SerialNumber) {
		return nil, Errorf(WP23, "The terminal is offline.")
	}
	if active == nil {
		return nil, Errorf(WP18, "No transaction is running on this terminal.")
	}
	if req.OnlineAPIRefID != "" && req.OnlineAPIRefID != active.ID {
		return nil, Errorf(WP18, "The transaction onlineAPIRefId names is not the one running on this terminal; nothing was cancelled.")
	}
	// The request and the cancel it owes the terminal are stored together:
	// a cancel that cannot be sent now is sent after the device's next
	// hello (effect.go). A transaction the terminal ended first is
	// answered as it is.
	t, _, err := s.apply(ctx, active.ID, nil, Event{Kind: EventCancelRequested, At: s.now()})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// finishWith applies change to the stored transaction with compare-and-set,
// writing with update (write(&o) for a change with effects, UpdateProgress
// for a progress stage), re-reading and retrying when another writer
// moved it; change returns false to leave it as it is. known is a state of
// the transaction the caller just read (nil: read it), which it does not
// keep: change is applied to a copy. It publishes the change. Only apply
// (apply.go) calls it: every change of a transaction is a step of Next.
func (s *Service) finishWith(ctx context.Context, ref string, known *Transaction, update func(context.Context, *Transaction, int64) error, change func(*Transaction) bool) (*Transaction, error) {
	for {
		var t *Transaction
		if known != nil {
			cp := *known
			t, known = &cp, nil
		} else {
			var err error
			if t, err = s.Store.Transaction(ctx, ref); err != nil {
				return nil, fmt.Errorf("transaction: %w", err)
			}
		}
		from, wasFinal := t.Version, t.Final()
		if !change(t) {
			return t, nil
		}
		err := update(ctx, t, from)
		if errors.Is(err, ErrConflict) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("update transaction: %w", err)
		}
		t.Events = nil // written
		if t.Final() {
			s.disarm(ref)
			// Access API: an update waiting for the terminal to be idle goes now.
			s.terminalIdle(t.TerminalID)
		}
		published := *t
		s.running.put(&published)
		s.changes.publishState(ref, &published)
		if !wasFinal && t.Final() {
			s.ended(&published)
		}
		return t, nil
	}
}

// arm runs fn(ref) at a time (or at once if it passed), replacing any
// timer the transaction had.
func (s *Service) arm(ref string, at time.Time, fn func(ref string)) {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	if s.closed {
		return
	}
	if s.timers == nil {
		s.timers = map[string]*time.Timer{}
	}
	if old := s.timers[ref]; old != nil {
		old.Stop()
	}
	s.timers[ref] = time.AfterFunc(at.Sub(s.Now()), func() { fn(ref) })
}

func (s *Service) disarm(ref string) {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	if t := s.timers[ref]; t != nil {
		t.Stop()
		delete(s.timers, ref)
	}
}

// ackExpired ends a transaction that was not acknowledged in time: it is
// stored TECHNICAL_ERROR with WP25 and the terminal is told to drop it.
func (s *Service) ackExpired(ref string) { s.expire(ref, EventAckTimeout) }

// deadlineExpired ends an acknowledged transaction that got no result in
// time: TECHNICAL_ERROR with WP36, and the terminal is told to abort.
func (s *Service) deadlineExpired(ref string) { s.expire(ref, EventDeadline) }

// expire applies a timer's event (EventAckTimeout, EventDeadline) to a
// transaction: a PENDING one ends TECHNICAL_ERROR and its terminal is
// told why, the cancel stored with the change (effect.go); a failure is
// logged and the sweep tries again (Sweep, overdue transactions).
func (s *Service) expire(ref, kind string) {
	if _, _, err := s.apply(context.Background(), ref, nil, Event{Kind: kind, At: s.now()}); err != nil && !s.isClosed() {
		// At shutdown the store may be gone already.
		s.log().Error("expire transaction", "ref", ref, "event", kind, "error", err)
	}
}

// Recover re-arms the time-outs the store implies after a start: an
// unacknowledged PENDING transaction expires at its ack time (at once if
// it passed), an acknowledged one at its deadline, a running print job at
// its print timeout. What the service owes terminals needs no re-arming:
// each device is sent it after its next hello.
func (s *Service) Recover(ctx context.Context) error {
	ts, err := s.Store.PendingTransactions(ctx)
	if err != nil {
		return fmt.Errorf("pending transactions: %w", err)
	}
	for _, t := range ts {
		if t.Acknowledged() && t.DeadlineAt != nil {
			s.arm(t.ID, *t.DeadlineAt, s.deadlineExpired)
		} else {
			s.arm(t.ID, t.CreatedAt.Add(s.ackTimeout()), s.ackExpired)
		}
	}
	jobs, err := s.Store.RunningPrintJobs(ctx)
	if err != nil {
		return fmt.Errorf("running print jobs: %w", err)
	}
	for _, j := range jobs {
		s.arm(j.ID, j.CreatedAt.Add(s.printTimeout()), s.printExpired)
	}
	return nil
}

// AuthenticateDevice checks a device's serial number and secret. A serial
// number no device can have (NUL, bytes that are not UTF-8, which
// PostgreSQL refuses) fails like an unknown one, without asking the store.
func (s *Service) AuthenticateDevice(ctx context.Context, serial, secret string) (*Device, error) {
	unauthorized := Errorf(EUnauthorized, "Unknown device or wrong secret.")
	if !ValidSerialNumber(serial) || secret == "" || len(secret) > 255 {
		return nil, unauthorized
	}
	d, err := s.Store.Device(ctx, serial)
	if errors.Is(err, ErrNotFound) {
		return nil, unauthorized
	} else if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], d.SecretHash) != 1 {
		return nil, unauthorized
	}
	return d, nil
}

// DeviceConnected records the device's hello and tells it what to show: its
// terminal ID, or a link code while unlinked. Then it resumes what the
// device may have missed: the command of its transaction if it has not
// acknowledged it, every message still owed to it (effect.go), and its
// software update.
func (s *Service) DeviceConnected(ctx context.Context, serial string, h DeviceHello) error {
	if err := s.Store.DeviceSeen(ctx, serial, h.SoftwareVersion, s.now()); err != nil {
		return fmt.Errorf("device seen: %w", err)
	}
	t, err := s.Store.TerminalBySerial(ctx, serial)
	switch {
	case err == nil:
		if err := s.Gateway.SendLinked(ctx, serial, t.TerminalID); err != nil {
			return err
		}
		s.resendCommand(ctx, t)
		s.resendOwed(ctx, serial)
		// Access API: finish, resend or deliver the terminal's software update.
		s.updateOnHello(ctx, t, h)
		return nil
	case errors.Is(err, ErrNotFound):
		d, err := s.Store.Device(ctx, serial)
		if err != nil {
			return fmt.Errorf("device: %w", err)
		}
		code := d.LinkCode
		if code == "" {
			if code, err = s.assignLinkCode(ctx, serial); err != nil {
				return fmt.Errorf("link code: %w", err)
			}
		}
		if err := s.Gateway.SendLinkCode(ctx, serial, code); err != nil {
			return err
		}
		// Unlinked since, it may still run a transaction the service ended.
		s.resendOwed(ctx, serial)
		return nil
	default:
		return fmt.Errorf("terminal by serial: %w", err)
	}
}

// DeviceDisconnected notes that a device lost its session. Transactions it
// acknowledged stay PENDING (WP30 for new requests) until it reconnects and
// resends its result, or the deadline passes.
func (s *Service) DeviceDisconnected(serial string) {
	s.log().Debug("device disconnected", "serialNumber", serial)
}

// transactionOf loads the transaction a device reports on; a report for a
// transaction that was not sent to that device is refused.
func (s *Service) transactionOf(ctx context.Context, serial, ref string) (*Transaction, error) {
	t := s.running.get(ref)
	if t == nil {
		var err error
		if t, err = s.Store.Transaction(ctx, ref); err != nil {
			return nil, fmt.Errorf("transaction: %w", err)
		}
	}
	if t.SerialNumber != serial {
		return nil, fmt.Errorf("transaction of another device: %w", ErrNotFound)
	}
	return t, nil
}

// TerminalAcknowledged records the ack: the purchase request answers and
// the deadline starts.
func (s *Service) TerminalAcknowledged(ctx context.Context, serial, ref string) error {
	known, err := s.transactionOf(ctx, serial, ref)
	if err != nil {
		return err
	}
	_, _, err = s.apply(ctx, ref, known, Event{Kind: EventAcknowledged, At: s.now()})
	return err
}

// TerminalProgress records a stage the terminal reached; stages only move
// forward.
func (s *Service) TerminalProgress(ctx context.Context, serial, ref, stage string) error {
	if stageRank(stage) == 0 {
		return fmt.Errorf("unknown progress stage %q", stage)
	}
	known, err := s.transactionOf(ctx, serial, ref)
	if err != nil {
		return err
	}
	_, _, err = s.apply(ctx, ref, known, Event{Kind: EventProgress, At: s.now(), Stage: stage})
	return err
}

// TerminalResult applies a terminal's final outcome, once (Next). A late
// APPROVED for a transaction the service already ended (WP25, WP36) is
// reversed on the terminal at once and the transaction ends REVERSED,
// keeping its error code, so no money is taken for a sale the ECR saw
// fail. It returns nil once the outcome is committed (or was before): the
// gateway then confirms.
func (s *Service) TerminalResult(ctx context.Context, serial string, r TerminalResult) error {
	if r.StatusID < 0 || r.StatusID > StatusWrongPIN {
		return fmt.Errorf("result with status %d is not a terminal outcome", r.StatusID)
	}
	t, err := s.transactionOf(ctx, serial, r.Ref)
	if errors.Is(err, ErrNotFound) {
		// Nothing to apply it to: confirm, so the terminal stops resending.
		s.log().Warn("result for an unknown transaction", "ref", r.Ref, "serialNumber", serial)
		return nil
	} else if err != nil {
		return err
	}
	if t.ResultMessageID == r.MessageID {
		return nil // a resent result, already applied
	}
	e := Event{Kind: EventResult, At: s.now(), Result: &r}
	if t.Type == TypeReversal && r.StatusID == StatusApproved {
		// An approved reversal, in time or late: the purchase's money went
		// back, so the original is REVERSED either way.
		return s.applyReversal(ctx, t, e)
	}
	_, _, err = s.apply(ctx, r.Ref, t, e)
	return err
}

// running keeps the latest state this node committed of each of its
// transactions that is not final yet (bounded by the terminals busy at
// once), so that a terminal's ack, progress and result start from it, and a
// status request of a running transaction is answered from it, instead of
// reading the store. Every change of a transaction is made by the node that
// runs it (one node: see the README's limitations), which puts the new
// state here right after its commit, before it answers or wakes anyone. For
// the changes it is only ever a first guess: each is a compare-and-set on
// the stored version, which re-reads the store when the guess was stale.
type running struct {
	mu sync.Mutex
	// m holds the latest state put of each running transaction, and of
	// each one that ended lately only the version, as a marker, so that a
	// late put of an older state (a change committed before the final one,
	// put after it) is refused. The markers are swept when m is full: they
	// are needed for the moment between a commit and its put.
	m map[string]runningEntry
}

type runningEntry struct {
	t       *Transaction // nil once final
	version int64
}

// maxRunning bounds running: past it, the final markers are swept.
const maxRunning = 10_000

// put records t, a committed state not changed afterwards, unless a newer
// one was put.
func (r *running) put(t *Transaction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]runningEntry{}
	}
	if old, ok := r.m[t.ID]; ok && old.version >= t.Version {
		return
	}
	if len(r.m) >= maxRunning {
		for id, old := range r.m {
			if old.t == nil {
				delete(r.m, id)
			}
		}
		if len(r.m) >= maxRunning {
			clear(r.m) // that many running: the store has them all
		}
	}
	e := runningEntry{version: t.Version}
	if !t.Final() {
		e.t = t
	}
	r.m[t.ID] = e
}

// get returns a copy of the state of ref if it is running, or nil.
func (r *running) get(ref string) *Transaction {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[ref]
	if e.t == nil {
		return nil
	}
	cp := *e.t
	return &cp
}

// changes wakes whoever waits on a transaction when it changes: an entry
// per watched transaction, kept while someone watches, whose channel
// publish closes (and replaces). publish also leaves the committed state it
// knows in the entry, so that a woken waiter needs no read of its own.
type changes struct {
	mu        sync.Mutex
	m         map[string]*watch
	observers []func(id string)
}

type watch struct {
	ch   chan struct{}
	refs int
	// gen counts the publishes since the entry was made; t is the newest
	// committed state published (nil when the last publish carried none).
	gen uint64
	t   *Transaction
}

// watch returns a channel closed at the next change of ref, and a release
// function to call when done waiting.
func (c *changes) watch(ref string) (<-chan struct{}, func()) {
	w, _, release := c.subscribe(ref)
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.ch, release
}

// subscribe holds the entry of ref until release is called, and returns
// its generation: a change published from now on moves it.
func (c *changes) subscribe(ref string) (*watch, uint64, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*watch{}
	}
	w := c.m[ref]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		c.m[ref] = w
	}
	w.refs++
	return w, w.gen, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.refs--
		if w.refs == 0 && c.m[ref] == w {
			delete(c.m, ref)
		}
	}
}

// since returns, if ref was published after generation gen, the newest
// generation and the state published (nil: read the store); and the
// channel closed at the next publish.
func (c *changes) since(w *watch, gen uint64) (newGen uint64, t *Transaction, changed bool, ch <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.gen, w.t, w.gen != gen, w.ch
}

// publish wakes every watcher of ref and tells the observers.
func (c *changes) publish(ref string) { c.publishState(ref, nil) }

// publishState is publish with the transaction's committed state, which
// the waiters take instead of reading it again. It must be called after
// the commit, and t not changed afterwards.
func (c *changes) publishState(ref string, t *Transaction) {
	c.mu.Lock()
	if w := c.m[ref]; w != nil {
		switch {
		case t == nil:
			w.t = nil
		case w.t == nil || t.Version > w.t.Version:
			w.t = t
		}
		w.gen++
		close(w.ch)
		w.ch = make(chan struct{})
	}
	obs := c.observers
	c.mu.Unlock()
	for _, f := range obs {
		f(ref)
	}
}

// Publish wakes local waiters of a transaction changed elsewhere (another
// node), for a store that reports changes.
func (s *Service) Publish(ref string) { s.changes.publish(ref) }

// Observe registers f to be called with the id (onlineAPIRefId or printId)
// of every transaction or print job this Service changes, after the change
// is committed. f runs on the changing goroutine: it must be quick.
func (s *Service) Observe(f func(id string)) {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	s.changes.observers = append(s.changes.observers, f)
}

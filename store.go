package instore

import (
	"context"
	"time"
)

// Store keeps everything the service must not lose. The integrator events
// of a change (events.go) are written in its database transaction and
// passed with it: a transaction's in its Change (change.go), the others'
// as the evs of the write (DevicesSeen, LinkTerminal, UnlinkTerminal,
// CompletePrintJob, CreateUpdate, SetUpdateStatus). Two implementations
// (SQLite and PostgreSQL, internal/sqlstore) pass one conformance suite
// (internal/storetest). Methods return ErrNotFound for a missing row and
// ErrConflict when a unique constraint or a state guard refuses a write,
// wrapped with context.
type Store interface {
	DeviceStore
	TerminalStore
	TransactionStore
	IdempotencyStore
	HistoryStore
	BooksStore
	AccessStore
	EffectStore
	TimelineStore
	EventStore
	WebhookStore
	BatchStore

	// Ping reports whether the store is reachable (readiness).
	Ping(ctx context.Context) error
	Close() error

	CreateCustomer(ctx context.Context, c *Customer) error
	Customer(ctx context.Context, id string) (*Customer, error)
	Customers(ctx context.Context) ([]*Customer, error)

	CreateMerchant(ctx context.Context, m *Merchant) error
	Merchant(ctx context.Context, id string) (*Merchant, error)
	// Merchants lists the merchants of a customer, or all when customerID
	// is empty, oldest first.
	Merchants(ctx context.Context, customerID string) ([]*Merchant, error)
	// SetMerchantActive activates or deactivates a merchant.
	SetMerchantActive(ctx context.Context, id string, active bool) error

	CreateAPIClient(ctx context.Context, c *APIClient) error
	APIClient(ctx context.Context, id string) (*APIClient, error)
	APIClients(ctx context.Context, customerID string) ([]*APIClient, error)
	// RevokeAPIClient marks a client revoked at t; its tokens stop working.
	// Revoking an already revoked client keeps the first time.
	RevokeAPIClient(ctx context.Context, id string, t time.Time) error

	CreateSubscriptionKey(ctx context.Context, k *SubscriptionKey) error
	// SubscriptionKeyByHash finds a key by the SHA-256 digest of its value.
	SubscriptionKeyByHash(ctx context.Context, hash []byte) (*SubscriptionKey, error)
	SubscriptionKeys(ctx context.Context, customerID string) ([]*SubscriptionKey, error)
	RevokeSubscriptionKey(ctx context.Context, id string, t time.Time) error

	// Setting returns a named service setting (ErrNotFound when unset).
	Setting(ctx context.Context, name string) (string, error)
	// InitSetting stores value under name unless a value is already there,
	// and returns the value that is stored: the first writer wins, also
	// across nodes.
	InitSetting(ctx context.Context, name, value string) (string, error)
	// PutSetting stores value under name, replacing any value there: for
	// a setting that changes, such as the demo's refreshed tokens.
	PutSetting(ctx context.Context, name, value string) error
}

// DeviceStore keeps devices.
type DeviceStore interface {
	// CreateDevice adds a device (ErrConflict if the serial number exists).
	CreateDevice(ctx context.Context, d *Device) error
	Device(ctx context.Context, serial string) (*Device, error)
	// DevicesBySerial returns the devices of serials that exist, in one
	// read (a few for thousands), in no order: the devices of many
	// hellos at once (a node's fleet reconnecting) authenticated together.
	DevicesBySerial(ctx context.Context, serials []string) ([]*Device, error)
	// Devices lists the devices of a customer, or all when customerID is
	// empty, ordered by serial number.
	Devices(ctx context.Context, customerID string) ([]*Device, error)
	// DeviceByLinkCode finds the device showing code (ErrNotFound if none).
	DeviceByLinkCode(ctx context.Context, code string) (*Device, error)
	// DevicesSeen records devices' hellos (DeviceSeen) in one database
	// transaction, as if one after another in the order given: each
	// device's software version and time, and every record's events in
	// order. A serial number of no device is ErrNotFound, and then nothing
	// is written. The hellos of a node's fleet reconnecting at once are
	// recorded together: one durable commit for many.
	DevicesSeen(ctx context.Context, seen []DeviceSeen) error
	// SetLinkCode sets (or with "" clears) the code a device shows;
	// ErrConflict when another device shows the same code.
	SetLinkCode(ctx context.Context, serial, code string) error
}

// DeviceSeen is a device's hello as DeviceStore.DevicesSeen records it:
// the software version the device runs and when it said hello (or
// reported the version an update installed), and the events written with
// it (its terminal.online).
type DeviceSeen struct {
	SerialNumber    string
	SoftwareVersion string
	At              time.Time
	Events          []OutboxEvent
}

// TerminalStore keeps terminal IDs and their binding to devices.
type TerminalStore interface {
	// AllocateTerminalID assigns t.TerminalID the next free 8-digit terminal
	// ID (from 10000001 up, never reused) and stores t, safely under
	// concurrency on every backend.
	AllocateTerminalID(ctx context.Context, t *Terminal) error
	Terminal(ctx context.Context, terminalID string) (*Terminal, error)
	// TerminalBySerial finds the terminal ID linked to a device.
	TerminalBySerial(ctx context.Context, serial string) (*Terminal, error)
	// DeviceSessions returns, in one read, what a hello and the end of a
	// session need of each device of serials linked to a terminal ID
	// (DeviceSession), in no order; a device not linked (or unknown) is
	// left out.
	DeviceSessions(ctx context.Context, serials []string) ([]*DeviceSession, error)
	// Terminals lists a merchant's terminal IDs in order.
	Terminals(ctx context.Context, merchantID string) ([]*Terminal, error)
	// LinkTerminal binds terminalID to the device serial in one database
	// transaction: any other terminal ID bound to that device is unbound,
	// the device's link code is cleared, the device is assigned the
	// terminal's customer, linked_at is set. It returns the device that was
	// bound to terminalID before ("" if none) and the terminal ID that was
	// bound to the device before ("" if none). ErrConflict when either
	// terminal ID has a PENDING transaction.
	LinkTerminal(ctx context.Context, terminalID, serial string, at time.Time, evs ...OutboxEvent) (prevSerial, prevTerminalID string, err error)
	// UnlinkTerminal unbinds terminalID and returns the device it was bound
	// to; ErrNotFound when it was not linked, ErrConflict when it has a
	// PENDING transaction.
	UnlinkTerminal(ctx context.Context, terminalID string, evs ...OutboxEvent) (serial string, err error)
}

// TransactionStore keeps transactions. Every change is a compare-and-set on
// Version in one database transaction; the database allows one PENDING
// transaction per terminal ID.
type TransactionStore interface {
	// CreateTransaction stores the new transaction c.T (Version 1) with
	// what c holds (change.go). ErrConflict when the terminal ID already
	// has a PENDING transaction. With c.Idempotency set, the idempotency
	// record it names gets the transaction in the same database
	// transaction, or nothing is stored (ErrIdempotencyLost).
	CreateTransaction(ctx context.Context, c *Change) error
	Transaction(ctx context.Context, id string) (*Transaction, error)
	// ActiveTransaction returns the PENDING transaction of a terminal ID
	// (ErrNotFound if none).
	ActiveTransaction(ctx context.Context, terminalID string) (*Transaction, error)
	// Commit writes the change c (change.go) in one database transaction:
	// every mutable field of c.T if the stored version is still c.From
	// (and of c.Pair.T likewise), its timeline entries and their events,
	// its effects and print job. On success c.T.Version (and the pair's)
	// is From+1; on any error nothing is written and c is unchanged:
	// ErrConflict when a stored version moved on, or a change to PENDING
	// meets another PENDING transaction of the terminal ID; ErrNotFound
	// for a missing transaction. A c.Relaxed change need not wait for the
	// disk (Change).
	Commit(ctx context.Context, c *Change) error
	// PendingTransactions lists every PENDING transaction (restart recovery).
	PendingTransactions(ctx context.Context) ([]*Transaction, error)
	// UnconfirmedTransactions lists the APPROVED sales still awaiting the
	// ECR's confirmation (Transaction.Unconfirmed) whose confirmation
	// deadline is at or before dueBy (the zero time: all), earliest
	// deadline first (restart recovery, the sweep).
	UnconfirmedTransactions(ctx context.Context, dueBy time.Time) ([]*Transaction, error)
	// OpenPreAuths lists the approved pre-auths whose authorisation is OPEN
	// and expires at or before dueBy (the zero time: all), earliest expiry
	// first (restart recovery, the sweep: the service voids them).
	OpenPreAuths(ctx context.Context, dueBy time.Time) ([]*Transaction, error)
}

// IdempotencyStore keeps idempotency records.
type IdempotencyStore interface {
	// BeginIdempotency stores rec (StatusCode 0: running) unless a record
	// with its merchant and key exists; then it returns that record and
	// stores nothing.
	BeginIdempotency(ctx context.Context, rec *IdempotencyRecord) (existing *IdempotencyRecord, err error)
	// CompleteIdempotency stores the response of the running record of
	// attempt (ErrNotFound if there is none).
	CompleteIdempotency(ctx context.Context, merchantID, key, attempt string, status int, header map[string]string, body []byte) error
	// IdempotencyRecord reads a record (ErrNotFound if none).
	IdempotencyRecord(ctx context.Context, merchantID, key string) (*IdempotencyRecord, error)
	// DeleteIdempotency removes the record of attempt unless it is tied to
	// a transaction (ErrNotFound if there is no such record): a running
	// record abandoned before it created anything, or an expired one.
	DeleteIdempotency(ctx context.Context, merchantID, key, attempt string) error
	// ExpireIdempotency deletes records created before t and says how many.
	ExpireIdempotency(ctx context.Context, before time.Time) (int, error)
}

// HistoryStore holds what refunds, reversals, listings and printing need.
type HistoryStore interface {
	// ListTransactions lists transactions by f, newest first (created_at,
	// then id, both descending), at most f.Limit.
	ListTransactions(ctx context.Context, f TransactionFilter) ([]*Transaction, error)
	// OnOriginal lists the refunds and reversals of an original, oldest
	// first.
	OnOriginal(ctx context.Context, originalID string) ([]*Transaction, error)
	// CreateOnOriginal stores a new REFUND or REVERSAL c.T of
	// c.T.OriginalID like CreateTransaction, if CheckOnOriginal allows it
	// (and, for a REVERSAL, CheckReversalLatest, on the transactions
	// NewerOnTerminal selects); or a new INCREMENT, CAPTURE or VOID of the
	// pre-auth c.T.OriginalID if CheckOnPreAuth allows it (with
	// c.CaptureTolerance): the original is locked, the transactions naming
	// it read and the rules applied in the same database transaction
	// as the insert, so requests racing on one original are decided one
	// after the other. The rule's error is returned as it is (an *Error);
	// ErrNotFound when the original does not exist.
	CreateOnOriginal(ctx context.Context, c *Change) error

	CreatePrintJob(ctx context.Context, p *PrintJob) error
	PrintJob(ctx context.Context, id string) (*PrintJob, error)
	// CompletePrintJob sets the final print status of a running job and, in
	// the same database transaction, ends the job's open print effects
	// (EffectMoot); ErrConflict when it already has one.
	CompletePrintJob(ctx context.Context, id string, statusID PrintStatus, at time.Time, evs ...OutboxEvent) error
}

// EffectStore keeps the effects: the messages the service owes terminal
// devices (effect.go), each written in the database transaction of the
// change that makes it owed.
type EffectStore interface {
	// CreatePrintJobEffect stores a print job and the effect that sends it
	// in one database transaction; ErrConflict as CreatePrintJob, or when
	// the effect's id is taken (then neither is stored).
	CreatePrintJobEffect(ctx context.Context, p *PrintJob, e *Effect) error
	// RunningPrintJobs lists the print jobs without a final status, oldest
	// first (created_at, then id).
	RunningPrintJobs(ctx context.Context) ([]*PrintJob, error)
	// Effect returns one effect (ErrNotFound if none).
	Effect(ctx context.Context, id string) (*Effect, error)
	// OpenEffects lists the effects owed to a device that are not done,
	// oldest first (created_at, then id).
	OpenEffects(ctx context.Context, serial string) ([]*Effect, error)
	// OwedDevices returns, for every device owed an effect that is not
	// done, when the newest of them was created.
	OwedDevices(ctx context.Context) (map[string]time.Time, error)
	// EndEffect marks the open effect id of the device serial done with
	// outcome at t. ErrNotFound when the device has no open effect with
	// that id: none exists, it is another device's, or it is done already
	// (the first outcome stays).
	EndEffect(ctx context.Context, id, serial string, outcome EffectOutcome, at time.Time) error
	// EndEffectsOf marks every open effect of kind for ref done with
	// outcome at t, and says how many there were.
	EndEffectsOf(ctx context.Context, ref string, kind EffectKind, outcome EffectOutcome, at time.Time) (int, error)
	// ExpireEffects marks every open effect created before `before` done
	// (EffectExpired at t) and returns them, done, oldest first; but a
	// reversal, which gives a cardholder money back, stays owed until the
	// device confirms it.
	ExpireEffects(ctx context.Context, before, at time.Time) ([]*Effect, error)
}

// AccessStore holds what the Access API needs: terminal IDs allocated with
// their declared model and device, the package catalogue and software
// updates.
type AccessStore interface {
	// AllocateTerminal is AllocateTerminalID that also records the model
	// the terminal ID is declared for (model may be ""), and, when
	// t.SerialNumber is set, binds that device in the same database
	// transaction: its link code is cleared and it is assigned t's
	// customer. ErrConflict (and t unchanged) when the device is bound to
	// a terminal ID already or belongs to another customer, or a
	// reference is missing.
	AllocateTerminal(ctx context.Context, t *Terminal, model string) error
	// TerminalModel returns the model a terminal ID was declared for ("" if
	// none); ErrNotFound when the terminal ID does not exist.
	TerminalModel(ctx context.Context, terminalID string) (string, error)

	// ImportPackages stores the packages in one database transaction: a
	// package whose id exists is skipped when it is the same release
	// (SamePackage) and refused otherwise (ErrConflict: packages are
	// immutable), as is a package of a missing customer. When any package
	// was added, the setting CatalogueSetting changes. It returns how many
	// were added.
	ImportPackages(ctx context.Context, ps []*Package) (added int, err error)
	Package(ctx context.Context, id string) (*Package, error)
	// Packages lists a model's packages that a customer may install (its
	// own and those for every customer; with customerID "" only the
	// latter), newest first: released_at, then id, both descending.
	Packages(ctx context.Context, customerID, model string) ([]*Package, error)

	// CreateUpdate stores a new update; ErrConflict when its terminal ID
	// has an unfinished (SCHEDULED or DOWNLOADING) update already.
	CreateUpdate(ctx context.Context, u *Update, evs ...OutboxEvent) error
	Update(ctx context.Context, id string) (*Update, error)
	// OpenUpdate returns the unfinished update of a terminal ID
	// (ErrNotFound if none).
	OpenUpdate(ctx context.Context, terminalID string) (*Update, error)
	// TerminalWithOpenUpdate returns a terminal ID and its unfinished
	// update (nil if none) in one read, as a purchase's checks need both
	// (ErrNotFound if the terminal ID does not exist).
	TerminalWithOpenUpdate(ctx context.Context, terminalID string) (*Terminal, *Update, error)
	// LatestUpdate returns the newest update of a terminal ID, whatever its
	// status (ErrNotFound if none).
	LatestUpdate(ctx context.Context, terminalID string) (*Update, error)
	// OpenUpdates lists every unfinished update, oldest first.
	OpenUpdates(ctx context.Context) ([]*Update, error)
	// MarkUpdateDelivered sets delivered_at to at if the update is
	// SCHEDULED, was not delivered since staleBefore, and its terminal ID
	// has no PENDING transaction, all checked in the same database
	// transaction; ErrConflict otherwise.
	MarkUpdateDelivered(ctx context.Context, id string, at, staleBefore time.Time) error
	// ClearUpdateDelivered clears delivered_at (the update is to be sent
	// again).
	ClearUpdateDelivered(ctx context.Context, id string) error
	// SetUpdateStatus writes u's status, reason, software version and
	// updated_at if the stored status is one of from (compare-and-set;
	// ErrConflict otherwise), and clears delivered_at. For INSTALLED with
	// a software version, the device linked to u's terminal ID gets that
	// version in the same database transaction.
	SetUpdateStatus(ctx context.Context, u *Update, evs []OutboxEvent, from ...UpdateStatus) error
}

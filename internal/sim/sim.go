// Package sim is the virtual payment terminal: a genuine client of the
// terminal gateway that speaks the terminal protocol (internal/protocol)
// over a WebSocket exactly as a device does. It shows a link code while
// unlinked, acknowledges purchases and refunds, "reads a card" after a
// configurable delay and reports a result with receipts; in sandbox fashion
// the last two digits of the amount pick the outcome. The demo, the sandbox,
// the tests and `instore terminal` all run it.
//
// A Terminal runs one session at a time. It may know several gateway URLs
// (the nodes of one service): after any close or failed dial it tries the
// next one at once, and waits an exponential backoff only after a whole
// round of them failed in a row. Results it has not seen confirmed are kept and resent
// (same message id) after every hello, so no outcome is lost to a dropped
// connection. The other way round it confirms every cancel, reversal of a
// late approval and print, which the gateway sends again after each hello
// until confirmed: a transaction the service ended while the terminal was
// away is cancelled when it comes back, and a print sent again is printed
// once.
package sim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
)

// Defaults of Config.
const (
	DefaultSoftwareVersion = "1.0.0"
	DefaultBackoffMin      = 500 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
)

// Errors Run returns when the gateway closes the session in a way that
// retrying cannot fix.
var (
	// ErrRevoked: the device was removed or its secret changed (close 4401).
	ErrRevoked = errors.New("sim: the gateway revoked the device (close code 4401)")
	// ErrUnsupported: the gateway does not speak this protocol version
	// (close 4426).
	ErrUnsupported = errors.New("sim: the gateway does not support protocol version 1 (close code 4426)")
	// ErrRunning: Run was called while the terminal is already running.
	ErrRunning = errors.New("sim: terminal is already running")
)

// Config describes one virtual terminal.
type Config struct {
	// GatewayURLs are the gateway's WebSocket URLs, such as
	// ws://127.0.0.1:8082/terminal/v1/connect (http and https are taken as
	// ws and wss), one per node of the service, tried in this order: the
	// terminal connects to the first, and after a session ends or a dial
	// fails it goes on with the next (after the last, the first again).
	// None may carry credentials or appear twice.
	GatewayURLs []string
	// GatewayURL is shorthand for GatewayURLs with one URL; set one or the
	// other.
	GatewayURL string
	// SerialNumber and Secret authenticate the device (HTTP Basic).
	SerialNumber, Secret string
	// Model is instore.ModelCountertop (the default), ModelMobile or
	// ModelPINPad.
	Model string
	// SoftwareVersion is reported in hello; default DefaultSoftwareVersion.
	// An installed update replaces it.
	SoftwareVersion string
	// InstallDelay is how long installing a software update takes;
	// default DefaultInstallDelay.
	InstallDelay time.Duration
	// Delay is how long the terminal takes to "read a card"; the progress
	// stages are spread over it. Zero answers at once.
	Delay time.Duration
	// BackoffMin and BackoffMax bound the reconnect delay. The terminal
	// waits only after every URL failed in a row (a full round), or after
	// a close 4409 (replaced); the wait is drawn between half the step and
	// the whole step, and the step doubles after every wait. A session
	// that got as far as hello starts it over. Defaults DefaultBackoffMin
	// and DefaultBackoffMax.
	BackoffMin, BackoffMax time.Duration
	// Logger receives the terminal's log; nil discards it. The secret is
	// never logged; serial numbers and terminal IDs only under the keys
	// serialNumber and terminalId, which the service's handler redacts.
	Logger *slog.Logger
	// Dialer opens the WebSocket; nil means websocket.DefaultDialer.
	Dialer *websocket.Dialer
}

// State is what a terminal shows and how it is connected, for the sandbox
// API, the console and the CLI.
type State struct {
	SerialNumber string `json:"serialNumber"`
	Model        string `json:"model"`
	// TerminalID is the terminal ID the device is linked to; empty while
	// unlinked.
	TerminalID string `json:"terminalId,omitempty"`
	// Online reports whether the terminal has a session with the gateway.
	Online bool `json:"online"`
	// Screen is what the display shows: "Link code 123456", "Idle",
	// "SEK 12.50 - Present card", "Enter PIN", "Authorizing", "APPROVED",
	// "DECLINED", "Offline"...
	Screen string `json:"screen"`
	// LinkCode is the code shown while unlinked.
	LinkCode string `json:"linkCode,omitempty"`
	// Interactive reports whether a person decides each transaction
	// (SetInteractive).
	Interactive bool `json:"interactive"`
	// NextOutcome is the status the next transaction ends with
	// (SetNextOutcome), until a transaction takes it; nil when none is set.
	NextOutcome *instore.TransactionStatus `json:"nextOutcome,omitempty"`
	// NextPrint is the status the next print job ends with (SetNextPrint),
	// until a print job takes it; nil when none is set.
	NextPrint *instore.PrintStatus `json:"nextPrint,omitempty"`
	// NextTip is the tip the cardholder picks on the next transaction that
	// asks for one (SetNextTip); nil when none is set.
	NextTip *int64 `json:"nextTip,omitempty"`
	// TipPrompt is the tip question the transaction in progress waits on
	// a person to answer (interactive, SetNextTip); nil otherwise.
	TipPrompt *TipPrompt `json:"tipPrompt,omitempty"`
	// Deciding is the onlineAPIRefId of the transaction that waits for a
	// person's outcome now (an interactive terminal, Decide); empty when
	// none does.
	Deciding string `json:"deciding,omitempty"`
	// CardNetwork is the card network and the offline queue (offline.go).
	CardNetwork *CardNetwork `json:"cardNetwork"`
	// Version grows with every change of the terminal's state: of two
	// states of one terminal, the one with the higher Version is the newer
	// (listeners run concurrently, so states can reach a reader out of
	// order). It starts at 0 in every process.
	Version uint64 `json:"version"`
}

// Terminal is one virtual terminal. Its control methods (SetNextOutcome,
// SetOffline, SetNextPrint, State, OnChange) are safe to call from any
// goroutine, before, during and after Run.
type Terminal struct {
	cfg  Config
	log  *slog.Logger
	urls []string // normalised GatewayURLs, in order
	// sleep waits d unless ctx ends first, which it reports with false:
	// sleepCtx, or a test's recorder.
	sleep    func(ctx context.Context, d time.Duration) bool
	idPrefix string
	seq      atomic.Uint64
	wake     chan struct{} // nudges a Run waiting while offline or held
	txWG     sync.WaitGroup

	mu         sync.Mutex
	running    bool
	sess       *session // the current session, nil while disconnected
	offline    bool     // SetOffline(true): stay disconnected
	holdUntil  time.Time
	terminalID string
	linkCode   string
	txScreen   string // what a transaction shows; "" for the idle screens
	screenGen  uint64
	tx         *txn      // the transaction in progress
	results    []*stored // unconfirmed results and a few recent confirmed ones
	// cancelledUnknown holds the refs of the last cancels (keepConfirmed)
	// that came before their command: a command with one of them that
	// comes later crossed its cancel, and is dropped.
	cancelledUnknown []string
	nextOutcome      *instore.TransactionStatus
	nextPrint        *instore.PrintStatus
	nextTip          *int64
	// printed holds the status each recently answered print job got, in
	// the order of printedOrder (keepPrinted of them).
	printed      map[string]instore.PrintStatus
	printedOrder []string
	// Software (update.go): the version it runs, the minimum its model
	// needs, the installation in progress, and whether the next one fails.
	version     string
	minVersion  string
	installing  *install
	updScreen   string
	installFail *string
	interactive bool        // SetInteractive: a person decides each outcome
	net         cardNetwork // the card network and the offline queue (offline.go)
	listeners   []func()
	rev         uint64        // State.Version: counts the changes
	changed     chan struct{} // closed and replaced at every change (Await)
	batch       batchBook     // the open batch (batch.go)
}

// New validates cfg and returns a terminal ready to Run.
func New(cfg Config) (*Terminal, error) {
	if cfg.Model == "" {
		cfg.Model = instore.ModelCountertop
	}
	if !instore.ValidModel(cfg.Model) {
		return nil, fmt.Errorf("sim: unknown model %q (want one of %s)", cfg.Model, strings.Join(instore.Models, ", "))
	}
	if cfg.SoftwareVersion == "" {
		cfg.SoftwareVersion = DefaultSoftwareVersion
	}
	if cfg.SerialNumber == "" || len(cfg.SerialNumber) > 64 || strings.ContainsFunc(cfg.SerialNumber, func(r rune) bool {
		return r == ':' || r <= ' ' || r == 0x7f
	}) {
		return nil, errors.New("sim: the serial number must be 1-64 printable characters without spaces or ':'")
	}
	if cfg.Secret == "" {
		return nil, errors.New("sim: the device secret is required")
	}
	urls, err := gatewayURLs(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Delay < 0 {
		return nil, errors.New("sim: negative delay")
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("sim: BackoffMax %s is below BackoffMin %s", cfg.BackoffMax, cfg.BackoffMin)
	}
	if cfg.Dialer == nil {
		cfg.Dialer = websocket.DefaultDialer
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Message ids: a fingerprint of the serial number (never the serial
	// itself, which other logs would then show in clear), a random part
	// that differs per process, and a counter.
	sum := sha256.Sum256([]byte(cfg.SerialNumber))
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	if cfg.InstallDelay <= 0 {
		cfg.InstallDelay = DefaultInstallDelay
	}
	return &Terminal{
		version:  cfg.SoftwareVersion,
		cfg:      cfg,
		log:      logger.With("serialNumber", cfg.SerialNumber),
		urls:     urls,
		sleep:    sleepCtx,
		idPrefix: "vt" + hex.EncodeToString(sum[:4]) + "-" + hex.EncodeToString(rnd[:]),
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}, nil
}

// gatewayURLs validates cfg's gateway URLs and returns them normalised
// (ws or wss), in order.
func gatewayURLs(cfg Config) ([]string, error) {
	raw := cfg.GatewayURLs
	switch {
	case cfg.GatewayURL != "" && len(raw) > 0:
		return nil, errors.New("sim: set GatewayURL or GatewayURLs, not both")
	case cfg.GatewayURL != "":
		raw = []string{cfg.GatewayURL}
	case len(raw) == 0:
		return nil, errors.New("sim: a gateway URL is required")
	}
	urls := make([]string, 0, len(raw))
	for _, s := range raw {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("sim: gateway URL %q is not an absolute URL", s)
		}
		switch u.Scheme {
		case "ws", "wss":
		case "http":
			u.Scheme = "ws"
		case "https":
			u.Scheme = "wss"
		default:
			return nil, fmt.Errorf("sim: gateway URL scheme %q is not ws or wss", u.Scheme)
		}
		if u.User != nil {
			return nil, errors.New("sim: a gateway URL must not carry credentials; set SerialNumber and Secret")
		}
		if slices.Contains(urls, u.String()) {
			return nil, fmt.Errorf("sim: gateway URL %q is listed twice", u.String())
		}
		urls = append(urls, u.String())
	}
	return urls, nil
}

// sleepCtx waits d unless ctx ends first; it reports whether it waited.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// GatewayURLs returns the gateway URLs the terminal tries, in order, as
// it uses them (ws or wss).
func (t *Terminal) GatewayURLs() []string { return slices.Clone(t.urls) }

// SerialNumber returns the device's serial number.
func (t *Terminal) SerialNumber() string { return t.cfg.SerialNumber }

// State returns what the terminal shows now.
func (t *Terminal) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked()
}

func (t *Terminal) stateLocked() State {
	return State{
		SerialNumber: t.cfg.SerialNumber,
		Model:        t.cfg.Model,
		TerminalID:   t.terminalID,
		Online:       t.sess != nil,
		Screen:       t.screenLocked(),
		LinkCode:     t.linkCode,
		Interactive:  t.interactive,
		NextOutcome:  copyInt(t.nextOutcome),
		NextPrint:    copyInt(t.nextPrint),
		NextTip:      copyInt(t.nextTip),
		TipPrompt:    tipPromptOf(t.tx),
		Deciding:     decidingOf(t.tx),
		CardNetwork:  t.cardNetworkLocked(),
		Version:      t.rev,
	}
}

func copyInt[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Await waits until the terminal's state satisfies ok or ctx ends, and
// returns the state it saw last (which satisfies ok unless ctx ended
// first) and whether it does.
func (t *Terminal) Await(ctx context.Context, ok func(State) bool) (State, bool) {
	for {
		t.mu.Lock()
		st, ch := t.stateLocked(), t.changed
		t.mu.Unlock()
		if ok(st) {
			return st, true
		}
		select {
		case <-ctx.Done():
			st := t.State()
			return st, ok(st)
		case <-ch:
		}
	}
}

func (t *Terminal) screenLocked() string {
	switch {
	case t.txScreen != "":
		return t.txScreen
	case t.updScreen != "":
		return t.updScreen
	case t.sess == nil:
		return "Offline"
	case t.linkCode != "":
		return "Link code " + t.linkCode
	case t.mustUpdateLocked():
		return "Update required"
	default:
		return "Idle"
	}
}

// OnChange registers f to be called after every change of State. f runs on
// the goroutine that made the change, possibly on several at once, so it
// must be quick and safe for concurrent use; it may call State.
func (t *Terminal) OnChange(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listeners = append(slices.Clip(t.listeners), f)
}

// update runs f under the lock and then tells the listeners.
func (t *Terminal) update(f func()) {
	t.mu.Lock()
	f()
	ls := t.changedLocked()
	t.mu.Unlock()
	for _, l := range ls {
		l()
	}
}

// changedLocked records a change of the state (a new Version, wakes
// Await) and returns the listeners to call once the lock is released.
func (t *Terminal) changedLocked() []func() {
	t.rev++
	close(t.changed)
	t.changed = make(chan struct{})
	return t.listeners
}

// ErrNothingToDecide is returned by Decide when no transaction waits for a
// person's decision.
var ErrNothingToDecide = errors.New("sim: no transaction is waiting for a decision")

// SetInteractive makes the terminal wait for a person (Decide) on every
// new transaction instead of playing the sandbox outcome rules; but an
// increment, capture or void, which needs no cardholder, plays by them.
func (t *Terminal) SetInteractive(on bool) {
	t.update(func() { t.interactive = on })
}

// Interactive reports whether the terminal waits for a person.
func (t *Terminal) Interactive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.interactive
}

// Decide ends the transaction an interactive terminal shows with a status
// (0-12), as the cardholder or the shop would at the terminal.
func (t *Terminal) Decide(statusID instore.TransactionStatus) error { return t.decide("", statusID) }

// DecideRef is Decide for the transaction ref only: ErrNothingToDecide
// when ref is not the transaction that waits for an outcome now (it
// ended, or another one shows), so a person's late or second click never
// decides another transaction.
func (t *Terminal) DecideRef(ref string, statusID instore.TransactionStatus) error {
	if ref == "" {
		return ErrNothingToDecide
	}
	return t.decide(ref, statusID)
}

// decide is Decide, of the transaction ref if ref is not empty. The state
// changes (Deciding empties): listeners and Await see it.
func (t *Terminal) decide(ref string, statusID instore.TransactionStatus) error {
	if statusID < instore.StatusApproved || statusID > instore.StatusWrongPIN {
		return fmt.Errorf("sim: outcome %d is not a transaction status id from 0 to 12", statusID)
	}
	var err error
	t.update(func() {
		switch {
		case t.tx == nil || t.tx.decide == nil || ref != "" && t.tx.ref != ref:
			err = ErrNothingToDecide
		case t.tx.decided:
			err = errors.New("sim: the transaction was already decided")
		default:
			t.tx.decided = true
			t.tx.decide <- statusID // a buffer of one, and one decision only
		}
	})
	return err
}

// decidingOf is the reference of tx if it waits for a person's outcome.
func decidingOf(tx *txn) string {
	if tx == nil || tx.decide == nil || tx.decided {
		return ""
	}
	return tx.ref
}

// SetNextOutcome makes the next transaction end with statusID (0-12),
// whatever its amount says; it applies once.
func (t *Terminal) SetNextOutcome(statusID instore.TransactionStatus) error {
	if statusID < instore.StatusApproved || statusID > instore.StatusWrongPIN {
		return fmt.Errorf("sim: next outcome %d is not a transaction status id from 0 to 12", statusID)
	}
	t.update(func() { t.nextOutcome = &statusID })
	return nil
}

// SetNextPrint stores the print status the next print job ends with
// (0-6; other values are ignored; TIMEOUT: the terminal does not answer).
func (t *Terminal) SetNextPrint(statusID instore.PrintStatus) {
	if statusID < instore.PrintSuccess || statusID > instore.PrintTimeout {
		return
	}
	t.update(func() { t.nextPrint = &statusID })
}

// SetOffline(true) drops the session, as if the terminal lost its network,
// and keeps it disconnected until SetOffline(false); the state shows it
// offline when SetOffline returns. A transaction in progress goes on; its
// result is kept and delivered after reconnecting. SetOffline(false) lets
// it reconnect, which takes a moment (Await the state's Online).
func (t *Terminal) SetOffline(offline bool) {
	t.update(func() {
		t.offline = offline
		if offline && t.sess != nil {
			t.sess.drop()
			t.sess = nil
		}
	})
	t.nudge()
}

func (t *Terminal) nudge() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// newID returns a message id unique to this terminal and process.
func (t *Terminal) newID() string {
	return fmt.Sprintf("%s-%d", t.idPrefix, t.seq.Add(1))
}

// PrintScreens writes a line to w whenever the screen changes ("Link code
// 123456", "SEK 12.50 - Present card", "APPROVED"...) and when the
// terminal gets linked ("Linked to terminal 10000001"), starting with the
// current screen: what `instore terminal` shows its user.
func (t *Terminal) PrintScreens(w io.Writer) {
	var (
		mu                   sync.Mutex
		lastScreen, lastTerm string
	)
	show := func() {
		mu.Lock()
		defer mu.Unlock()
		st := t.State()
		if st.TerminalID != lastTerm {
			lastTerm = st.TerminalID
			if st.TerminalID != "" {
				fmt.Fprintf(w, "Linked to terminal %s\n", st.TerminalID)
			}
		}
		if st.Screen != lastScreen {
			lastScreen = st.Screen
			fmt.Fprintln(w, st.Screen)
		}
	}
	t.OnChange(show)
	show()
}

package simulation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/instore-dev/instore"
)

// Messages between a terminal and the service, as the gateway and the
// terminal protocol carry them (docs/terminal-protocol.md), without the
// framing.
type msgKind int

const (
	mHello           msgKind = iota // device → service: a new session
	mAck                            // device: the command arrived
	mProgress                       // device: a stage
	mResult                         // device: the final outcome (id: its message id)
	mConfirm                        // device: a server message (id) was carried out
	mPrintResult                    // device: a print job's outcome
	mPayment                        // service → device: a command
	mCancel                         // service: stop ref
	mReversal                       // service: reverse ref at once
	mPrint                          // service: print
	mResultConfirmed                // service (the gateway): the result (or forwarded report) id is stored
	mForwarded                      // device: an offline approval forwarded (offline.go)
	mClose                          // service: close the batch (id, ref: the batchId; close.go)
	mBatch                          // device: its answer to a close (close.go)
	mLinkCode                       // service: the link code to show (ref; relink.go)
)

type msg struct {
	kind   msgKind
	id     string // message id
	ref    string // transaction or print job
	reason string
	stage  instore.Progress
	status instore.TransactionStatus
	tip    int64               // a result's tipAmount
	print  instore.PrintStatus // of a print job
	tx     *instore.Transaction
	// offline: a result approved offline; declined, at: a forwarded
	// report's outcome and time.
	offline  bool
	declined bool
	at       time.Time
	batch    *batchAnswer // a batch message's content
	// linked: the terminal ID the device was linked to when the command
	// was sent (relink.go).
	linked string
}

// session is one connection of a device to a node. Messages on it arrive
// in order, each after a delay; when it breaks, what is in flight is lost.
// The node reads what the device sent one message at a time (one reader
// task), as the gateway's session goroutine does.
type session struct {
	id      int
	dev     *device
	node    *node
	open    bool
	ready   bool // the hello was handled: the device may take commands
	inbox   []msg
	reading bool
	lastIn  time.Time
	lastOut time.Time
}

// connect opens a session of d to a live node (as the load balancer
// would), or tries again later when every node is down.
func (d *device) connect() {
	w := d.w
	var up []*node
	for _, n := range w.nodeAt {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		w.sched.after(time.Second, "reconnect "+d.serial, d.connect)
		return
	}
	n := up[w.faults.rng.IntN(len(up))]
	w.sessions++
	s := &session{id: w.sessions, dev: d, node: n, open: true, lastIn: w.sched.now, lastOut: w.sched.now}
	if old := n.sessions[d.serial]; old != nil {
		old.open = false // the gateway replaces a device's older session
	}
	n.sessions[d.serial] = s
	w.current[d.serial] = s // a new epoch: every older session is stale
	d.sess = s
	w.note("connect %s %s session %d", d.serial, n.name, s.id)
	s.toService(msg{kind: mHello})
	for _, r := range d.unconfirmed {
		s.toService(r.result())
	}
	for _, r := range d.net.reports {
		s.toService(r.msg())
	}
	for _, a := range d.book.unconfirmed {
		s.toService(a.msg())
	}
	d.scheduleCut()
}

// cut breaks the session: both ends lose what is in flight; the device
// reconnects after a while, the node notices a little later.
func (s *session) cut() {
	if !s.open {
		return
	}
	s.open, s.inbox = false, nil
	w, d, n := s.dev.w, s.dev, s.node
	w.note("cut %s session %d", d.serial, s.id)
	if d.sess == s {
		d.sess = nil
		w.sched.after(w.faults.reconnect(), "reconnect "+d.serial, d.connect)
	}
	w.sched.after(w.faults.delay(), "disconnected "+d.serial, func() {
		if n.up && n.sessions[d.serial] == s {
			delete(n.sessions, d.serial)
			w.sched.spawn(n, "disconnected", func() { n.svc.DeviceDisconnected(d.serial) })
		}
	})
}

// toDevice sends m from the node to the device.
func (s *session) toDevice(m msg) {
	w := s.dev.w
	s.lastOut = later(s.lastOut, w.sched.now.Add(w.faults.delay()))
	deliver := func() {
		if s.open {
			s.dev.receive(s, m)
		}
	}
	w.sched.at(s.lastOut, "to "+s.dev.serial, deliver)
	if w.faults.duplicate() {
		w.sched.at(s.lastOut, "to "+s.dev.serial+" again", deliver)
	}
}

// toService sends m from the device to its node.
func (s *session) toService(m msg) {
	w := s.dev.w
	s.lastIn = later(s.lastIn, w.sched.now.Add(w.faults.delay()))
	arrive := func() {
		if !s.open || !s.node.up {
			return
		}
		s.inbox = append(s.inbox, m)
		if !s.reading {
			s.reading = true
			w.sched.spawn(s.node, "read "+s.dev.serial, s.read)
		}
	}
	w.sched.at(s.lastIn, "from "+s.dev.serial, arrive)
	if m.kind != mHello && w.faults.duplicate() {
		w.sched.at(s.lastIn, "from "+s.dev.serial+" again", arrive)
	}
}

// read is the node's reader of the session: each message in turn, to the
// service, fenced as internal/cluster fences: a report on a session that
// is no longer the device's current one is refused (not confirmed).
func (s *session) read() {
	defer func() { s.reading = false }()
	ctx, serial, svc := context.Background(), s.dev.serial, s.node.svc
	for len(s.inbox) > 0 && s.node.up {
		m := s.inbox[0]
		s.inbox = s.inbox[1:]
		if m.kind != mHello && s.dev.w.current[serial] != s {
			continue
		}
		switch m.kind {
		case mHello:
			if svc.DeviceConnected(ctx, serial, instore.DeviceHello{Model: instore.ModelCountertop, SoftwareVersion: "1.0.0"}) == nil {
				s.ready = true
			}
		case mAck:
			_ = svc.TerminalAcknowledged(ctx, serial, m.ref)
		case mProgress:
			_ = svc.TerminalProgress(ctx, serial, m.ref, m.stage)
		case mResult:
			err := svc.TerminalResult(ctx, serial, instore.TerminalResult{MessageID: m.id, Ref: m.ref, StatusID: m.status, TipAmount: m.tip,
				Result: instore.Result{Offline: m.offline}})
			switch {
			case err == nil && s.open && s.node.up:
				s.toDevice(msg{kind: mResultConfirmed, id: m.id})
			case err != nil && s.node.up:
				// The gateway closes the session of a result it could not
				// store (1011): the terminal reconnects and resends it.
				s.cut()
				return
			}
		case mForwarded:
			s.forwarded(m)
		case mBatch:
			if !s.batch(m) {
				return
			}
		case mConfirm:
			_ = svc.TerminalConfirmed(ctx, serial, m.id)
		case mPrintResult:
			_ = svc.TerminalPrintResult(ctx, serial, m.ref, m.print)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// device is a payment terminal: it runs one command at a time, reports
// its stages and its result, resends a result until the service confirms
// it, acknowledges a command it knows again without starting it twice,
// drops a command whose cancel came first, and carries out cancels,
// reversals and prints, confirming each. What it does with money is
// written to the world's ledger (check.go).
type device struct {
	w           *world
	serial      string
	terminalID  string
	sess        *session
	cur         *dtx
	known       map[string]*dtx
	unconfirmed []*dtx
	cancelFirst map[string]bool // cancels of commands it never saw
	net         cardNetwork     // its card network and offline queue (offline.go)
	book        batchBook       // its open batch (close.go)
	code        string          // the link code it shows while unlinked (relink.go)
}

// dtx is a command as the device runs it.
type dtx struct {
	ref      string
	kind     instore.TransactionType
	amount   int64 // its total: a capture's tip included
	cashback int64
	original string
	key      string // the ECR's reference: its Idempotency-Key
	tip      *instore.Tip
	tipped   int64 // the tip the cardholder chose, charged with an approval
	acked    bool
	status   instore.TransactionStatus // -1 while it runs
	msgID    string
	silent   bool // it waits for a cancel
	offline  bool // approved offline, queued (offline.go)
}

func (t *dtx) result() msg {
	return msg{kind: mResult, id: t.msgID, ref: t.ref, status: t.status, tip: t.tipped, offline: t.offline}
}

// send sends m on the device's session, if it has one.
func (d *device) send(m msg) {
	if d.sess != nil {
		d.sess.toService(m)
	}
}

func (d *device) receive(s *session, m msg) {
	w := d.w
	switch m.kind {
	case mPayment:
		d.command(m.tx, m.linked)
	case mLinkCode:
		d.showCode(m.ref)
	case mCancel:
		d.send(msg{kind: mConfirm, id: m.id})
		d.cancel(m.ref, m.reason)
	case mReversal:
		d.send(msg{kind: mConfirm, id: m.id})
		w.ledger.reverse(d.serial, m.ref, "reversal "+m.reason)
		d.reversedInBatch(m.ref)
	case mClose:
		d.close(m.ref)
	case mPrint:
		d.send(msg{kind: mConfirm, id: m.id})
		d.send(msg{kind: mPrintResult, ref: m.ref, print: instore.PrintSuccess})
	case mResultConfirmed:
		for i, t := range d.unconfirmed {
			if t.msgID == m.id {
				d.unconfirmed = append(d.unconfirmed[:i:i], d.unconfirmed[i+1:]...)
				break
			}
		}
		d.forwardConfirmed(m.id)
		d.batchConfirmed(m.id)
	}
	_ = s
}

func (d *device) command(tx *instore.Transaction, linked string) {
	w := d.w
	d.checkCommand(tx, linked)
	if t := d.known[tx.ID]; t != nil {
		// Sent again (after a reconnect): acknowledged again, its result
		// resent; never started twice.
		if t.acked {
			d.send(msg{kind: mAck, ref: t.ref})
		}
		if t.status >= 0 {
			d.send(t.result())
		}
		return
	}
	if d.cancelFirst[tx.ID] {
		return // its cancel came first: dropped, not started
	}
	t := &dtx{ref: tx.ID, kind: tx.Type, amount: tx.TotalAmount(), cashback: tx.CashbackAmount, original: tx.OriginalID, key: tx.ECRReference, tip: tx.Tip, status: -1}
	d.known[tx.ID] = t
	if d.cur != nil {
		w.fail("a terminal is never sent a command while it runs one the service ended", "%s runs %s, sent %s", d.serial, d.cur.ref, tx.ID)
		t.acked = true
		d.send(msg{kind: mAck, ref: t.ref})
		d.finish(t, instore.StatusTerminalIsBusy)
		return
	}
	f := w.faults
	if f.rng.Float64() < f.pNoAck {
		return // never acknowledged, nothing held: the service's ack time-out ends it
	}
	d.cur = t
	w.sched.after(f.delay(), "ack "+t.ref, func() {
		if d.cur == t {
			t.acked = true
			d.send(msg{kind: mAck, ref: t.ref})
		}
	})
	w.sched.after(f.delay()+time.Second, "stage "+t.ref, func() {
		if d.cur == t {
			d.send(msg{kind: mProgress, ref: t.ref, stage: instore.ProgressWaitingForCard})
		}
	})
	status, took := d.plan(t)
	if t.silent {
		// A terminal gives up on its own a while after the deadline the
		// command carried, so that a lost cancel cannot keep it busy.
		took, status = deadline+ackTimeout+30*time.Second, instore.StatusTechnicalError
	}
	var result func()
	result = func() {
		switch {
		case d.cur != t:
		case !t.acked:
			w.sched.after(time.Second, "result "+t.ref, result)
		default:
			d.finish(t, status)
		}
	}
	w.sched.after(took, "result "+t.ref, result)
}

// plan draws what the cardholder and the card network do with t, and how
// long it takes.
func (d *device) plan(t *dtx) (instore.TransactionStatus, time.Duration) {
	f := d.w.faults
	took := time.Duration(2+f.rng.IntN(20)) * time.Second
	switch x := f.rng.Float64(); {
	case t.kind == instore.TypeReversal:
		return instore.StatusApproved, took
	case x < f.pSilent:
		t.silent = true
		return 0, 0
	case x < f.pSilent+f.pLate:
		// Approved late: past the service's deadline, sometimes.
		return instore.StatusApproved, deadline - 20*time.Second + time.Duration(f.rng.IntN(60))*time.Second
	case instore.OnPreAuth(t.kind):
		// No card, no cardholder: the issuer declines an increment now
		// and then, anything else rarely.
		if t.kind == instore.TypeIncrement && x < 0.25 || x > 0.97 {
			return instore.StatusTransactionDeclined, took
		}
		return instore.StatusApproved, took
	case x < 0.25:
		return instore.StatusTransactionDeclined, took
	case x < 0.3:
		return instore.StatusAbortedByCardholder, took
	}
	return instore.StatusApproved, took
}

// finish ends t with status: the money moves (the ledger), and the result
// is reported and resent until confirmed.
func (d *device) finish(t *dtx, status instore.TransactionStatus) {
	if d.cur == t {
		d.cur = nil
	}
	if status == instore.StatusApproved && (t.kind == instore.TypePurchase || t.kind == instore.TypePreAuth) {
		t.tipped = d.chooseTip(t)
	}
	status = d.offline(t, status)
	if status == instore.StatusApproved && isHoldOp(t.kind) && d.w.ledger.voided(t.original) {
		// The issuer declines a void, a capture or an increment of an
		// authorisation voided already: the service retried its expiry's
		// VOID after one that ended without an answer, or took a capture
		// after a VOID whose acknowledgement a crash lost (it ended
		// WP25), either of which the terminal approved late.
		d.w.note("%s declined: %s is voided already on the card", t.ref, t.original)
		status = instore.StatusTransactionDeclined
	}
	t.status = status
	d.w.resultIDs++
	t.msgID = fmt.Sprintf("res_%d", d.w.resultIDs)
	if status == instore.StatusApproved {
		switch t.kind {
		case instore.TypePurchase, instore.TypePreAuth:
			d.w.ledger.authorize(d.serial, t.ref, t.key, t.amount+t.tipped, t.cashback)
			if t.offline {
				d.w.ledger.queued(d.serial, t.ref)
			}
			if t.kind == instore.TypePreAuth {
				d.w.ledger.preauths[t.ref] = true
			}
		case instore.TypeIncrement, instore.TypeCapture, instore.TypeVoid:
			d.w.ledger.onHold(d.serial, t)
		case instore.TypeRefund:
			d.w.ledger.paidBack(t)
			d.w.ledger.refund(d.serial, t.original, t.ref, t.amount)
		case instore.TypeReversal:
			d.w.ledger.paidBack(t)
			d.w.ledger.reverse(d.serial, t.original, "reversal "+t.ref)
		}
	}
	d.record(t)
	d.unconfirmed = append(d.unconfirmed, t)
	d.send(t.result())
}

// cancel stops ref if it runs: a command never acknowledged is dropped, an
// acknowledged one ends aborted; a cancel of a command not seen yet keeps
// that command from starting.
func (d *device) cancel(ref, reason string) {
	t := d.known[ref]
	switch {
	case t == nil:
		d.cancelFirst[ref] = true
	case d.cur != t:
		// Already ended: the result stands, and is resent if the service
		// has not confirmed it yet.
		if t.status >= 0 && slices.Contains(d.unconfirmed, t) {
			d.send(t.result())
		}
	case !t.acked:
		d.cur = nil
	case reason == instore.CancelByECR:
		d.finish(t, instore.StatusAbortedByCashier)
	default:
		d.finish(t, instore.StatusTechnicalError)
	}
}

// scheduleCut plans the next break of the device's session.
func (d *device) scheduleCut() {
	s := d.sess
	if at, ok := d.w.faults.nextCut(); ok {
		d.w.sched.after(at, "cut "+d.serial, func() { s.cut() })
	}
}

// chooseTip is the tip the cardholder picks for t (the ECR's when FIXED),
// never above the amount: the terminal refuses more.
func (d *device) chooseTip(t *dtx) int64 {
	if t.tip == nil {
		return 0
	}
	r := d.w.faults.rng
	switch t.tip.Mode {
	case instore.TipFixed:
		return *t.tip.Amount
	case instore.TipPrompt:
		if r.IntN(4) == 0 {
			return 0 // "no tip"
		}
		return min(instore.TipOfPercent(t.amount, t.cashback, t.tip.Suggestions[r.IntN(len(t.tip.Suggestions))]), t.amount)
	}
	return r.Int64N(t.amount/5 + 1) // the total typed, less the amount
}

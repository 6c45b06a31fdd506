package simulation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/onlineapi"
)

// Relinks: in about half of the seeds, now and then, an operator replaces
// terminals as a shop does. It swaps the devices of two terminal IDs
// (unlinks the first, links the second to the device that then shows a
// link code, then the first to the second's old device, which shows a
// code in its turn), or links a terminal ID to the spare device, whose old
// device becomes the spare. It goes through the real Online API
// (POST /terminal/unlink and /terminal/link) with the code the device
// shows, and decides each step on how the terminal IDs are linked in the
// store (as an operator reads the terminal list): a step the service
// refused (WP09 while the terminal ID has a PENDING transaction, a code
// that is no longer shown) or whose answer was lost is simply tried
// again. The ECRs stay at their terminal IDs; the service routes each
// command by serial number to the device linked when it was created, and
// the simulated devices follow their new links. The relinks draw from a
// stream of their own, and the spare device exists only in the seeds that
// have them, so that a seed without relinks runs as it did before.

// spareSerial is the spare device of the template: unlinked at first,
// used only by the seeds that relink.
const spareSerial = "SIM-4"

// relinks is the operator's part of the world, and what the store says of
// the links.
type relinks struct {
	rng *rand.Rand
	// every is about how long the operator waits between two relinks; 0:
	// none in this seed.
	every time.Duration
	// plan is the relink under way, its steps not done yet (nil: none).
	plan []relinkStep
	// links is each terminal ID's device as the store's writes make it
	// ("": unlinked; store.go), since when each terminal ID has it.
	links map[string]string
	since map[string]time.Time
	// lapsed: the pre-auths seen EXPIRED without a VOID (relink_check.go).
	lapsed map[string]bool
	// done counts the relinks finished; relinked the creations the store
	// refused because a link came between (instore.ErrRelinked).
	done, relinked int
}

// relinkStep links terminalID to the device serial, with the code it
// shows; with serial "", it unlinks terminalID.
type relinkStep struct {
	terminalID, serial string
}

func newRelinks(seed uint64, terminals []string) *relinks {
	r := &relinks{rng: rand.New(rand.NewChaCha8(seedBytes(seed, "relink"))), links: map[string]string{}, since: map[string]time.Time{},
		lapsed: map[string]bool{}}
	if r.rng.IntN(2) == 0 {
		r.every = time.Duration(15+r.rng.IntN(25)) * time.Second
	}
	for i := 0; i < len(terminals); i += 2 {
		r.links[terminals[i]] = terminals[i+1]
	}
	return r
}

// device is the simulated device of serial (nil: none).
func (w *world) device(serial string) *device {
	for _, d := range w.devices {
		if d.serial == serial {
			return d
		}
	}
	return nil
}

// linkedTo is the device the terminal ID is linked to now (nil: none, or
// one the world does not simulate).
func (w *world) linkedTo(terminalID string) *device {
	if serial := w.relinks.links[terminalID]; serial != "" {
		return w.device(serial)
	}
	return nil
}

// linked takes a link the store just committed (store.go, inside the
// write, so that a crash right after it keeps it): terminalID is linked to
// serial; its previous device (prevSerial) and serial's previous terminal
// ID (prevTerminal) lose their link. The devices follow at once: a device
// runs what the service sends it, whichever terminal ID it is for, and
// the checks compare that with the link.
func (w *world) linked(terminalID, serial, prevSerial, prevTerminal string) {
	r, now := w.relinks, w.sched.now
	if prevSerial == serial {
		return // linked already: nothing changed
	}
	if prevTerminal != "" {
		r.links[prevTerminal], r.since[prevTerminal] = "", now
	}
	if d := w.device(prevSerial); d != nil {
		d.terminalID = ""
	}
	r.links[terminalID], r.since[terminalID] = serial, now
	if d := w.device(serial); d != nil {
		// Linked, it shows its terminal ID and no code (the service's
		// linked message, not modelled: it would follow any link-code
		// still on its way).
		d.terminalID, d.code = terminalID, ""
	}
	w.note("linked %s to %s (it was %q's; %s was %q's)", terminalID, serial, prevSerial, serial, prevTerminal)
}

// unlinked takes an unlink the store just committed.
func (w *world) unlinked(terminalID, serial string) {
	w.relinks.links[terminalID], w.relinks.since[terminalID] = "", w.sched.now
	if d := w.device(serial); d != nil {
		d.terminalID = ""
	}
	w.note("unlinked %s from %s", terminalID, serial)
}

// creation notes a creation the store refused because its terminal ID
// was linked to another device after the service read it (the service
// runs the request again), and returns err.
func (w *world) creation(c *instore.Change, err error) error {
	if errors.Is(err, instore.ErrRelinked) {
		w.relinks.relinked++
		w.note("relinked: the store refused %s %s for %s on %s", c.T.Type, c.T.ID, c.T.TerminalID, c.OnDevice)
	}
	return err
}

// operate is the operator's next move: the next step of the relink under
// way, or a new relink; a step the store shows done already is passed.
func (w *world) operate() {
	r := w.relinks
	if r.plan == nil {
		if w.quiet {
			return // the storm is over: no new relink (one under way is finished)
		}
		r.plan = w.planRelink()
	}
	for len(r.plan) > 0 && r.links[r.plan[0].terminalID] == r.plan[0].serial {
		r.plan = r.plan[1:]
	}
	if len(r.plan) == 0 {
		r.plan = nil
		r.done++
		w.note("relink done")
		if !w.quiet {
			w.sched.after(r.every/2+time.Duration(r.rng.Int64N(int64(r.every))), "operator", w.operate)
		}
		return
	}
	w.sched.after(time.Second+time.Duration(r.rng.IntN(2000))*time.Millisecond, "operator", w.operate)
	s := r.plan[0]
	switch d := w.device(s.serial); {
	case s.serial == "":
		w.operatorCall("unlink", instore.TerminalRequest{TerminalID: s.terminalID})
	case d.code != "":
		w.operatorCall("link", instore.LinkRequest{TerminalID: s.terminalID, LinkCode: d.code})
	default:
		return // its code has not reached it yet (offline, or on its way): the operator waits
	}
	if !w.quiet && r.rng.IntN(2) == 0 {
		w.raceRelink(s.terminalID)
	}
}

// raceRelink has the ECR of terminalID make a move at the moment the
// operator links or unlinks it: a sale, a reversal or an operation on a
// pre-auth, whose read of the terminal may come before the link and its
// creation after (the service then runs it again on the new link:
// instore.ErrRelinked), as a till may while a terminal is replaced.
func (w *world) raceRelink(terminalID string) {
	for _, e := range w.ecrs {
		if e.terminalID != terminalID {
			continue
		}
		w.note("race operator %s on %s", e.name, terminalID)
		switch w.relinks.rng.IntN(3) {
		case 0:
			e.purchase()
		case 1:
			e.afterSale(80) // the reversal of one of its approved sales
		default:
			e.preAuthMove(25 + w.relinks.rng.IntN(55)) // an increment, capture, void or race on a pre-auth
		}
	}
}

// planRelink draws the next relink: a terminal ID to the spare device (one
// in three, when there is one), or a swap of two terminal IDs' devices.
func (w *world) planRelink() []relinkStep {
	r := w.relinks
	ids := make([]string, len(w.ecrs))
	for i, e := range w.ecrs {
		ids[i] = e.terminalID
	}
	var spare *device
	for _, d := range w.devices {
		if d.terminalID == "" && spare == nil {
			spare = d
		}
	}
	if spare != nil && r.rng.IntN(3) == 0 {
		t := ids[r.rng.IntN(len(ids))]
		w.note("relink %s from %s to the spare %s", t, r.links[t], spare.serial)
		return []relinkStep{{t, spare.serial}}
	}
	i := r.rng.IntN(len(ids))
	a, b := ids[i], ids[(i+1+r.rng.IntN(len(ids)-1))%len(ids)]
	x, y := r.links[a], r.links[b]
	w.note("relink swap %s (%s) and %s (%s)", a, x, b, y)
	return []relinkStep{{a, ""}, {b, x}, {a, y}}
}

// operatorCall sends the operator's request (unlink or link) to a live
// node as a task of that node. The operator reads the outcome in the
// store at its next move, so a lost answer is only noted.
func (w *world) operatorCall(name string, body any) {
	n := w.pickNode()
	if n == nil {
		return
	}
	b, _ := json.Marshal(body)
	w.sched.spawn(n, "operator "+name, func() {
		r := w.apiRequest(context.Background(), http.MethodPost, "/terminal/"+name, b)
		rec := httptest.NewRecorder()
		n.handler.ServeHTTP(rec, r)
		if !n.up || w.faults.lose() {
			return
		}
		var a answer
		_ = json.Unmarshal(rec.Body.Bytes(), &a)
		w.note("answer operator %s %s %d %s %s", name, b, rec.Code, a.ErrorCode, strings.TrimPrefix(a.Type, "urn:instore:problem:"))
		if rec.Code == 500 || rec.Code == 503 {
			w.fail("no 500 or 503", "POST /terminal/%s answered %d", name, rec.Code)
		}
	})
}

// apiRequest is a request to the Online API as the merchant's client.
func (w *world) apiRequest(ctx context.Context, method, path string, body []byte) *http.Request {
	r := httptest.NewRequestWithContext(ctx, method, "http://instore"+onlineapi.Prefix+path, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+w.token)
	r.Header.Set("Ocp-Apim-Subscription-Key", w.subscriptionKey)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// SendLinkCode tells an unlinked device the code to show, as a message on
// its session (the gateway's link-code).
func (g gateway) SendLinkCode(_ context.Context, serial, code string) error {
	return g.send(serial, msg{kind: mLinkCode, ref: code})
}

// showCode takes a link-code message: the device shows the code while it
// is unlinked. One that comes after the device was linked is stale: the
// linked message that follows it on its session would take it off.
func (d *device) showCode(code string) {
	if d.terminalID == "" {
		d.code = code
	}
}

func (r *relinks) String() string {
	return fmt.Sprintf("relinks every %v, spare %s, links %v", r.every, spareSerial, r.links)
}

// Package sandbox is everything of sandbox mode besides the virtual
// terminals themselves (internal/sim): the control API (/sandbox/v1) that
// drives them, the console page that shows them (console.go), and the
// provisioning of their devices (devices.go). The server wires it in
// sandbox and demo mode only; a production service has none of it.
package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sim"
)

// Register adds the sandbox control API's routes to a, guarded by g (the
// Online API's credentials): only in sandbox mode, with the fleet of
// virtual terminals.
func Register(a *httpapi.API, g *httpapi.Guard, svc *service.Service, store instore.Store, fleet *sim.Fleet) {
	sb := &sandbox{svc: svc, store: store, fleet: fleet}
	a.Handle("GET /sandbox/v1/devices", g.Wrap(sb.devices))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/next-outcome", g.Wrap(sb.nextOutcome))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/offline", g.Wrap(sb.setOffline(true)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/online", g.Wrap(sb.setOffline(false)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/printer", g.Wrap(sb.printer))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/next-install", g.Wrap(controlOf[nextInstallBody](sb)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/next-tip", g.Wrap(controlOf[nextTipBody](sb)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/card-network", g.Wrap(controlOf[cardNetworkBody](sb)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/next-forward", g.Wrap(controlOf[nextForwardBody](sb)))
	a.Handle("POST /sandbox/v1/terminals/{terminalId}/batch-extra", g.Wrap(controlOf[batchExtraBody](sb)))
}

// sandbox serves the sandbox control API (/sandbox/v1), registered only in
// sandbox mode: it drives the in-process virtual terminals.
type sandbox struct {
	svc   *service.Service
	store instore.Store
	fleet *sim.Fleet
}

// DeviceJSON is a virtual device as GET /sandbox/v1/devices shows it.
type DeviceJSON struct {
	SerialNumber string  `json:"serialNumber"`
	Model        string  `json:"model"`
	TerminalID   *string `json:"terminalId"`
	Online       bool    `json:"online"`
	Screen       string  `json:"screen"`
	LinkCode     *string `json:"linkCode"`
	// CardNetwork is the card network and offline queue (network.go).
	CardNetwork sim.CardNetwork `json:"cardNetwork"`
}

// devices lists the virtual devices the caller's customer may see: its own
// and those not yet assigned to any customer.
func (s *sandbox) devices(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if _, err := s.svc.ActiveMerchant(r.Context(), p); err != nil {
		return err
	}
	out, err := VisibleDevices(r.Context(), s.store, s.fleet, p.CustomerID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"devices": out})
}

// VisibleDevices lists the virtual devices a customer may see and use: its
// own and those not yet assigned to any customer.
func VisibleDevices(ctx context.Context, store instore.Store, fleet *sim.Fleet, customerID string) ([]DeviceJSON, error) {
	all, err := store.Devices(ctx, "")
	if err != nil {
		return nil, err
	}
	visible := map[string]bool{}
	for _, d := range all {
		visible[d.SerialNumber] = d.CustomerID == "" || d.CustomerID == customerID
	}
	out := []DeviceJSON{}
	for _, st := range fleet.States() {
		if visible[st.SerialNumber] {
			out = append(out, DeviceState(st))
		}
	}
	return out, nil
}

// DeviceState is a virtual device's state as the sandbox shows it.
func DeviceState(st sim.State) DeviceJSON {
	return DeviceJSON{
		SerialNumber: st.SerialNumber, Model: st.Model, TerminalID: optional(st.TerminalID),
		Online: st.Online, Screen: st.Screen, LinkCode: optional(st.LinkCode), CardNetwork: cardNetworkOf(st),
	}
}

// device finds the virtual device linked to one of the merchant's terminal
// IDs (WP03, WP16, WP01; not-found when it is not a virtual device).
func (s *sandbox) device(ctx context.Context, p *instore.Principal, terminalID string) (*sim.Terminal, error) {
	if !instore.ValidTerminalID(terminalID) {
		return nil, httpapi.Validation(instore.FieldError{Field: "terminalId", Message: "must be 8 digits"})
	}
	t, err := s.svc.OwnTerminal(ctx, p, terminalID)
	if err != nil {
		return nil, err
	}
	if !t.Linked() {
		return nil, instore.Errorf(instore.WP01, "The terminal ID has no linked terminal.")
	}
	vt, ok := s.fleet.Get(t.SerialNumber)
	if !ok {
		return nil, instore.Errorf(instore.ENotFound, "The terminal linked to this terminal ID is not a virtual terminal.")
	}
	return vt, nil
}

type statusBody struct {
	StatusID *int `json:"statusId"`
}

// statusFor reads the statusId of a request's body, refused unless from
// 0 to highest (what names the list it is of), and the virtual terminal of
// its path's terminal ID.
func statusFor[S instore.TransactionStatus | instore.PrintStatus](s *sandbox, r *http.Request, p *instore.Principal, highest S, what string) (*sim.Terminal, S, error) {
	var body statusBody
	if err := httpapi.DecodeJSON(r, &body); err != nil {
		return nil, 0, err
	}
	if body.StatusID == nil || *body.StatusID < 0 || S(*body.StatusID) > highest {
		return nil, 0, httpapi.Validation(instore.FieldError{Field: "/statusId", Message: fmt.Sprintf("must be a %s id from 0 to %d", what, highest)})
	}
	vt, err := s.device(r.Context(), p, r.PathValue("terminalId"))
	return vt, S(*body.StatusID), err
}

func (s *sandbox) nextOutcome(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	vt, status, err := statusFor(s, r, p, instore.StatusWrongPIN, "transaction status")
	if err != nil {
		return err
	}
	if err := vt.SetNextOutcome(status); err != nil {
		return httpapi.Validation(instore.FieldError{Field: "/statusId", Message: err.Error()})
	}
	return s.state(w, vt)
}

func (s *sandbox) printer(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	vt, status, err := statusFor(s, r, p, instore.PrintTimeout, "print status")
	if err != nil {
		return err
	}
	vt.SetNextPrint(status)
	return s.state(w, vt)
}

func (s *sandbox) setOffline(offline bool) httpapi.AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		vt, err := s.device(r.Context(), p, r.PathValue("terminalId"))
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusOK, DeviceState(SwitchOnline(r.Context(), s.svc, vt, !offline)))
	}
}

// OnlineWait bounds how long switching a virtual terminal offline or
// online waits for the change to show in its state and in the gateway.
const OnlineWait = 5 * time.Second

// SwitchOnline takes a virtual terminal offline or brings it back, and
// returns its state after the change: once the terminal shows it (offline
// at once; online when it has a session again) and the service's gateway
// sees it too, so that the next request finds the terminal as answered
// (WP23 after offline, none after online). When that takes longer than
// OnlineWait or ctx ends first, it returns the state then: a terminal that
// cannot reconnect shows offline and keeps trying. The sandbox control API
// and the console both switch through here.
func SwitchOnline(ctx context.Context, svc *service.Service, vt *sim.Terminal, online bool) sim.State {
	vt.SetOffline(!online)
	ctx, cancel := context.WithTimeout(ctx, OnlineWait)
	defer cancel()
	if _, ok := vt.Await(ctx, func(st sim.State) bool { return st.Online == online }); ok && svc.Gateway != nil {
		// The gateway's view has no change notice: look again shortly.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for svc.Gateway.Online(vt.SerialNumber()) != online && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}
	return vt.State()
}

func (s *sandbox) state(w http.ResponseWriter, vt *sim.Terminal) error {
	return httpapi.WriteJSON(w, http.StatusOK, DeviceState(vt.State()))
}

// nextInstallBody is the body of POST .../next-install.
type nextInstallBody struct {
	Fail   *bool  `json:"fail"`
	Reason string `json:"reason"`
}

// check lists what is wrong with a next-install body.
func (b *nextInstallBody) check() []instore.FieldError {
	var bad []instore.FieldError
	if b.Fail == nil {
		bad = append(bad, instore.FieldError{Field: "/fail", Message: "is required"})
	}
	if !instore.ValidText(b.Reason, instore.MaxUpdateReasonLen) {
		bad = append(bad, instore.FieldError{Field: "/reason", Message: fmt.Sprintf("must be at most %d characters, without control characters", instore.MaxUpdateReasonLen)})
	}
	return bad
}

// apply makes the next software installation of a virtual terminal fail
// (or, with fail false, succeed again), so that a FAILED update is
// reachable from the sandbox (Access API).
func (b *nextInstallBody) apply(w http.ResponseWriter, s *sandbox, vt *sim.Terminal) error {
	vt.SetNextInstallFail(*b.Fail, b.Reason)
	return s.state(w, vt)
}

// nextTipBody is the body of POST .../next-tip.
type nextTipBody struct {
	TipAmount *int64 `json:"tipAmount"`
}

// check lists what is wrong with a next-tip body.
func (b *nextTipBody) check() []instore.FieldError {
	what := fmt.Sprintf("the tip in minor units, from 0 (no tip) to %d", instore.MaxAmount)
	switch {
	case b.TipAmount == nil:
		return []instore.FieldError{{Field: "/tipAmount", Message: "is required: " + what}}
	case *b.TipAmount < 0 || *b.TipAmount > instore.MaxAmount:
		return []instore.FieldError{{Field: "/tipAmount", Message: "must be " + what}}
	}
	return nil
}

// apply sets the tip the cardholder picks on the virtual terminal's next
// transaction that asks for one (sim.Terminal.SetNextTip).
func (b *nextTipBody) apply(w http.ResponseWriter, s *sandbox, vt *sim.Terminal) error {
	if err := vt.SetNextTip(*b.TipAmount); err != nil {
		return httpapi.Validation(instore.FieldError{Field: "/tipAmount", Message: err.Error()})
	}
	return s.state(w, vt)
}

// A control is the body of a POST /sandbox/v1/terminals/{terminalId}/...
// that changes the virtual terminal: check lists what is wrong with it
// (and fills in its defaults); apply applies it to the virtual terminal
// and answers.
type control interface {
	check() []instore.FieldError
	apply(w http.ResponseWriter, s *sandbox, vt *sim.Terminal) error
}

// controlOf is the handler of a control whose body is a B: it decodes the
// body, refuses it with what check finds (400), finds the virtual terminal
// of the path's terminal ID and applies the body to it.
func controlOf[B any, C interface {
	*B
	control
}](s *sandbox) httpapi.AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		body := C(new(B))
		if err := httpapi.DecodeJSON(r, body); err != nil {
			return err
		}
		if bad := body.check(); len(bad) > 0 {
			return httpapi.Validation(bad...)
		}
		vt, err := s.device(r.Context(), p, r.PathValue("terminalId"))
		if err != nil {
			return err
		}
		return body.apply(w, s, vt)
	}
}

// optional is s, or nil (JSON null) when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

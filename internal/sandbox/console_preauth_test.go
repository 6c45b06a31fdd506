package sandbox_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// preAuthList is the console's read of the pre-auths and their
// operations (app.js, loadLists).
func preAuthList() string {
	return fromLastMonth("/in-store/api/v1/transactions?type=PRE_AUTH,INCREMENT,CAPTURE,VOID&limit=100")
}

// op starts a pre-auth's INCREMENT, CAPTURE or VOID (path /increment,
// /capture, /void; amount 0: none) and returns its onlineAPIRefId.
func (a *onlineAPI) op(path, pre string, amount int64) string {
	a.t.Helper()
	body := map[string]any{"onlineAPIRefId": pre}
	if amount > 0 {
		body["amount"] = amount
	}
	var tx instore.TransactionWire
	a.do("POST", "/in-store/api/v1"+path, body, 201, &tx)
	return tx.OnlineAPIRefID
}

// preAuth starts a pre-auth of amount SEK minor units on terminalID.
func (a *onlineAPI) preAuth(terminalID string, amount int64) string {
	a.t.Helper()
	var tx instore.TransactionWire
	a.do("POST", "/in-store/api/v1/preauthorization", map[string]any{"terminalId": terminalID, "amount": amount, "currency": "SEK"}, 201, &tx)
	return tx.OnlineAPIRefID
}

// awaitAuth waits (bounded) until the pre-auth's authorisation is in
// state with authorized as its authorized amount (0: any), and returns
// the pre-auth.
func (a *onlineAPI) awaitAuth(pre string, state instore.AuthorizationState, authorized int64) instore.TransactionWire {
	a.t.Helper()
	var tx instore.TransactionWire
	testwait.For(a.t, pre+" "+string(state), func() bool {
		a.do("GET", "/in-store/api/v1/transaction/"+pre, nil, 200, &tx)
		au := tx.Authorization
		return au != nil && au.State == state && (authorized == 0 || au.AuthorizedAmount == authorized)
	})
	return tx
}

// TestConsolePreAuthData: what the console's pre-auth view is made of. The
// console's stream shows the virtual terminal's screens: a pre-auth asks
// for the card and waits for the person, an increment and a capture say
// they need no card and end without one. The Online API's listing the page
// reads at load has the pre-auth with its authorisation and its operations
// naming it; the event stream carries transaction.authorization with the
// pre-auth after each change, OPEN with the increment, then CAPTURED.
func TestConsolePreAuthData(t *testing.T) {
	a, info, ch, counter := startWatched(t)
	screen := func(want string) {
		t.Helper()
		next(t, ch, "device", func(s string) bool {
			return strings.Contains(s, `"serialNumber":"`+counter.SerialNumber+`"`) && strings.Contains(s, `"screen":"`+want+`"`)
		})
	}
	pre := a.preAuth(counter.TerminalID, 2000)
	screen("Pre-auth SEK 20.00 - Present card")
	if code, body := consoleAction(t, info, counter.SerialNumber, "approve"); code != 200 {
		t.Fatalf("approve = %d %s", code, body)
	}
	if auth := a.awaitAuth(pre, instore.AuthOpen, 2000).Authorization; auth.AuthorizedAmount != 2000 || auth.CapturedAmount != 0 || !auth.ExpiresAt.After(time.Now()) {
		t.Fatalf("authorization = %+v, want OPEN 2000, 0 captured, expiring later", auth)
	}
	events := a.eventsAfter("")
	cursor := events[len(events)-1].ID
	inc := a.op("/increment", pre, 500)
	screen("Increment SEK 5.00 - No card, authorizing") // and no person: the terminal ends it
	a.awaitAuth(pre, instore.AuthOpen, 2500)
	capture := a.op("/capture", pre, 2400)
	screen("Capture SEK 24.00 - No card, authorizing")
	a.awaitAuth(pre, instore.AuthCaptured, 0)

	// The listing the page reads at load.
	var list struct {
		Transactions []instore.TransactionWire `json:"transactions"`
	}
	a.do("GET", preAuthList(), nil, 200, &list)
	got := map[string]instore.TransactionWire{}
	for _, tx := range list.Transactions {
		got[tx.OnlineAPIRefID] = tx
	}
	if p := got[pre]; p.Type != instore.TypePreAuth || p.Authorization == nil || *p.Authorization != (instore.Authorization{State: instore.AuthCaptured,
		AuthorizedAmount: 2500, CapturedAmount: 2400, ExpiresAt: p.Authorization.ExpiresAt}) {
		t.Errorf("the listing's pre-auth = %+v", p)
	}
	for ref, typ := range map[string]instore.TransactionType{inc: instore.TypeIncrement, capture: instore.TypeCapture} {
		if o := got[ref]; o.Type != typ || o.PreAuthorization != pre || o.StatusID != instore.StatusApproved {
			t.Errorf("the listing's %s = %+v, want APPROVED naming %s", typ, o, pre)
		}
	}
	// The stream's transaction.authorization events: the pre-auth, after
	// the increment (OPEN, 2500), then after the capture (CAPTURED).
	var page struct {
		Events []struct {
			Data instore.TransactionWire `json:"data"`
		} `json:"events"`
	}
	a.do("GET", "/in-store/api/v1/events?types=transaction.authorization&after="+url.QueryEscape(cursor), nil, 200, &page)
	var seen []string
	for _, e := range page.Events {
		if au := e.Data.Authorization; e.Data.OnlineAPIRefID == pre && au != nil {
			seen = append(seen, fmt.Sprintf("%s %d/%d", au.State, au.AuthorizedAmount, au.CapturedAmount))
		}
	}
	if want := []string{"OPEN 2500/0", "CAPTURED 2500/2400"}; !slices.Equal(seen, want) {
		t.Errorf("transaction.authorization events = %q, want %q", seen, want)
	}
}

// TestConsolePreAuths: the console's pre-auth view in the system Chromium.
// A pre-auth made before the page opened shows from the listing, OPEN; one
// made after shows from the event stream, OPEN, then CAPTURED after a
// capture through the Online API, with the capture among its operations;
// the first, voided, shows VOIDED.
func TestConsolePreAuths(t *testing.T) {
	d, a := startAPI(t)
	info := d.Info()
	mobile := info.Terminals[1] // approves without a person
	before := a.preAuth(mobile.TerminalID, 1500)
	a.awaitAuth(before, instore.AuthOpen, 0)
	p := openConsole(t, info, 1366)
	row := func(ref, sel string) string {
		return fmt.Sprintf(`(document.querySelector('#preauths tr[data-ref="%s"] %s') || {}).textContent`, ref, sel)
	}
	p.poll("the pre-auth made before shows OPEN", row(before, "td.auth")+` === "OPEN" && `+row(before, "td.authorized")+` === "SEK 15.00"`)

	pre := a.preAuth(mobile.TerminalID, 2000)
	p.poll("the new pre-auth shows OPEN", row(pre, "td.auth")+` === "OPEN" && `+row(pre, "td.authorized")+` === "SEK 20.00" && `+row(pre, "td.captured")+` === "SEK 0.00"`)
	if exp := eval[string](p, row(pre, "td.expires")); exp == "" {
		t.Errorf("the pre-auth shows no expiry")
	}
	inc := a.op("/increment", pre, 500)
	p.poll("the increment shows", row(pre, "td.authorized")+` === "SEK 25.00"`)
	capture := a.op("/capture", pre, 2400)
	p.poll("the pre-auth shows CAPTURED", row(pre, "td.auth")+` === "CAPTURED" && `+row(pre, "td.captured")+` === "SEK 24.00"`)
	// Its operations, oldest first, each with its own status (the
	// capture's final event may follow the authorisation's).
	ops := fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#preauths tr[data-ref="%s"] li.op')].map((li) => [li.dataset.ref, li.textContent]))`, pre)
	want, _ := json.Marshal([][2]string{{inc, "INCREMENTSEK 5.00APPROVED (0)"}, {capture, "CAPTURESEK 24.00APPROVED (0)"}})
	p.poll("the operations show", fmt.Sprintf("%s === %q", ops, want))
	a.op("/void", before, 0)
	p.poll("the voided pre-auth shows VOIDED", row(before, "td.auth")+` === "VOIDED"`)
	p.noErrors()
}

package sandbox_test

import (
	"fmt"
	"testing"

	"github.com/instore-dev/instore"
)

// TestConsoleCardNetwork: the console's card-network switch in the system
// Chromium. Taking a virtual terminal's card network down shows it with
// its floor limit and queue; a sale then shows approved offline and
// QUEUED in the transactions; with the next forward declined and the
// network back up, it shows DECLINED.
func TestConsoleCardNetwork(t *testing.T) {
	d, a := startAPI(t)
	info := d.Info()
	mobile := info.Terminals[1] // approves without a person
	p := openConsole(t, info, 1366)
	device := fmt.Sprintf(`article[data-serial="%s"]`, mobile.SerialNumber)
	text := func(sel string) string {
		return fmt.Sprintf(`(document.querySelector('%s %s') || {}).textContent`, device, sel)
	}
	p.poll("the device shows", text(".toggle-network")+` === "Card network down"`)
	p.click(device + " .toggle-network")
	p.poll("the card network shows down", text(".network")+` === "Card network down · floor limit 5000 · queue 0/10" && `+
		text(".toggle-network")+` === "Card network up"`)

	var tx instore.TransactionWire
	a.do("POST", "/in-store/api/v1/purchase", map[string]any{"terminalId": mobile.TerminalID, "amount": 1200, "currency": "SEK"}, 201, &tx)
	row := fmt.Sprintf(`(document.querySelector('#transactions tr[data-ref="%s"] td.status') || {}).textContent`, tx.OnlineAPIRefID)
	p.poll("the sale shows approved offline", row+` === "APPROVED (0) · offline QUEUED"`)
	p.poll("the queue shows it", text(".network")+` === "Card network down · floor limit 5000 · queue 1/10"`)

	p.click(device + " .next-forward")
	p.poll("the next forward shows declined", text(".network")+` === "Card network down · floor limit 5000 · queue 1/10 · Next forward: DECLINED"`)
	p.click(device + " .toggle-network")
	p.poll("the sale shows DECLINED", row+` === "APPROVED (0) · offline DECLINED"`)
	p.poll("the network shows up, nothing left", text(".network")+` === "" && `+text(".toggle-network")+` === "Card network down"`)
	p.noErrors()
}

package sim

import (
	"strings"
	"sync"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// What a transaction shows on the terminal's screen.

// kindLabels name on the screen the commands that are not a purchase.
var kindLabels = map[string]string{
	protocol.TypeRefund:    "Refund",
	protocol.TypePreAuth:   "Pre-auth",
	protocol.TypeIncrement: "Increment",
	protocol.TypeCapture:   "Capture",
	protocol.TypeVoid:      "Void",
}

// amountScreen is what tx shows when it starts: its kind (none for a
// purchase), its amount and what it asks of the cardholder: the card (a
// purchase, a refund, a pre-auth), the app (paymentMethodId), or nothing
// for an increment, capture or void, which the terminal authorises at
// once with the authorisation it holds ("Capture SEK 25.00 - No card,
// authorizing").
func amountScreen(tx *txn) string {
	a := formatAmount(tx.pay.Amount, tx.pay.Currency)
	if l, ok := kindLabels[tx.kind]; ok {
		a = l + " " + a
	}
	switch {
	case cardless(tx.kind):
		return a + " - No card, authorizing"
	case tx.pay.PaymentMethodID != nil:
		return a + " - Confirm in app"
	}
	return a + " - Present card"
}

// stageScreen is what tx shows at a progress stage. A cardless command
// keeps its amount screen, which says it is authorising.
func stageScreen(tx *txn, stage instore.Progress) string {
	if !cardless(tx.kind) {
		switch stage {
		case StageWaitingForPIN:
			return "Enter PIN"
		case StageAuthorizing:
			return "Authorizing"
		}
	}
	return amountScreen(tx)
}

var statusCodes = sync.OnceValue(func() map[instore.TransactionStatus]string {
	m := instore.DefaultMetadata()
	codes := map[instore.TransactionStatus]string{}
	for _, c := range m.TransactionStatuses {
		codes[instore.TransactionStatus(c.ID)] = c.Code
	}
	return codes
})

// outcomeText is how screen and receipt word a status: APPROVED, DECLINED,
// or the status code with spaces (WRONG PIN).
func outcomeText(status instore.TransactionStatus) string {
	switch status {
	case instore.StatusApproved:
		return "APPROVED"
	case instore.StatusTransactionDeclined:
		return "DECLINED"
	}
	if c, ok := statusCodes()[status]; ok {
		return strings.ReplaceAll(c, "_", " ")
	}
	return "ERROR"
}

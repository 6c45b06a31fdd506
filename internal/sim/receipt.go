package sim

import (
	"crypto/sha256"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// ReceiptWidth is the most characters a receipt line has.
const ReceiptWidth = 40

// testCards are the cards the virtual terminal "reads": well-known test
// PANs, never real ones.
var testCards = []struct{ brand, pan string }{
	{"VISA", "4761739001010119"},
	{"MASTERCARD", "5413330089010434"},
}

// Entry modes of a result.
const (
	EntryContactless = "CONTACTLESS"
	EntryChip        = "CHIP"
	EntryApp         = "APP" // paid with a payment method, no card
)

// cardRead reports whether an outcome comes after the card (or payment
// app) was read: those results carry card data and a full receipt; the
// others (busy, offline, must update, technical error, aborted) only their
// outcome lines.
func cardRead(status instore.TransactionStatus) bool {
	switch status {
	case instore.StatusApproved, instore.StatusCardHasExpired, instore.StatusInvalidCard,
		instore.StatusCardIsBlocked, instore.StatusOfflineQueueIsFull,
		instore.StatusTransactionDeclined, instore.StatusWrongPIN:
		return true
	}
	return false
}

// buildResult is the result message of tx ending with status.
func buildResult(tx *txn, status instore.TransactionStatus, terminalID string, now time.Time) protocol.Result {
	res := protocol.Result{StatusID: status}
	if cardRead(status) && tx.kind != protocol.TypeReversal {
		if tx.pay.PaymentMethodID != nil {
			id := *tx.pay.PaymentMethodID
			res.PaymentMethodID = &id
			res.EntryMode = EntryApp
		} else {
			// The same transaction always "reads" the same card; an
			// increment, capture or void its pre-auth's.
			h := sha256.Sum256([]byte(cardRef(tx)))
			card := testCards[int(h[0])%len(testCards)]
			res.CardBrand, res.MaskedPAN = card.brand, MaskPAN(card.pan)
			res.EntryMode = EntryContactless
			if h[1]%2 == 1 || status == instore.StatusWrongPIN {
				res.EntryMode = EntryChip
			}
		}
		if status == instore.StatusApproved {
			res.AuthorizationCode = authCode()
			res.TipAmount = tx.tip
		}
	}
	res.MerchantReceipt = receipt(tx, &res, terminalID, now, true)
	res.CustomerReceipt = receipt(tx, &res, terminalID, now, false)
	return res
}

const authCodeChars = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"

func authCode() string {
	b := make([]byte, 6)
	for i := range b {
		b[i] = authCodeChars[rand.N(len(authCodeChars))]
	}
	return string(b)
}

// MaskPAN keeps the first 6 and last 4 digits of a card number, the most a
// merchant may see.
func MaskPAN(pan string) string {
	if len(pan) <= 10 {
		return strings.Repeat("*", len(pan))
	}
	return pan[:6] + strings.Repeat("*", len(pan)-10) + pan[len(pan)-4:]
}

// lastFour hides all but the last 4 characters, as the customer's copy
// shows a card number.
func lastFour(pan string) string {
	if len(pan) <= 4 {
		return pan
	}
	return strings.Repeat("*", len(pan)-4) + pan[len(pan)-4:]
}

// receipt is the merchant's or the customer's copy for res.
func receipt(tx *txn, res *protocol.Result, terminalID string, now time.Time, merchant bool) []string {
	var b receiptBuilder
	b.center("instore virtual terminal")
	if merchant {
		b.center("MERCHANT COPY")
	} else {
		b.center("CUSTOMER COPY")
	}
	if !cardRead(res.StatusID) {
		b.center(outcomeText(res.StatusID))
		b.pair("Reference", tx.ref)
		return b.lines
	}
	if terminalID != "" {
		b.pair("Terminal", terminalID)
	}
	b.line(now.UTC().Format("2006-01-02 15:04:05") + " UTC")
	b.line(strings.ToUpper(tx.kind))
	if tx.kind == protocol.TypeReversal { // no amount or card: it undoes one
		b.center(outcomeText(res.StatusID))
		b.pair("Reference", tx.ref)
		return b.lines
	}
	b.pair("Amount", formatAmount(tx.pay.Amount, tx.pay.Currency))
	if tx.pay.CashbackAmount > 0 {
		b.pair("Cashback", formatAmount(tx.pay.CashbackAmount, tx.pay.Currency))
	}
	if tx.pay.Tip != nil && res.StatusID == instore.StatusApproved {
		b.pair("Tip", formatAmount(res.TipAmount, tx.pay.Currency))
		b.pair("Total", formatAmount(tx.pay.Amount+res.TipAmount, tx.pay.Currency))
	}
	if tx.pay.VATAmount != nil {
		b.pair("VAT", formatAmount(*tx.pay.VATAmount, tx.pay.Currency))
	}
	if res.CardBrand != "" {
		pan := res.MaskedPAN
		if !merchant {
			pan = lastFour(pan)
		}
		b.line(res.CardBrand)
		b.pair("Card", pan)
	}
	if res.PaymentMethodID != nil {
		name := tx.pay.PaymentMethodCode
		if name == "" {
			name = strconv.Itoa(*res.PaymentMethodID)
		}
		b.pair("Payment method", name)
	}
	if res.EntryMode != "" {
		b.pair("Entry mode", res.EntryMode)
	}
	if res.AuthorizationCode != "" {
		b.pair("Auth code", res.AuthorizationCode)
	}
	b.center(outcomeText(res.StatusID))
	b.pair("Reference", tx.ref)
	if tx.pay.OriginalRef != "" {
		b.pair("Original reference", tx.pay.OriginalRef)
	}
	if tx.pay.ECRReference != "" {
		b.pair("ECR reference", tx.pay.ECRReference)
	}
	return b.lines
}

// receiptBuilder lays out lines of at most ReceiptWidth characters.
type receiptBuilder struct{ lines []string }

// line adds s, wrapped at ReceiptWidth.
func (b *receiptBuilder) line(s string) {
	for utf8.RuneCountInString(s) > ReceiptWidth {
		r := []rune(s)
		b.lines = append(b.lines, string(r[:ReceiptWidth]))
		s = string(r[ReceiptWidth:])
	}
	b.lines = append(b.lines, s)
}

func (b *receiptBuilder) center(s string) {
	n := utf8.RuneCountInString(s)
	if n >= ReceiptWidth {
		b.line(s)
		return
	}
	b.lines = append(b.lines, strings.Repeat(" ", (ReceiptWidth-n)/2)+s)
}

// pair puts label left and value right on one line, or value on the lines
// below label when both do not fit.
func (b *receiptBuilder) pair(label, value string) {
	n := utf8.RuneCountInString(label) + utf8.RuneCountInString(value)
	if n < ReceiptWidth {
		b.lines = append(b.lines, label+strings.Repeat(" ", ReceiptWidth-n)+value)
		return
	}
	b.line(label)
	b.line(value)
}

// formatAmount writes an amount in minor units with its currency's
// exponent (the ISO 4217 table of package instore): "SEK 12.50", "JPY 1250", "KWD 1.250",
// "CLF 1.2500"; an unknown code gets 2 decimals.
func formatAmount(amount int64, currency string) string {
	currency = strings.ToUpper(currency)
	return strings.TrimSpace(currency + " " + instore.FormatMinor(amount, currency))
}

// cardless reports whether a command of kind is completed without a card:
// an increment, capture or void, with the authorisation the terminal holds
// for its pre-auth.
func cardless(kind string) bool {
	return kind == protocol.TypeIncrement || kind == protocol.TypeCapture || kind == protocol.TypeVoid
}

// cardRef is the reference whose card tx "reads": its own, or for a
// cardless command its pre-auth's.
func cardRef(tx *txn) string {
	if cardless(tx.kind) && tx.pay.OriginalRef != "" {
		return tx.pay.OriginalRef
	}
	return tx.ref
}

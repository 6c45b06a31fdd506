package protocol

import (
	"slices"
	"strings"

	"github.com/instore-dev/instore"
)

// Limits of data fields.
const (
	// MaxTextLen bounds free-text fields (model, software version) in
	// characters. The ECR reference and print lines have the Online API's
	// limits (instore.MaxECRReferenceLen, instore.MaxPrintLineLen).
	MaxTextLen = 64
	// MaxReceiptLines and MaxReceiptLineLen bound each receipt copy, like
	// the lines of a print job on the Online API (instore.MaxPrintLines,
	// instore.MaxPrintLineLen).
	MaxReceiptLines   = 200
	MaxReceiptLineLen = 64
	// MaxLines and MaxLineLen are the larger of the receipt's and the
	// print job's limits, which MaxFrameBytes is derived from.
	MaxLines   = max(MaxReceiptLines, instore.MaxPrintLines)
	MaxLineLen = max(MaxReceiptLineLen, instore.MaxPrintLineLen)
	// MaxAmount is the largest amount in minor units.
	MaxAmount = 99999999
)

// validText reports whether s is free text the protocol carries
// (instore.ValidText, the rule the Online API's request validation uses
// too), and not empty when required.
func validText(s string, max int, required bool) bool {
	if s == "" {
		return !required
	}
	return instore.ValidText(s, max)
}

func textError(field string, max int, required bool) error {
	if required {
		return errorf(field, "must be 1-%d characters without control characters", max)
	}
	return errorf(field, "must be at most %d characters without control characters", max)
}

// Validate checks a hello. The protocol number is only checked to be
// present: which versions are supported is the server's decision.
func (h *Hello) Validate() error {
	switch {
	case h.Protocol < 1:
		return errorf("data.protocol", "required, 1 or more")
	case !validText(h.Model, MaxTextLen, true):
		return textError("data.model", MaxTextLen, true)
	case !validText(h.SoftwareVersion, MaxTextLen, true):
		return textError("data.softwareVersion", MaxTextLen, true)
	}
	return nil
}

// Validate checks a link code.
func (l *LinkCode) Validate() error {
	if !validID(l.Code) {
		return errorf("data.code", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	}
	return nil
}

// Validate checks a linked message.
func (l *Linked) Validate() error {
	if !validID(l.TerminalID) {
		return errorf("data.terminalId", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	}
	if !validText(l.MinSoftwareVersion, MaxTextLen, false) {
		return textError("data.minSoftwareVersion", MaxTextLen, false)
	}
	return nil
}

// Validate checks a payment command (Payment), its amount at most
// MaxAmount.
func (p *Payment) Validate() error { return p.validate(MaxAmount) }

// validate is Validate with the largest amount maxAmount.
func (p *Payment) validate(maxAmount int64) error {
	switch {
	case p.Amount < 1 || p.Amount > maxAmount:
		return errorf("data.amount", "must be 1-%d", maxAmount)
	case p.CashbackAmount < 0 || p.CashbackAmount > p.Amount:
		return errorf("data.cashbackAmount", "must be 0 up to the amount")
	case p.VATAmount != nil && (*p.VATAmount < 0 || *p.VATAmount > p.Amount):
		return errorf("data.vatAmount", "must be 0 up to the amount")
	case !validCurrency(p.Currency):
		return errorf("data.currency", "must be an ISO 4217 code of three capital letters")
	case p.PaymentMethodID != nil && *p.PaymentMethodID < 0:
		return errorf("data.paymentMethodId", "must be 0 or more")
	case !validText(p.ECRReference, instore.MaxECRReferenceLen, false):
		return textError("data.ecrReference", instore.MaxECRReferenceLen, false)
	case p.OriginalRef != "" && !validID(p.OriginalRef):
		return errorf("data.originalRef", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	case !validText(p.PaymentMethodCode, MaxIDLen, false):
		return textError("data.paymentMethodCode", MaxIDLen, false)
	case p.TipAmount < 0 || p.TipAmount > p.Amount:
		return errorf("data.tipAmount", "must be 0 up to the amount")
	}
	return validTip(p.Tip, p.Amount)
}

// ValidateAs checks a payment command of message type typ: Validate's
// rules, and which members each command takes (docs/terminal-protocol.md,
// section 5): a tip only a purchase or a preauth; cashback only a
// purchase; a payment method only a purchase or a refund; originalRef
// never a purchase or a preauth, always an increment, a capture or a
// void; tipAmount only a capture. A void's amount, the authorised amount
// it releases, is at most instore.MaxAuthorizedAmount (a pre-auth's tip
// and its increments may take it past MaxAmount); every other's at most
// MaxAmount.
func (p *Payment) ValidateAs(typ string) error {
	maxAmount := int64(MaxAmount)
	if typ == TypeVoid {
		maxAmount = instore.MaxAuthorizedAmount
	}
	if err := p.validate(maxAmount); err != nil {
		return err
	}
	onPreAuth := typ == TypeIncrement || typ == TypeCapture || typ == TypeVoid
	switch {
	case p.Tip != nil && typ != TypePurchase && typ != TypePreAuth:
		return errorf("data.tip", "a %s takes no tip", typ)
	case p.CashbackAmount != 0 && typ != TypePurchase:
		return errorf("data.cashbackAmount", "a %s takes no cashback", typ)
	case p.PaymentMethodID != nil && typ != TypePurchase && typ != TypeRefund:
		return errorf("data.paymentMethodId", "a %s takes no payment method", typ)
	case p.OriginalRef != "" && (typ == TypePurchase || typ == TypePreAuth):
		return errorf("data.originalRef", "a %s names no original", typ)
	case p.OriginalRef == "" && onPreAuth:
		return errorf("data.originalRef", "required for %s: the pre-authorisation it acts on", typ)
	case p.TipAmount != 0 && typ != TypeCapture:
		return errorf("data.tipAmount", "a %s takes no tipAmount", typ)
	}
	return nil
}

// validTip checks a payment's tip: the Online API's rules
// (instore.CheckTip), worded for the protocol.
func validTip(tip *instore.Tip, amount int64) error {
	var f instore.FieldErrors
	instore.CheckTip(&f, "data.tip", tip, &amount)
	if len(f) > 0 {
		return errorf(strings.ReplaceAll(f[0].Field, "/", "."), "%s", f[0].Message)
	}
	return nil
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// CancelReasons are the reasons a cancel carries.
var CancelReasons = []string{instore.CancelByECR, instore.CancelDeadline, instore.CancelAckTimeout}

// Validate checks a cancel.
func (c *Cancel) Validate() error {
	if !slices.Contains(CancelReasons, c.Reason) {
		return errorf("data.reason", "must be one of ECR, DEADLINE, ACK_TIMEOUT")
	}
	return nil
}

// Validate checks a reversal: the ECR's names the purchase it reverses,
// a late approval's does not (its ref is that transaction).
func (r *Reversal) Validate() error {
	switch r.Reason {
	case instore.ReversalByECR:
		if !validID(r.OriginalRef) {
			return errorf("data.originalRef", "required with reason ECR: 1-%d printable ASCII characters without spaces", MaxIDLen)
		}
	case instore.ReversalLateApproval, instore.ReversalConfirmTimeout:
		if r.OriginalRef != "" {
			return errorf("data.originalRef", "not allowed with reason %s", r.Reason)
		}
	default:
		return errorf("data.reason", "must be ECR, LATE_APPROVAL or CONFIRM_TIMEOUT")
	}
	return nil
}

// Validate checks a print command.
func (p *Print) Validate() error {
	if len(p.Lines) < 1 || len(p.Lines) > instore.MaxPrintLines {
		return errorf("data.lines", "must hold 1-%d lines", instore.MaxPrintLines)
	}
	for _, l := range p.Lines {
		if !validText(l, instore.MaxPrintLineLen, false) {
			return textError("data.lines", instore.MaxPrintLineLen, false)
		}
	}
	return nil
}

// Validate checks a print result.
func (p *PrintResult) Validate() error {
	if p.StatusID < instore.PrintSuccess || p.StatusID > instore.PrintTimeout {
		return errorf("data.statusId", "must be a print status id 0-6")
	}
	return nil
}

// Validate checks a progress report.
func (p *Progress) Validate() error {
	if !slices.Contains(instore.TerminalStages, p.Stage) {
		return errorf("data.stage", "must be one of WAITING_FOR_CARD, WAITING_FOR_PIN, AUTHORIZING")
	}
	return nil
}

// Validate checks a result. The status is a final outcome a terminal can
// reach (APPROVED 0 up to WRONG_PIN 12: not REVERSED or PENDING), and the
// masked PAN shows at most the first 6 and last 4 digits.
func (r *Result) Validate() error {
	switch {
	case r.StatusID < instore.StatusApproved || r.StatusID > instore.StatusWrongPIN:
		return errorf("data.statusId", "must be a final status a terminal reports, 0-%d", instore.StatusWrongPIN)
	case !validText(r.EntryMode, 32, false):
		return textError("data.entryMode", 32, false)
	case !validText(r.CardBrand, 32, false):
		return textError("data.cardBrand", 32, false)
	case !validMaskedPAN(r.MaskedPAN):
		return errorf("data.maskedPan", "must be at most 19 digits and '*' with at most 10 digits shown")
	case r.AuthorizationCode != "" && (len(r.AuthorizationCode) > 16 || !validID(r.AuthorizationCode)):
		return errorf("data.authorizationCode", "must be at most 16 printable ASCII characters without spaces")
	case r.PaymentMethodID != nil && *r.PaymentMethodID < 0:
		return errorf("data.paymentMethodId", "must be 0 or more")
	case r.TipAmount < 0 || r.TipAmount > MaxAmount:
		return errorf("data.tipAmount", "must be 0-%d", MaxAmount)
	case r.Offline && r.StatusID != instore.StatusApproved:
		return errorf("data.offline", "only an APPROVED result is approved offline")
	}
	if err := validReceipt("data.customerReceipt", r.CustomerReceipt); err != nil {
		return err
	}
	return validReceipt("data.merchantReceipt", r.MerchantReceipt)
}

func validMaskedPAN(s string) bool {
	if len(s) > 19 {
		return false
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '*':
		default:
			return false
		}
	}
	return digits <= 10
}

func validReceipt(field string, lines []string) error {
	if len(lines) > MaxReceiptLines {
		return errorf(field, "at most %d lines", MaxReceiptLines)
	}
	for _, l := range lines {
		if !validText(l, MaxReceiptLineLen, false) {
			return errorf(field, "lines must be at most %d characters without control characters", MaxReceiptLineLen)
		}
	}
	return nil
}

// Validate checks an update command.
func (u *Update) Validate() error {
	switch {
	case !validID(u.PackageID):
		return errorf("data.packageId", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	case !validText(u.Name, 200, true):
		return textError("data.name", 200, true)
	case !validText(u.Version, MaxTextLen, true):
		return textError("data.version", MaxTextLen, true)
	case u.SizeBytes < 1:
		return errorf("data.sizeBytes", "must be 1 or more")
	case len(u.SHA256) != 64 || strings.Trim(u.SHA256, "0123456789abcdef") != "":
		return errorf("data.sha256", "must be 64 lower-case hex digits")
	}
	return nil
}

// Validate checks an update-status report.
func (u *UpdateStatus) Validate() error {
	switch u.Status {
	case UpdateDownloading:
	case UpdateInstalled:
		if !validText(u.SoftwareVersion, MaxTextLen, true) {
			return textError("data.softwareVersion", MaxTextLen, true)
		}
	case UpdateFailed:
		if !validText(u.Reason, instore.MaxUpdateReasonLen, true) {
			return textError("data.reason", instore.MaxUpdateReasonLen, true)
		}
	default:
		return errorf("data.status", "must be DOWNLOADING, INSTALLED or FAILED")
	}
	if !validText(u.SoftwareVersion, MaxTextLen, false) {
		return textError("data.softwareVersion", MaxTextLen, false)
	}
	if !validText(u.Reason, instore.MaxUpdateReasonLen, false) {
		return textError("data.reason", instore.MaxUpdateReasonLen, false)
	}
	return nil
}

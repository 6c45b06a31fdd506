package instore

import (
	"context"
	"errors"
)

// ErrOffline is returned by a Gateway when the device has no session.
var ErrOffline = errors.New("device offline")

// Cancel reasons sent to a terminal with SendCancel.
const (
	CancelByECR      = "ECR"         // the cashier cancelled: abort, answer ABORTED_BY_CASHIER
	CancelDeadline   = "DEADLINE"    // no result before the deadline: abort
	CancelAckTimeout = "ACK_TIMEOUT" // the ack did not come in time: drop the command
)

// Reversal reasons a reversal message carries.
const (
	// ReversalByECR: the ECR asked for it (POST /reversal); the message's
	// ref is a new REVERSAL transaction, acknowledged and reported on like
	// a purchase (SendPayment).
	ReversalByECR = "ECR"
	// ReversalLateApproval: the terminal approved a transaction the
	// service had already ended (WP25, WP36); the ref is that transaction,
	// the terminal confirms the message and reports nothing (SendReversal).
	ReversalLateApproval = "LATE_APPROVAL"
	// ReversalConfirmTimeout: the ECR did not confirm an APPROVED sale
	// that asked for confirmation (confirmWithinSeconds) within its
	// window; the service recorded it REVERSED. As LATE_APPROVAL: the ref
	// is that transaction, the terminal confirms the message and reports
	// nothing.
	ReversalConfirmTimeout = "CONFIRM_TIMEOUT"
)

// Gateway is the terminal gateway as the domain sees it: the sessions of
// connected devices, by serial number. Send methods return once the message
// is handed to the session (not when the terminal acted on it), or
// ErrOffline. The messages the service owes a device until it confirms
// them (cancel, reversal, print: effect.go) are sent with the effect's id
// as message id, so that every send of one carries the same id and the
// device's confirm names it.
type Gateway interface {
	// Online reports whether the device has a session: messages can be
	// sent to it.
	Online(serial string) bool
	// Ready reports whether the device is online and was sent everything
	// its hello calls for (what it is owed first: the cancels of
	// transactions the server ended): it may take a new command. A device
	// that just reconnected is online a moment before it is ready.
	Ready(serial string) bool
	// SendPayment sends the command of a PENDING transaction to its
	// device: a purchase, a refund, or the ECR's reversal (a REVERSAL
	// transaction: a reversal message with reason ReversalByECR and the
	// purchase it reverses).
	SendPayment(ctx context.Context, serial string, t *Transaction) error
	// SendCancel asks the device to stop the transaction ref for reason
	// (CancelByECR, CancelDeadline, CancelAckTimeout); id is the message id.
	SendCancel(ctx context.Context, serial, id, ref, reason string) error
	// SendReversal asks the device to reverse the approved transaction ref
	// at once, for reason ReversalLateApproval (the service had ended it)
	// or ReversalConfirmTimeout (the ECR did not confirm it in time): the
	// service reversed it on its own; id is the message id.
	SendReversal(ctx context.Context, serial, id, ref, reason string) error
	// SendPrint asks the device to print lines for the print job printID;
	// id is the message id.
	SendPrint(ctx context.Context, serial, id, printID string, lines []string) error
	// SendLinked tells the device its terminal ID and, with it, the
	// minimum software version of its model (see MinSoftwareVersion).
	SendLinked(ctx context.Context, serial, terminalID string) error
	SendLinkCode(ctx context.Context, serial, code string) error
	// SendUpdate asks the device to install the package of update u; the
	// device reports with TerminalUpdateStatus.
	SendUpdate(ctx context.Context, serial string, u *Update, p *Package) error
}

// DeviceHello is what a device says when it connects.
type DeviceHello struct {
	Model           string
	SoftwareVersion string
}

// TerminalResult is a final outcome a terminal reported for a transaction.
type TerminalResult struct {
	// MessageID is the terminal's id of the result message; a resent result
	// carries the same id.
	MessageID string
	Ref       string
	StatusID  TransactionStatus
	Result    Result
	// TipAmount is the tip the terminal charged (0: none), checked by
	// CheckTipAmount.
	TipAmount int64
}

// TerminalEvents is what the gateway reports to the domain. Each method
// returns once its effect is committed; the gateway confirms a result to
// the terminal only after TerminalResult returned nil.
type TerminalEvents interface {
	// AuthenticateDevice checks a device's serial number and secret.
	AuthenticateDevice(ctx context.Context, serial, secret string) (*Device, error)
	// DeviceConnected runs after the device's hello; the domain answers
	// with the link code or the terminal ID the device shows.
	DeviceConnected(ctx context.Context, serial string, h DeviceHello) error
	// DeviceDisconnected runs when the device's last session ended.
	DeviceDisconnected(serial string)
	TerminalAcknowledged(ctx context.Context, serial, ref string) error
	TerminalProgress(ctx context.Context, serial, ref string, stage Progress) error
	TerminalResult(ctx context.Context, serial string, r TerminalResult) error
	// TerminalPrintResult records the final status of a print job.
	TerminalPrintResult(ctx context.Context, serial, printID string, statusID PrintStatus) error
	// TerminalConfirmed records the device's confirm of the server message
	// messageID: a message owed to it (effect.go) is then not sent again.
	TerminalConfirmed(ctx context.Context, serial, messageID string) error
	// TerminalUpdateStatus records what the device reported about the
	// software update updateID; the gateway confirms the report to the
	// device once it returned nil.
	TerminalUpdateStatus(ctx context.Context, serial, updateID string, r UpdateReport) error
	// TerminalForwarded records what the device reported about forwarding
	// an offline approval (forwarding.go); the gateway confirms the report
	// to the device once it returned nil.
	TerminalForwarded(ctx context.Context, serial string, r ForwardReport) error
}

// NoGateway is the Gateway of a Service that reaches no device (instore
// admin, tests of the store): every device is offline, and every send
// says so (ErrOffline); what is owed stays owed in the store for the
// serving process to deliver.
type NoGateway struct{}

func (NoGateway) Online(string) bool { return false }
func (NoGateway) Ready(string) bool  { return false }
func (NoGateway) SendPayment(context.Context, string, *Transaction) error {
	return ErrOffline
}
func (NoGateway) SendCancel(context.Context, string, string, string, string) error {
	return ErrOffline
}
func (NoGateway) SendReversal(context.Context, string, string, string, string) error {
	return ErrOffline
}
func (NoGateway) SendPrint(context.Context, string, string, string, []string) error {
	return ErrOffline
}
func (NoGateway) SendLinked(context.Context, string, string) error { return ErrOffline }
func (NoGateway) SendLinkCode(context.Context, string, string) error {
	return ErrOffline
}
func (NoGateway) SendUpdate(context.Context, string, *Update, *Package) error {
	return ErrOffline
}

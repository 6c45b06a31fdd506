package client

import (
	"context"
	"net/url"

	"github.com/instore-dev/instore"
)

// SandboxDevice is a virtual device of a sandbox or demo server.
type SandboxDevice struct {
	SerialNumber string `json:"serialNumber"`
	// Model is countertop, mobile or pinpad.
	Model string `json:"model"`
	// TerminalID is the terminal ID linked to the device; "" while
	// unlinked.
	TerminalID string `json:"terminalId"`
	Online     bool   `json:"online"`
	// Screen is what the device's display shows.
	Screen string `json:"screen"`
	// LinkCode is the code shown while unlinked, for LinkTerminal.
	LinkCode string `json:"linkCode"`
	// CardNetwork is its card network and offline queue (offline.go).
	CardNetwork SandboxCardNetworkState `json:"cardNetwork"`
}

// The sandbox control API (/sandbox/v1) exists only on a server in sandbox
// mode (instore demo, instore serve --sandbox); elsewhere it answers 404
// not-found. It takes the Online API credentials.

func (c *Client) sandboxPost(ctx context.Context, terminalID, action, route string, body any, opts []CallOption) (*SandboxDevice, error) {
	return postAt[SandboxDevice](ctx, c, "/sandbox/v1/terminals/"+url.PathEscape(terminalID)+"/"+action, route, body, opts)
}

// SandboxDevices lists the virtual devices the merchant may link or use,
// with their link codes, so a program can link one without a person
// reading its screen.
func (c *Client) SandboxDevices(ctx context.Context, opts ...CallOption) ([]*SandboxDevice, error) {
	return getList[*SandboxDevice](ctx, c, "/sandbox/v1/devices", "/sandbox/v1/devices", "devices", opts)
}

// SandboxNextTip sets the tip (minor units; 0: no tip) the cardholder
// picks on the virtual terminal's next transaction that asks for one
// (TipPrompt, TipEnterTotal): the one showing its tip prompt now, or the
// next. A tip above the amount is refused by the terminal: none is charged.
func (c *Client) SandboxNextTip(ctx context.Context, terminalID string, tipAmount int64, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "next-tip", "/sandbox/v1/terminals/{terminalId}/next-tip", map[string]int64{"tipAmount": tipAmount}, opts)
}

// SandboxNextOutcome makes the next transaction on the virtual terminal
// end with statusID (0-12), whatever its amount.
func (c *Client) SandboxNextOutcome(ctx context.Context, terminalID string, statusID instore.TransactionStatus, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "next-outcome", "/sandbox/v1/terminals/{terminalId}/next-outcome", map[string]int{"statusId": int(statusID)}, opts)
}

// SandboxOffline takes the virtual terminal off the gateway until
// SandboxOnline, as if it lost its network.
func (c *Client) SandboxOffline(ctx context.Context, terminalID string, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "offline", "/sandbox/v1/terminals/{terminalId}/offline", nil, opts)
}

// SandboxOnline lets the virtual terminal connect again; it resends any
// result the server has not confirmed.
func (c *Client) SandboxOnline(ctx context.Context, terminalID string, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "online", "/sandbox/v1/terminals/{terminalId}/online", nil, opts)
}

// SandboxNextPrint makes the next print job on the virtual terminal end
// with printStatusID (0-6, e.g. 2 OUT_OF_PAPER).
func (c *Client) SandboxNextPrint(ctx context.Context, terminalID string, printStatusID instore.PrintStatus, opts ...CallOption) (*SandboxDevice, error) {
	return c.sandboxPost(ctx, terminalID, "printer", "/sandbox/v1/terminals/{terminalId}/printer", map[string]int{"statusId": int(printStatusID)}, opts)
}

// SandboxNextInstall makes the next software update the virtual terminal
// installs end FAILED with reason (fail true), or clears that (fail
// false).
func (c *Client) SandboxNextInstall(ctx context.Context, terminalID string, fail bool, reason string, opts ...CallOption) (*SandboxDevice, error) {
	body := struct {
		Fail   bool   `json:"fail"`
		Reason string `json:"reason,omitempty"`
	}{fail, reason}
	return c.sandboxPost(ctx, terminalID, "next-install", "/sandbox/v1/terminals/{terminalId}/next-install", body, opts)
}

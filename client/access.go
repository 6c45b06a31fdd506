package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/instore-dev/instore"
)

// Access API 2.0 manages terminal IDs and terminal software. It is a
// separate surface: its own base URL (Config.AccessAPIURL) and its own
// customer credentials (Config.Access); its paths are relative to its base
// URL. Each call below fails at once when no Access API URL is configured.

// AllocatedTerminal is the answer of POST /getTerminalId: a new terminal
// ID, unique across the service and never reused.
type AllocatedTerminal struct {
	TerminalID   string    `json:"terminalId"`
	CustomerID   string    `json:"customerId"`
	MerchantID   string    `json:"merchantId"`
	SerialNumber string    `json:"serialNumber"`
	Model        string    `json:"model"`
	CreatedAt    time.Time `json:"createdAt"`
}

// GetTerminalIDParams is the body of POST /getTerminalId.
type GetTerminalIDParams struct {
	CustomerID string `json:"customerId"`
	// MerchantID is the merchant that may use the terminal ID.
	MerchantID   string `json:"merchantId,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
	Model        string `json:"model,omitempty"`
}

// TerminalInfo is the answer of POST /getTerminalInfo.
type TerminalInfo struct {
	TerminalID      string `json:"terminalId"`
	CustomerID      string `json:"customerId"`
	MerchantID      string `json:"merchantId"`
	SerialNumber    string `json:"serialNumber"`
	Model           string `json:"model"`
	SoftwareVersion string `json:"softwareVersion"`
	// MinSoftwareVersion is what the newest mandatory package of the
	// model sets; below it purchases end TERMINAL_MUST_UPDATE (10).
	MinSoftwareVersion string     `json:"minSoftwareVersion"`
	Linked             bool       `json:"linked"`
	Online             bool       `json:"online"`
	LastSeenAt         *time.Time `json:"lastSeenAt"`
	// PendingUpdate is the unfinished (SCHEDULED or DOWNLOADING) update,
	// or nil.
	PendingUpdate *Update `json:"pendingUpdate"`
	// LastUpdate is the latest update whatever its status, or nil: follow
	// an update here until it is INSTALLED or FAILED.
	LastUpdate *Update `json:"lastUpdate"`
}

// Package is a terminal software package of a model.
type Package struct {
	PackageID string `json:"packageId"`
	Model     string `json:"model"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Mandatory: the newest mandatory package of a model sets the
	// minimum software version; a terminal below it answers every
	// purchase TERMINAL_MUST_UPDATE (10).
	Mandatory  bool      `json:"mandatory"`
	SizeBytes  int64     `json:"sizeBytes"`
	SHA256     string    `json:"sha256"`
	ReleasedAt time.Time `json:"releasedAt"`
}

// Update is a software update scheduled for a terminal.
type Update struct {
	UpdateID   string `json:"updateId"`
	TerminalID string `json:"terminalId"`
	PackageID  string `json:"packageId"`
	// Status is SCHEDULED, DOWNLOADING, INSTALLED or FAILED.
	Status instore.UpdateStatus `json:"status"`
	// Reason says why it FAILED.
	Reason string `json:"reason"`
	// SoftwareVersion is what the device reported when INSTALLED.
	SoftwareVersion string     `json:"softwareVersion"`
	NotBefore       *time.Time `json:"notBefore"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
}

// Final reports whether the update ended: INSTALLED or FAILED.
func (u *Update) Final() bool { return u.Status == "INSTALLED" || u.Status == "FAILED" }

// CreateUpdateParams is the body of POST /terminal/createUpdate.
type CreateUpdateParams struct {
	TerminalID string `json:"terminalId"`
	PackageID  string `json:"packageId"`
	// NotBefore delays delivery; zero sends it when the terminal is
	// next online and idle.
	NotBefore *time.Time `json:"notBefore,omitempty"`
}

// accessPostAs is a POST to the Access API route of an answer that is one
// T.
func accessPostAs[T any](ctx context.Context, c *Client, route string, body any, opts []CallOption) (*T, error) {
	return callAs[T](ctx, c, call{s: c.access, method: http.MethodPost, path: route, route: route, body: body, opts: opts})
}

// GetTerminalID allocates a new terminal ID (eight digits) to a customer,
// optionally for one of its merchants and a device.
func (c *Client) GetTerminalID(ctx context.Context, p GetTerminalIDParams, opts ...CallOption) (*AllocatedTerminal, error) {
	return accessPostAs[AllocatedTerminal](ctx, c, "/getTerminalId", p, opts)
}

// GetTerminalInfo returns a terminal ID's binding, device, software and
// pending update.
func (c *Client) GetTerminalInfo(ctx context.Context, terminalID string, opts ...CallOption) (*TerminalInfo, error) {
	return accessPostAs[TerminalInfo](ctx, c, "/getTerminalInfo", map[string]string{"terminalId": terminalID}, opts)
}

// GetPackages lists the software packages of a device model, newest
// first; an unknown model has none.
func (c *Client) GetPackages(ctx context.Context, customerID, model string, opts ...CallOption) ([]*Package, error) {
	var out struct {
		Packages []*Package `json:"packages"`
	}
	_, err := c.do(ctx, call{
		s: c.access, method: http.MethodGet,
		path:  "/terminal/getPackages/" + url.PathEscape(customerID) + "/" + url.PathEscape(model),
		route: "/terminal/getPackages/{customerId}/{model}", opts: opts,
	}, &out)
	if err != nil {
		return nil, err
	}
	return out.Packages, nil
}

// CreateUpdate schedules a package for a terminal: SCHEDULED, then
// DOWNLOADING and INSTALLED or FAILED as the terminal reports.
func (c *Client) CreateUpdate(ctx context.Context, p CreateUpdateParams, opts ...CallOption) (*Update, error) {
	return accessPostAs[Update](ctx, c, "/terminal/createUpdate", p, opts)
}

// AccessOpenAPIDocument returns Access API 2.0's OpenAPI document (YAML)
// as its server serves it.
func (c *Client) AccessOpenAPIDocument(ctx context.Context, opts ...CallOption) ([]byte, error) {
	resp, err := c.do(ctx, call{s: c.access, method: http.MethodGet, path: "/openapi.yaml", route: "/openapi.yaml", opts: opts}, nil)
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

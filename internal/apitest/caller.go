package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// Caller calls an instore API (Online or Access) as one merchant: every
// request carries its subscription key and bearer token.
type Caller struct {
	Client *http.Client      // nil for http.DefaultClient; a Validator's Client to check the answers
	Base   string            // the API's base URL, without a trailing slash
	Key    string            // sent as Ocp-Apim-Subscription-Key
	Token  string            // sent as Authorization: Bearer
	Header map[string]string // more headers sent with every request
}

// Request makes a request of method to Base+path with body (JSON; no
// body when nil, with Content-Type when not), the credentials, c.Header
// and extra.
func (c Caller) Request(ctx context.Context, method, path string, body []byte, extra map[string]string) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Ocp-Apim-Subscription-Key", c.Key)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range []map[string]string{c.Header, extra} {
		for k, v := range h {
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// Send sends the request Request makes and returns the response with its
// body read and closed.
func (c Caller) Send(ctx context.Context, method, path string, body []byte, extra map[string]string) (*http.Response, []byte, error) {
	resp, err := c.do(ctx, method, path, body, extra)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// Open sends a GET of path (with the credentials, c.Header and extra) and
// returns the response unread, for a stream the caller reads and closes.
func (c Caller) Open(ctx context.Context, path string, extra map[string]string) (*http.Response, error) {
	return c.do(ctx, "GET", path, nil, extra)
}

func (c Caller) do(ctx context.Context, method, path string, body []byte, extra map[string]string) (*http.Response, error) {
	req, err := c.Request(ctx, method, path, body, extra)
	if err != nil {
		return nil, err
	}
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	return client.Do(req)
}

// Call sends body marshalled as JSON (no body when nil) and returns the
// status and body of the answer; a request that gets none fails tb.
func (c Caller) Call(tb testing.TB, method, path string, body any) (int, []byte) {
	tb.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			tb.Fatalf("%s %s: %v", method, path, err)
		}
	}
	resp, rb, err := c.Send(context.Background(), method, path, b, nil)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, rb
}

// Purchase starts the purchase body (POST /in-store/api/v1/purchase) and
// returns its onlineAPIRefId; an answer other than 201 fails tb.
func (c Caller) Purchase(tb testing.TB, body any) string {
	tb.Helper()
	st, b := c.Call(tb, "POST", "/in-store/api/v1/purchase", body)
	if st != 201 {
		tb.Fatalf("purchase = %d %s", st, b)
	}
	var tx struct {
		Ref string `json:"onlineAPIRefId"`
	}
	json.Unmarshal(b, &tx)
	return tx.Ref
}

package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// The load generator's requests of the Online API through net/http (the
// metadata clients and status readers use rawClient instead).

// authorize sets the Online API's authentication headers (authHeaders) on h.
func (e *env) authorize(h http.Header) {
	a := e.authHeaders()
	for i := 0; i+1 < len(a); i += 2 {
		h.Set(a[i], a[i+1])
	}
}

// roundTrip sends req with client and returns the answer's body, which
// must have status want.
func roundTrip(client *http.Client, req *http.Request, want int) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: HTTP %d %s", req.Method, req.URL.RequestURI(), resp.StatusCode, truncate(b, 200))
	}
	return b, nil
}

// api sends a request of the Online API with the run's credentials and
// decodes a JSON answer of status want into out (nil: discarded).
func (e *env) api(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.online+path, rd)
	if err != nil {
		return err
	}
	e.authorize(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	b, err := roundTrip(http.DefaultClient, req, want)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

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
		return nil, &statusError{method: req.Method, uri: req.URL.RequestURI(), status: resp.StatusCode, body: b}
	}
	return b, nil
}

// statusError is an answer of another status than the one wanted, with
// its body (a problem's errorCode is read from it whole).
type statusError struct {
	method, uri string
	status      int
	body        []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s", e.method, e.uri, e.status, truncate(e.body, 200))
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

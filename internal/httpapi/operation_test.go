package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// TestDecoded: the body is decoded strictly before the operation runs; the
// operation sees it with the request's principal; its result is answered,
// its error and a decoding error are returned, and nothing is answered
// then.
func TestDecoded(t *testing.T) {
	type req struct {
		TerminalID string `json:"terminalId"`
	}
	refused := errors.New("refused")
	for _, tc := range []struct {
		name, contentType, body string
		opErr                   error
		wantCalled              bool
		wantErr                 error // nil: any error when wantAnswer is ""
		wantAnswer              string
	}{
		{"decoded and answered", "application/json", `{"terminalId":"10000001"}`, nil, true, nil, "10000001 by mer_1"},
		{"unknown member", "application/json", `{"terminalId":"10000001","x":1}`, nil, false, nil, ""},
		{"wrong type", "application/json", `{"terminalId":5}`, nil, false, nil, ""},
		{"not JSON", "text/plain", `{"terminalId":"10000001"}`, nil, false, nil, ""},
		{"operation fails", "application/json", `{"terminalId":"10000001"}`, refused, true, refused, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			op := func(ctx context.Context, p *instore.Principal, r *req) (string, error) {
				called = true
				return r.TerminalID + " by " + p.MerchantID, tc.opErr
			}
			answered := ""
			h := Decoded(op, func(w http.ResponseWriter, out string) error { answered = out; return nil })
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			err := h(httptest.NewRecorder(), r, &instore.Principal{MerchantID: "mer_1"})
			if called != tc.wantCalled || answered != tc.wantAnswer {
				t.Errorf("called %v, answered %q; want %v, %q", called, answered, tc.wantCalled, tc.wantAnswer)
			}
			switch {
			case tc.wantAnswer != "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantAnswer == "" && err == nil:
				t.Error("no error")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

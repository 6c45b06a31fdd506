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

// TestNamed: the operation sees the path value and the principal; its
// result is answered, its error returned and nothing answered then.
func TestNamed(t *testing.T) {
	refused := errors.New("refused")
	for _, tc := range []struct {
		name  string
		opErr error
	}{{"answered", nil}, {"operation fails", refused}} {
		t.Run(tc.name, func(t *testing.T) {
			op := func(ctx context.Context, p *instore.Principal, id string) (string, error) {
				return id + " by " + p.MerchantID, tc.opErr
			}
			answered := ""
			h := Named("webhookId", op, func(w http.ResponseWriter, out string) error { answered = out; return nil })
			mux := http.NewServeMux()
			var err error
			mux.HandleFunc("GET /webhooks/{webhookId}", func(w http.ResponseWriter, r *http.Request) {
				err = h(w, r, &instore.Principal{MerchantID: "mer_1"})
			})
			mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/webhooks/wh_1", nil))
			if tc.opErr != nil {
				if !errors.Is(err, tc.opErr) || answered != "" {
					t.Errorf("err = %v, answered %q; want %v and no answer", err, answered, tc.opErr)
				}
				return
			}
			if err != nil || answered != "wh_1 by mer_1" {
				t.Errorf("err = %v, answered %q; want none, %q", err, answered, "wh_1 by mer_1")
			}
		})
	}
}

// TestListed: the list is answered 200 as the one member of an object,
// null when the operation lists nothing; an error is returned.
func TestListed(t *testing.T) {
	refused := errors.New("refused")
	for _, tc := range []struct {
		name     string
		list     []string
		opErr    error
		wantBody string
	}{
		{"two", []string{"a", "b"}, nil, `{"things":["a","b"]}`},
		{"none", nil, nil, `{"things":null}`},
		{"operation fails", nil, refused, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen string
			h := Listed("things", func(ctx context.Context, p *instore.Principal) ([]string, error) {
				seen = p.MerchantID
				return tc.list, tc.opErr
			})
			rec := httptest.NewRecorder()
			err := h(rec, httptest.NewRequest("GET", "/things", nil), &instore.Principal{MerchantID: "mer_1"})
			if seen != "mer_1" {
				t.Errorf("the operation saw principal %q, want mer_1", seen)
			}
			if tc.opErr != nil {
				if !errors.Is(err, tc.opErr) || rec.Body.Len() != 0 {
					t.Errorf("err = %v, body %q; want %v and no body", err, rec.Body, tc.opErr)
				}
				return
			}
			if err != nil || rec.Code != http.StatusOK || rec.Body.String() != tc.wantBody {
				t.Errorf("err = %v, %d %s; want none, 200 %s", err, rec.Code, rec.Body, tc.wantBody)
			}
		})
	}
}

package loadtest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAnswerTally: the failover's tries are told apart by what answered
// them: a 201, a problem's status and errorCode (read from the whole
// body), a bare status, a client time-out and a refused connection, most
// frequent first.
func TestAnswerTally(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(201)
			w.Write([]byte(`{}`))
		case "/wp25":
			w.WriteHeader(504)
			// The errorCode after a detail longer than the error's excerpt.
			w.Write([]byte(`{"type":"about:blank","status":504,"detail":"` + strings.Repeat("d", 300) + `","errorCode":"WP25"}`))
		case "/bare":
			w.WriteHeader(409)
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		}
	}))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	client := &http.Client{Timeout: 50 * time.Millisecond}
	try := func(u string) error {
		req, _ := http.NewRequest("POST", u, nil)
		_, err := roundTrip(client, req, 201)
		return err
	}
	a := newAnswerTally()
	for _, p := range []string{"/wp25", "/ok", "/wp25", "/bare", "/slow"} {
		a.add(try(srv.URL+p), time.Millisecond)
	}
	a.add(try(deadURL+"/ok"), time.Millisecond)
	a.add(errors.New("something else"), time.Millisecond)
	got := a.String()
	if !strings.HasPrefix(got, "tries: 504 WP25 x2 (mean 1ms), ") {
		t.Fatalf("the most frequent kind is not first: %s", got)
	}
	for _, want := range []string{"201 x1", "409 x1", "time-out x1", "refused x1", "other x1"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing in %s", want, got)
		}
	}
}

package apitest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
)

// recorder is a testing.TB that records Errorf calls instead of failing.
type recorder struct {
	testing.TB
	errs apitest.Notes
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) { r.errs.Addf(format, args...) }

// errors returns the errors recorded since the last call.
func (r *recorder) errors() []string { return r.errs.Take() }

const reqID = "req-1"

func metadataBody(t testing.TB) map[string]any {
	t.Helper()
	raw, err := json.Marshal(instore.DefaultMetadata())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeJSON(w http.ResponseWriter, contentType string, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func problem(name string, status int) map[string]any {
	return map[string]any{
		"type":      "urn:instore:problem:" + name,
		"title":     http.StatusText(status),
		"status":    status,
		"requestId": reqID,
	}
}

func withID(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", reqID)
		h(w, r)
	})
}

// oauthProblem is a problem with the OAuth token endpoint's error members.
func oauthProblem(name string, status int, code, description string) map[string]any {
	p := problem(name, status)
	p["error"], p["error_description"] = code, description
	return p
}

// problemReply answers every request with status and body as an
// application/problem+json document, after setting the headers given as
// name, value pairs.
func problemReply(status int, body map[string]any, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		writeJSON(w, "application/problem+json", status, body)
	}
}

// withWP04 returns p with the members of service error WP04, and title
// unless it is "".
func withWP04(p map[string]any, title string) map[string]any {
	p["errorId"], p["errorCode"] = 4, "WP04"
	if title != "" {
		p["title"] = title
	}
	return p
}

// withField returns p with p[key] set to value.
func withField(p map[string]any, key string, value any) map[string]any {
	p[key] = value
	return p
}

func metadataOK(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"abc"`)
		writeJSON(w, "application/json", 200, metadataBody(t))
	}
}

// metadataWith serves the metadata as metadataOK does, changed by edit.
func metadataWith(t testing.TB, edit func(m map[string]any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m := metadataBody(t)
		edit(m)
		w.Header().Set("ETag", `"abc"`)
		writeJSON(w, "application/json", 200, m)
	}
}

func TestTransport(t *testing.T) {
	const metadata = "/in-store/api/v1/metadata"
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		handler http.HandlerFunc
		// wantErr is a substring of the one expected error; "" for none.
		wantErr string
	}{
		{
			name: "metadata conforms", path: metadata,
			handler: metadataOK(t),
		},
		{
			name: "metadata with charset conforms", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `W/"abc"`)
				writeJSON(w, "application/json; charset=utf-8", 200, metadataBody(t))
			},
		},
		{
			name: "extra property", path: metadata,
			handler: metadataWith(t, func(m map[string]any) { m["extra"] = 1 }),
			wantErr: "extra",
		},
		{
			name: "extra property in an entry", path: metadata,
			handler: metadataWith(t, func(m map[string]any) { m["printStatuses"].([]any)[0].(map[string]any)["name"] = "x" }),
			wantErr: "name",
		},
		{
			name: "missing required property", path: metadata,
			handler: metadataWith(t, func(m map[string]any) { delete(m, "printStatuses") }),
			wantErr: "printStatuses",
		},
		{
			name: "wrong type in an entry", path: metadata,
			handler: metadataWith(t, func(m map[string]any) { m["errorCodes"].([]any)[0].(map[string]any)["id"] = "1" }),
			wantErr: "integer",
		},
		{
			name: "undocumented status", path: metadata,
			handler: problemReply(403, problem("WP03", 403)),
			wantErr: "status 403 is not documented",
		},
		{
			name: "wrong content type", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `"abc"`)
				writeJSON(w, "text/plain", 200, metadataBody(t))
			},
			wantErr: "text/plain",
		},
		{
			name: "missing required header", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, "application/json", 200, metadataBody(t))
			},
			wantErr: `"ETag" is missing`,
		},
		{
			name: "head", method: http.MethodHead, path: metadata,
			handler: metadataOK(t),
		},
		{
			name: "not modified", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `"abc"`)
				w.WriteHeader(http.StatusNotModified)
			},
		},
		{
			name: "not modified without etag", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotModified)
			},
			wantErr: `"ETag" is missing`,
		},
		{
			name: "unauthorized problem", path: metadata,
			handler: problemReply(401, problem("unauthorized", 401), "WWW-Authenticate", "Bearer"),
		},
		{
			name: "unauthorized without challenge", path: metadata,
			handler: problemReply(401, problem("unauthorized", 401)),
			wantErr: `"WWW-Authenticate" is missing`,
		},
		{
			name: "problem as application/json", path: metadata,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeJSON(w, "application/json", 401, problem("unauthorized", 401))
			},
			wantErr: "application/json",
		},
		{
			name: "problem status differs from the response", path: metadata,
			handler: problemReply(401, withField(problem("unauthorized", 401), "status", 400), "WWW-Authenticate", "Bearer"),
			wantErr: "status is 400",
		},
		{
			name: "problem type with another status", path: metadata,
			handler: problemReply(401, problem("validation", 401), "WWW-Authenticate", "Bearer"),
			wantErr: "status 400",
		},
		{
			name: "problem requestId differs from the header", path: metadata,
			handler: problemReply(429, withField(problem("rate-limited", 429), "requestId", "other"), "Retry-After", "3"),
			wantErr: "requestId",
		},
		{
			name: "rate limited", path: metadata,
			handler: problemReply(429, problem("rate-limited", 429), "Retry-After", "3"),
		},
		{
			name: "openapi document", path: "/in-store/api/v1/openapi.yaml",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/yaml")
				w.Write(api.OnlineYAML)
			},
		},
		{
			name: "token", method: http.MethodPost, path: "/oauth2/token", body: "grant_type=client_credentials",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "no-store")
				writeJSON(w, "application/json", 200, map[string]any{"access_token": "x", "token_type": "Bearer", "expires_in": 3600})
			},
		},
		{
			name: "token without no-store", method: http.MethodPost, path: "/oauth2/token", body: "grant_type=client_credentials",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, "application/json", 200, map[string]any{"access_token": "x", "token_type": "Bearer", "expires_in": 3600})
			},
			wantErr: `"Cache-Control" is missing`,
		},
		{
			name: "token error", method: http.MethodPost, path: "/oauth2/token", body: "grant_type=password",
			handler: problemReply(400, oauthProblem("validation", 400, "unsupported_grant_type", "grant_type must be client_credentials")),
		},
		{
			name: "token error without the OAuth members", method: http.MethodPost, path: "/oauth2/token", body: "grant_type=password",
			handler: problemReply(400, problem("validation", 400)),
			wantErr: "error",
		},
		{
			name: "token 401 with a 400 error code", method: http.MethodPost, path: "/oauth2/token", body: "grant_type=client_credentials",
			handler: problemReply(401, oauthProblem("unauthorized", 401, "invalid_request", "x")),
			wantErr: "invalid_client",
		},
		{
			name: "unknown path answered with 404 problem", path: "/in-store/api/v1/nothing",
			handler: problemReply(404, problem("not-found", 404)),
		},
		{
			name: "unknown method answered with 405 problem", method: http.MethodDelete, path: metadata,
			handler: problemReply(405, problem("method-not-allowed", 405), "Allow", "GET, HEAD"),
		},
		{
			name: "405 without Allow", method: http.MethodDelete, path: metadata,
			handler: problemReply(405, problem("method-not-allowed", 405)),
			wantErr: `"Allow" is missing`,
		},
		{
			name: "unknown path answered with 404 text", path: "/nothing",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.NotFound(w, r)
			},
			wantErr: "text/plain",
		},
		{
			name: "unknown path answered with 200", path: "/in-store/api/v1/nothing",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, "application/json", 200, map[string]any{})
			},
			wantErr: "no operation of the document matches GET /in-store/api/v1/nothing",
		},
		{
			name: "service error code", method: http.MethodDelete, path: "/in-store/api/v1/nothing",
			handler: problemReply(404, withWP04(problem("WP04", 404), "Transaction not found")),
		},
		{
			name: "service error code with a wrong title", path: "/in-store/api/v1/nothing",
			handler: problemReply(404, withWP04(problem("WP04", 404), "Not found")),
			wantErr: `wants title "Transaction not found"`,
		},
		{
			name: "service error code type without errorCode", path: "/in-store/api/v1/nothing",
			handler: problemReply(404, withField(problem("WP04", 404), "title", "Transaction not found")),
			wantErr: "errorId",
		},
		{
			name: "errorCode on a type that is not a code", path: "/in-store/api/v1/nothing",
			handler: problemReply(404, withWP04(problem("not-found", 404), "")),
			wantErr: "errorCode",
		},
		{
			name: "missing X-Request-Id", path: "/in-store/api/v1/nothing",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Del("X-Request-Id")
				writeJSON(w, "application/problem+json", 404, problem("not-found", 404))
			},
			wantErr: `"X-Request-Id" is missing`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(withID(tt.handler))
			defer srv.Close()
			rec := &recorder{TB: t}
			v := apitest.NewValidator(t, api.OnlineYAML)
			client := v.Client(rec)
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(method, srv.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The body is intact for the caller.
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusNotModified && method != http.MethodHead && len(got) == 0 {
				t.Errorf("body is empty after validation")
			}
			errs := rec.errors()
			switch {
			case tt.wantErr == "" && len(errs) != 0:
				t.Errorf("unexpected validation errors:\n%s", strings.Join(errs, "\n"))
			case tt.wantErr != "" && len(errs) != 1:
				t.Errorf("got %d validation errors, want 1 containing %q:\n%s", len(errs), tt.wantErr, strings.Join(errs, "\n"))
			case tt.wantErr != "" && !strings.Contains(errs[0], tt.wantErr):
				t.Errorf("validation error does not contain %q:\n%s", tt.wantErr, errs[0])
			}
			if tt.wantErr != "" && len(errs) == 1 && !strings.Contains(errs[0], tt.path) {
				t.Errorf("validation error does not name the path %s:\n%s", tt.path, errs[0])
			}
		})
	}
}

// getMetadata makes a validating client's GET of the metadata from a
// server answering with h, and returns the body the caller gets, the
// validator and what it recorded.
func getMetadata(t *testing.T, h http.HandlerFunc) ([]byte, *apitest.Validator, *recorder) {
	t.Helper()
	srv := httptest.NewServer(withID(h))
	defer srv.Close()
	rec := &recorder{TB: t}
	v := apitest.NewValidator(t, api.OnlineYAML)
	resp, err := v.Client(rec).Get(srv.URL + "/in-store/api/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return got, v, rec
}

func TestErrorTruncatesBody(t *testing.T) {
	got, _, rec := getMetadata(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		w.Write([]byte(strings.Repeat("x", 10<<10)))
	})
	if len(got) != 10<<10 {
		t.Errorf("caller got %d bytes, want %d", len(got), 10<<10)
	}
	errs := rec.errors()
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want 1", len(errs))
	}
	if n := strings.Count(errs[0], "x"); n > 2<<10+10 {
		t.Errorf("error shows %d bytes of the body, want at most 2 KiB", n)
	}
	if !strings.Contains(errs[0], "10240 bytes") {
		t.Errorf("error does not say how long the body was:\n%.300s", errs[0])
	}
}

func TestCovered(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /in-store/api/v1/metadata", metadataOK(t))
	mux.HandleFunc("GET /in-store/api/v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeJSON(w, "application/problem+json", 401, problem("unauthorized", 401))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, "application/problem+json", 404, problem("not-found", 404))
	})
	srv := httptest.NewServer(withID(mux.ServeHTTP))
	defer srv.Close()

	v := apitest.NewValidator(t, api.OnlineYAML)
	// Covered has every operationId of the document, none seen yet.
	want := map[string]bool{}
	for _, item := range v.Doc().Paths.Map() {
		for _, op := range item.Operations() {
			want[op.OperationID] = false
		}
	}
	if _, ok := want["createToken"]; !ok || len(want) < 3 {
		t.Fatalf("the document's operations look wrong: %v", want)
	}
	if diff := cmp.Diff(want, v.Covered()); diff != "" {
		t.Errorf("Covered before any request (-want +got):\n%s", diff)
	}
	client := v.Client(t)
	for _, p := range []string{"/in-store/api/v1/metadata", "/in-store/api/v1/openapi.yaml", "/unknown"} {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want["getMetadata"], want["getOpenAPIDocument"] = true, true
	if diff := cmp.Diff(want, v.Covered()); diff != "" {
		t.Errorf("Covered (-want +got):\n%s", diff)
	}

	// Coverage is per Validator, though the document is shared.
	if got := apitest.NewValidator(t, api.OnlineYAML).Covered()["getMetadata"]; got {
		t.Errorf("a new Validator reports getMetadata covered")
	}
	if apitest.NewValidator(t, api.OnlineYAML).Doc() != v.Doc() {
		t.Errorf("the document is loaded again for the same content")
	}
}

func TestInvalidResponseIsNotCovered(t *testing.T) {
	_, v, rec := getMetadata(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, "application/json", 200, map[string]any{})
	})
	if len(rec.errors()) == 0 {
		t.Errorf("an empty metadata object passed")
	}
	if v.Covered()["getMetadata"] {
		t.Errorf("getMetadata counted as covered by an invalid response")
	}
}

func TestCheckWithRecorder(t *testing.T) {
	v := apitest.NewValidator(t, api.OnlineYAML)
	w := httptest.NewRecorder()
	withID(metadataOK(t)).ServeHTTP(w, httptest.NewRequest("GET", "/in-store/api/v1/metadata", nil))
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	op, err := v.Check(httptest.NewRequest("GET", "/in-store/api/v1/metadata", nil), resp, body)
	if err != nil || op != "getMetadata" {
		t.Errorf("Check = %q, %v; want getMetadata, nil", op, err)
	}
}

func TestBadSpecFails(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			}
		}()
		apitest.NewValidator(rec, []byte("openapi: 3.1.0\ninfo: {}\n"))
	}()
	if rec.fatal == "" {
		t.Errorf("an invalid document did not fail the test")
	}
}

var errFatal = new(int)

type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(errFatal)
}

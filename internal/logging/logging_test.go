package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testKey = []byte("test fingerprint key")

// newTestLogger returns a JSON logger without timestamps, and its output.
func newTestLogger(t testing.TB, key []byte) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	next := slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})
	return slog.New(NewRedactingHandler(next, key)), &buf
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// mustDecode decodes the single JSON line in buf.
func mustDecode(t testing.TB, buf *bytes.Buffer) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(buf)
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding log line: %v", err)
	}
	if dec.More() {
		t.Fatalf("more than one log line")
	}
	return m
}

// valuer logs as v, to check that slog.LogValuer values are resolved first.
type valuer struct{ v slog.Value }

func (v valuer) LogValue() slog.Value { return v.v }

// record builds the decoded form of a line logged at INFO with msg.
func record(msg string, kv ...any) map[string]any {
	m := map[string]any{"level": "INFO", "msg": msg}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestRedactingHandlerSensitiveKeys(t *testing.T) {
	keys := append([]string{
		// The same names as they appear in code, headers and JSON.
		"access_token", "Authorization", "Ocp-Apim-Subscription-Key", "X-Api-Key", "api.key",
		"client_secret", "deviceSecret", "merchantId", "MERCHANT_ID", "customer-id", "clientID",
		"terminalId", "serialNumber", "link_code", "Idempotency-Key", "signingKey",
		// Compound and plural names ending with a sensitive one.
		"sessionToken", "deviceSerial", "terminalIds", "merchants",
	}, sensitiveKeys...)
	const value = "T-000123"

	placements := []struct {
		name string
		log  func(l *slog.Logger, key string)
		want func(key, fp string) map[string]any
	}{
		{
			name: "top level",
			log:  func(l *slog.Logger, key string) { l.Info("m", key, value) },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
		{
			name: "WithAttrs",
			log:  func(l *slog.Logger, key string) { l.With(key, value).Info("m") },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
		{
			name: "WithGroup",
			log:  func(l *slog.Logger, key string) { l.WithGroup("req").Info("m", key, value) },
			want: func(key, fp string) map[string]any { return record("m", "req", map[string]any{key: fp}) },
		},
		{
			name: "WithGroup then WithAttrs",
			log:  func(l *slog.Logger, key string) { l.WithGroup("req").With(key, value).Info("m") },
			want: func(key, fp string) map[string]any { return record("m", "req", map[string]any{key: fp}) },
		},
		{
			name: "nested group value",
			log: func(l *slog.Logger, key string) {
				l.Info("m", slog.Group("a", slog.Group("b", key, value, "n", 1)))
			},
			want: func(key, fp string) map[string]any {
				return record("m", "a", map[string]any{"b": map[string]any{key: fp, "n": 1.0}})
			},
		},
		{
			name: "inline group",
			log:  func(l *slog.Logger, key string) { l.Info("m", slog.Group("", key, value)) },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
		{
			name: "LogValuer",
			log:  func(l *slog.Logger, key string) { l.Info("m", key, valuer{slog.StringValue(value)}) },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
		{
			name: "LogValuer group",
			log: func(l *slog.Logger, key string) {
				l.Info("m", "req", valuer{slog.GroupValue(slog.String(key, value))})
			},
			want: func(key, fp string) map[string]any { return record("m", "req", map[string]any{key: fp}) },
		},
		{
			name: "LogValuer in WithAttrs",
			log:  func(l *slog.Logger, key string) { l.With(key, valuer{slog.StringValue(value)}).Info("m") },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
		{
			name: "Any value",
			log:  func(l *slog.Logger, key string) { l.Info("m", slog.Any(key, terminalID(value))) },
			want: func(key, fp string) map[string]any { return record("m", key, fp) },
		},
	}

	fp := Fingerprint(testKey, value)
	for _, p := range placements {
		for _, key := range keys {
			t.Run(p.name+"/"+key, func(t *testing.T) {
				l, buf := newTestLogger(t, testKey)
				p.log(l, key)
				out := buf.String()
				if strings.Contains(out, value) {
					t.Errorf("log line %s contains %q", out, value)
				}
				if diff := cmp.Diff(p.want(key, fp), mustDecode(t, buf)); diff != "" {
					t.Errorf("log line mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

type terminalID string

func TestRedactingHandlerSensitiveGroups(t *testing.T) {
	fp := func(v string) string { return Fingerprint(testKey, v) }
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]any
	}{
		{
			name: "group name completes the key",
			log:  func(l *slog.Logger) { l.Info("m", slog.Group("client", "id", "c1", "name", "pos")) },
			want: record("m", "client", map[string]any{"id": fp("c1"), "name": "pos"}),
		},
		{
			name: "WithGroup name completes the key",
			log:  func(l *slog.Logger) { l.WithGroup("link").Info("m", "code", "123456", "ttl", "5m") },
			want: record("m", "link", map[string]any{"code": fp("123456"), "ttl": "5m"}),
		},
		{
			name: "every value under a sensitive group",
			log: func(l *slog.Logger) {
				l.Info("m", slog.Group("terminal", "id", "T1", "model", "A35", slog.Group("sim", "iccid", "8901")))
			},
			want: record("m", "terminal", map[string]any{
				"id": fp("T1"), "model": fp("A35"), "sim": map[string]any{"iccid": fp("8901")},
			}),
		},
		{
			name: "every value under a sensitive WithGroup",
			log:  func(l *slog.Logger) { l.WithGroup("customer").With("email", "a@b.c").Info("m", "age", 42) },
			want: record("m", "customer", map[string]any{"email": fp("a@b.c"), "age": fp("42")}),
		},
		{
			name: "empty values stay empty",
			log:  func(l *slog.Logger) { l.Info("m", "token", "", "merchantId", nil) },
			want: record("m", "token", "", "merchantId", nil),
		},
		{
			name: "booleans stay",
			log:  func(l *slog.Logger) { l.Info("m", "hasToken", true) },
			want: record("m", "hasToken", true),
		},
		{
			name: "bytes are fingerprinted as text",
			log:  func(l *slog.Logger) { l.Info("m", "secret", []byte("s3cret"), "key", []byte{}) },
			want: record("m", "secret", fp("s3cret"), "key", ""),
		},
		{
			name: "numbers are fingerprinted",
			log:  func(l *slog.Logger) { l.Info("m", "terminalId", 4711) },
			want: record("m", "terminalId", fp("4711")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, buf := newTestLogger(t, testKey)
			tt.log(l)
			if diff := cmp.Diff(tt.want, mustDecode(t, buf)); diff != "" {
				t.Errorf("log line mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedactingHandlerKeepsPlainAttrs(t *testing.T) {
	l, buf := newTestLogger(t, testKey)
	l.WithGroup("http").Info("request",
		"method", "POST", "status", 201, "duration", 1500*time.Millisecond,
		"route", "POST /v1/terminals/{id}/transactions", "requestId", "req_9f2c",
		slog.Group("client", "status", "online"))
	want := record("request", "http", map[string]any{
		"method": "POST", "status": 201.0, "duration": 1.5e9,
		"route": "POST /v1/terminals/{id}/transactions", "requestId": "req_9f2c",
		"client": map[string]any{"status": "online"},
	})
	if diff := cmp.Diff(want, mustDecode(t, buf)); diff != "" {
		t.Errorf("log line mismatch (-want +got):\n%s", diff)
	}
}

const testJWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZXJfMSJ9.c2lnbmF0dXJl-_x"

func TestRedactingHandlerCredentialShapes(t *testing.T) {
	fp := func(v string) string { return Fingerprint(testKey, v) }
	tests := []struct {
		name, in, want string
	}{
		{"bearer", "auth: Bearer abc.def/123", "auth: Bearer " + fp("abc.def/123")},
		{"bearer lower case", "authorization: bearer abc", "authorization: bearer " + fp("abc")},
		{"bearer JWT", "Bearer " + testJWT, "Bearer " + fp(testJWT)},
		{"JWT", "token " + testJWT + " expired", "token " + fp(testJWT) + " expired"},
		{"JWT without signature", "got eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "got " + fp("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")},
		{"JWT in a query", "GET /x?t=" + testJWT + "&a=1", "GET /x?t=" + fp(testJWT) + "&a=1"},
		{"subscription key", "key isk_live_8aB-x9 rejected", "key " + fp("isk_live_8aB-x9") + " rejected"},
		{"client secret", "ics_Zz09", fp("ics_Zz09")},
		{"device secret", "(ids_abc)", "(" + fp("ids_abc") + ")"},
		{"merchant id", "merchant=mer_123,customer=cus_456", "merchant=" + fp("mer_123") + ",customer=" + fp("cus_456")},
		{"client and key ids", "cli_1 key_2", fp("cli_1") + " " + fp("key_2")},
		{"prefix inside a word", "timer_ok and sky_high", "timer_ok and sky_high"},
		{"prefix alone", "mer_ and eyJ only", "mer_ and eyJ only"},
		{"two parts are not a JWT", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0"},
		{"nothing to redact", "payment approved", "payment approved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, buf := newTestLogger(t, testKey)
			l.Info(tt.in, "detail", tt.in, "err", errors.New(tt.in), "raw", []byte(tt.in),
				slog.Group("g", "detail", tt.in))
			got := mustDecode(t, buf)
			want := record(tt.want, "detail", tt.want, "err", tt.want, "g", map[string]any{"detail": tt.want})
			if tt.want == tt.in {
				// The JSON handler writes untouched bytes in base64.
				want["raw"] = got["raw"]
			} else {
				want["raw"] = tt.want
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Info(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

type request struct {
	Route  string
	Header map[string]string
}

// maskedRequest hides its header from fmt but not from encoding/json.
type maskedRequest struct{ request }

func (maskedRequest) String() string { return "request" }

type panicky struct{}

func (*panicky) Error() string { panic("nil receiver") }

func TestRedactingHandlerAnyValues(t *testing.T) {
	req := request{Route: "/v1/x", Header: map[string]string{"Authorization": "Bearer s3cret"}}
	tests := []struct {
		name string
		v    any
		want any
	}{
		{"struct", req, "{Route:/v1/x Header:map[Authorization:Bearer " + Fingerprint(testKey, "s3cret]}")},
		{"String hides what JSON shows", maskedRequest{req}, "request"},
		{"clean struct", request{Route: "/v1/x"}, map[string]any{"Route": "/v1/x", "Header": nil}},
		{"nil pointer error", (*panicky)(nil), "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, buf := newTestLogger(t, testKey)
			l.Info("m", "v", tt.v)
			if diff := cmp.Diff(record("m", "v", tt.want), mustDecode(t, buf)); diff != "" {
				t.Errorf("Info(m, v, %#v) mismatch (-want +got):\n%s", tt.v, diff)
			}
		})
	}
}

func TestRedactLeavesNoCredential(t *testing.T) {
	r := NewRedactingHandler(slog.DiscardHandler, testKey).(*redactingHandler).r
	for _, in := range []string{
		"isk_" + testJWT,
		"key_x" + testJWT,
		"Bearer Bearer x",
		testJWT + "." + testJWT,
		"bearer\tisk_1 mer_2.cus_3",
	} {
		got, _ := r.text(in)
		if msg := leftoverCredential(got); msg != "" {
			t.Errorf("text(%q) = %q, %s", in, got, msg)
		}
		for _, part := range strings.Split(testJWT, ".") {
			if strings.Contains(in, testJWT) && strings.Contains(got, part) {
				t.Errorf("text(%q) = %q, contains JWT part %q", in, got, part)
			}
		}
	}
}

// leftoverCredential describes a credential shape left in s, or returns "".
func leftoverCredential(s string) string {
	if m := jwtPattern.FindString(s); m != "" {
		return "JWT " + m + " left"
	}
	if m := prefixedPattern.FindString(s); m != "" {
		return "credential " + m + " left"
	}
	for _, m := range bearerPattern.FindAllStringSubmatch(s, -1) {
		if !fingerprintPattern.MatchString(m[1]) {
			return "bearer credential " + m[1] + " left"
		}
	}
	return ""
}

var fingerprintPattern = regexp.MustCompile(`^fp:[0-9a-f]{10}$`)

func TestFingerprint(t *testing.T) {
	other := []byte("another key")
	tests := []struct {
		name   string
		a, b   string
		same   bool
		ak, bk []byte
	}{
		{"same value same key", "T-1", "T-1", true, testKey, testKey},
		{"other value", "T-1", "T-2", false, testKey, testKey},
		{"other key", "T-1", "T-1", false, testKey, other},
		{"nil key is the process key", "T-1", "T-1", true, nil, []byte{}},
		{"nil key is not a fixed key", "T-1", "T-1", false, nil, testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Fingerprint(tt.ak, tt.a), Fingerprint(tt.bk, tt.b)
			for _, fp := range []string{a, b} {
				if !fingerprintPattern.MatchString(fp) {
					t.Errorf("Fingerprint = %q, want fp: and 10 hex digits", fp)
				}
			}
			if got := a == b; got != tt.same {
				t.Errorf("Fingerprint(%q, %q) == Fingerprint(%q, %q) = %v, want %v", tt.ak, tt.a, tt.bk, tt.b, got, tt.same)
			}
		})
	}
}

func TestNewFingerprintKey(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
	}{
		{"configured key", testKey},
		{"process key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			New(&buf, Options{Format: "json", FingerprintKey: tt.key}).Info("m", "terminalId", "T-1")
			m := mustDecode(t, &buf)
			if got, want := m["terminalId"], Fingerprint(tt.key, "T-1"); got != want {
				t.Errorf("terminalId = %v, want %v", got, want)
			}
		})
	}
}

func TestNewFormats(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()

	fp := Fingerprint(testKey, "T-1")
	tests := []struct {
		name   string
		format string
		w      io.ReadWriter
		want   *regexp.Regexp
	}{
		{"json", "json", &bytes.Buffer{}, regexp.MustCompile(`^\{"time":"[^"]+","level":"INFO","msg":"hello","terminalId":"` + fp + `"\}\n$`)},
		{"text", "text", &bytes.Buffer{}, regexp.MustCompile(`^time=\S+ level=INFO msg=hello terminalId=` + fp + `\n$`)},
		{"auto on a buffer", "auto", &bytes.Buffer{}, regexp.MustCompile(`^\{.*"terminalId":"` + fp + `"\}\n$`)},
		{"auto on a file", "", file, regexp.MustCompile(`^\{.*"terminalId":"` + fp + `"\}\n$`)},
		{"unknown", "xml", &bytes.Buffer{}, regexp.MustCompile(`^\{.*"level":"WARN","msg":"logging: using json","err":"unknown log format \\"xml\\".*\}\n\{.*"terminalId":"` + fp + `"\}\n$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			New(tt.w, Options{Format: tt.format, FingerprintKey: testKey}).Info("hello", "terminalId", "T-1")
			if f, ok := tt.w.(*os.File); ok {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					t.Fatal(err)
				}
			}
			out, err := io.ReadAll(tt.w)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want.Match(out) {
				t.Errorf("New(%q) wrote %q, want a match for %s", tt.format, out, tt.want)
			}
		})
	}
}

func TestNewLevel(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Options{Format: "json", Level: slog.LevelWarn})
	l.Info("dropped")
	l.Warn("kept")
	if got, want := strings.Count(buf.String(), "\n"), 1; got != want {
		t.Errorf("lines logged at Warn level = %d, want %d:\n%s", got, want, buf.String())
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr error
	}{
		{"json", "json", nil},
		{"text", "text", nil},
		{"auto", "auto", nil},
		{" JSON ", "json", nil},
		{"", "auto", nil},
		{"xml", "", ErrUnknownFormat},
		{"jsonl", "", ErrUnknownFormat},
		{"logfmt", "", ErrUnknownFormat},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFormat(tt.in)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("ParseFormat(%q) = %q, %v, want %q, %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRedactingHandlerCleanRecordDoesNotAllocate(t *testing.T) {
	h := NewRedactingHandler(slog.DiscardHandler, testKey).WithGroup("http").WithAttrs([]slog.Attr{slog.String("route", "/v1")})
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request served", 0)
	r.AddAttrs(cleanAttrs...)
	ctx := context.Background()
	if got := testing.AllocsPerRun(100, func() { h.Handle(ctx, r) }); got != 0 {
		t.Errorf("allocations per Handle of a clean record = %v, want 0", got)
	}
}

var cleanAttrs = []slog.Attr{
	slog.String("method", "POST"),
	slog.String("route", "POST /v1/terminals/{id}/transactions"),
	slog.Int("status", 201),
	slog.Duration("duration", 1500*time.Microsecond),
	slog.String("requestId", "req_9f2c41d7"),
	slog.Group("client", slog.String("ip", "10.0.0.7"), slog.String("userAgent", "instore-go/1.0")),
}

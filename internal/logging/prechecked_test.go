package logging

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// accessAttrs is an access line whose every value is clean.
func accessAttrs(method, requestID string) []slog.Attr {
	return []slog.Attr{slog.String("method", method), slog.String("route", "GET /in-store/api/v1/terminal/{terminalId}"),
		slog.Int("status", 200), slog.Int64("durationUs", 87), slog.String("requestId", requestID)}
}

// TestPrecheckedWritesWhatTheLoggerWrites: through Prechecked, with the
// clean attributes marked safe, every record comes out as the redacting
// logger writes it: the message and the unmarked attributes are redacted
// exactly as before, whatever they hold.
func TestPrecheckedWritesWhatTheLoggerWrites(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 5, time.UTC)
	const routeStatusDuration = 1<<1 | 1<<2 | 1<<3
	cases := []struct {
		name  string
		msg   string
		attrs []slog.Attr
		safe  uint64
	}{
		{"all safe", "request", accessAttrs("GET", "req_0123456789ab_1"), 1<<5 - 1},
		{"none marked", "request", accessAttrs("GET", "req_0123456789ab_1"), 0},
		{"client request id", "request", accessAttrs("GET", "abc-123"), 1<<4 - 1},
		{"client request id with a key", "request", accessAttrs("GET", "isk_live_8aB-x9"), 1<<4 - 1},
		{"client request id with a JWT", "request", accessAttrs("GET", testJWT), 1<<4 - 1},
		{"client request id with a merchant id", "request", accessAttrs("POST", "x.mer_8f2a"), 1<<4 - 1},
		{"method with a secret", "request", accessAttrs("ics_SECRET", "req_0123456789ab_1"), 1<<5 - 1 - 1},
		{"method and id", "request", accessAttrs("key_abc", "cus_1"), routeStatusDuration},
		{"error text", "request", append(accessAttrs("GET", "req_1"), slog.Int64("bytes", 3),
			slog.String("error", "upstream said Bearer "+testJWT+" for mer_1")), 1<<7 - 1 - 1<<6},
		{"error value", "request", append(accessAttrs("GET", "req_1"), slog.Any("error", fmt.Errorf("key isk_9 revoked"))), 1<<5 - 1},
		{"sensitive key unmarked", "request", append(accessAttrs("GET", "req_1"), slog.String("terminalId", "10000001")), 1<<5 - 1},
		{"sensitive group unmarked", "request", append(accessAttrs("GET", "req_1"), slog.Group("merchant", slog.String("name", "Shop"))), 1<<5 - 1},
		{"log valuer unmarked", "request", append(accessAttrs("GET", "req_1"), slog.Any("lv", valuer{slog.StringValue("cli_7")})), 1<<5 - 1},
		{"message with a credential", "request for isk_abc", accessAttrs("GET", "req_1"), 1<<5 - 1},
		{"no attributes", "request", nil, 0},
	}
	key := testKey
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, group := range []string{"", "http"} {
				var want, got bytes.Buffer
				lw := slog.New(NewRedactingHandler(newFastJSON(&want, &slog.HandlerOptions{}), key)).With(slog.String("surface", "online"))
				lg := slog.New(NewRedactingHandler(newFastJSON(&got, &slog.HandlerOptions{}), key)).With(slog.String("surface", "online"))
				if group != "" {
					lw, lg = lw.WithGroup(group), lg.WithGroup(group)
				}
				r := slog.NewRecord(at, slog.LevelInfo, tc.msg, 0)
				r.AddAttrs(tc.attrs...)
				if err := lw.Handler().Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				p := NewPrechecked(lg)
				if !p.Enabled(context.Background(), slog.LevelInfo) || p.Enabled(context.Background(), slog.LevelDebug) {
					t.Error("Enabled does not follow the logger's level")
				}
				if err := p.Handle(context.Background(), r, tc.safe); err != nil {
					t.Fatal(err)
				}
				if got.String() != want.String() {
					t.Errorf("group %q: Prechecked wrote\n%s\nthe logger wrote\n%s", group, got.String(), want.String())
				}
				if m := leftoverCredential(got.String()); m != "" {
					t.Errorf("line %s: %s", got.String(), m)
				}
			}
		})
	}
}

// TestPrecheckedChecksUnmarkedValues: what a client sends (an unknown
// method, its own request id) and every unmarked value never reaches the
// line in clear, at any position, the first 64 attributes or after.
func TestPrecheckedChecksUnmarkedValues(t *testing.T) {
	secrets := []string{"isk_live_8aB-x9", "ics_SECRET", "ids_dev", "mer_8f2a", "cus_77", "cli_1", "key_9", testJWT}
	for _, secret := range secrets {
		for _, pos := range []int{0, 4, 63, 64, 70} {
			var buf bytes.Buffer
			p := NewPrechecked(slog.New(NewRedactingHandler(newFastJSON(&buf, &slog.HandlerOptions{}), testKey)))
			r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
			for i := 0; i < 72; i++ {
				v := "ok"
				if i == pos {
					v = "x " + secret
				}
				r.AddAttrs(slog.String(fmt.Sprintf("a%d", i), v))
			}
			p.Handle(context.Background(), r, ^uint64(0)&^(1<<pos)) // pos >= 64: no bit, checked anyway
			if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), Fingerprint(testKey, secret)) {
				t.Errorf("%s at attribute %d: line %s, want it fingerprinted", secret, pos, buf.String())
			}
		}
	}
}

// TestPrecheckedSkipsOnlyMarkedAttributes: the marks are what decide
// which values are checked (the walk is left out for them), and a record
// all of whose attributes are marked is not walked at all.
func TestPrecheckedSkipsOnlyMarkedAttributes(t *testing.T) {
	p := NewPrechecked(New(discard{}, Options{Format: FormatJSON}))
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("route", "key_rotation"), slog.String("requestId", "req_1"))
	if !p.clean(r, 1<<0) {
		t.Error("a marked attribute was checked")
	}
	if p.clean(r, 1<<1) {
		t.Error("an unmarked attribute was not checked")
	}
	clean := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	clean.AddAttrs(accessAttrs("GET", "req_0123456789ab_1")...)
	if got := testing.AllocsPerRun(100, func() { p.Handle(context.Background(), clean, 1<<5-1) }); got != 0 {
		t.Errorf("a clean access line allocates %v times, want 0", got)
	}
}

// TestPrecheckedWithoutRedaction: a logger that does not redact, or whose
// group makes every value sensitive, gets every record through its own
// handler, marks or not.
func TestPrecheckedWithoutRedaction(t *testing.T) {
	var plain bytes.Buffer
	p := NewPrechecked(slog.New(slog.NewJSONHandler(&plain, &slog.HandlerOptions{ReplaceAttr: dropTime})))
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("requestId", "isk_1"))
	p.Handle(context.Background(), r, 0)
	if want := `{"level":"INFO","msg":"request","requestId":"isk_1"}` + "\n"; plain.String() != want {
		t.Errorf("plain logger wrote %s, want %s", plain.String(), want)
	}

	l, buf := newTestLogger(t, testKey)
	p = NewPrechecked(l.WithGroup("terminal"))
	r = slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("route", "GET /x"))
	p.Handle(context.Background(), r, 1)
	if got := mustDecode(t, buf)["terminal"].(map[string]any)["route"]; got != Fingerprint(testKey, "GET /x") {
		t.Errorf("route in a terminal group = %v, want its fingerprint", got)
	}
}

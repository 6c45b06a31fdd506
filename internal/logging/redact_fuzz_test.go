package logging

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

func BenchmarkRedactingHandler(b *testing.B) {
	sensitiveAttrs := append([]slog.Attr{
		slog.String("terminalId", "T-000123"),
		slog.String("authorization", "Bearer "+testJWT),
	}, cleanAttrs...)
	records := []struct {
		name  string
		msg   string
		attrs []slog.Attr
	}{
		{"clean", "request served", cleanAttrs},
		{"sensitive", "request served for mer_8f2a", sensitiveAttrs},
	}
	handlers := []struct {
		name string
		h    slog.Handler
	}{
		{"json", slog.NewJSONHandler(io.Discard, nil)},
		{"redacting", NewRedactingHandler(slog.NewJSONHandler(io.Discard, nil), testKey)},
	}
	ctx := context.Background()
	for _, r := range records {
		for _, h := range handlers {
			b.Run(r.name+"/"+h.name, func(b *testing.B) {
				l := slog.New(h.h)
				b.ReportAllocs()
				for b.Loop() {
					l.LogAttrs(ctx, slog.LevelInfo, r.msg, r.attrs...)
				}
			})
		}
	}
}

// FuzzRedact logs arbitrary strings as the message, as values of sensitive
// keys and as values of an ordinary key, and checks that a sensitive value
// never shows up in clear and that no credential shape survives.
func FuzzRedact(f *testing.F) {
	f.Add("payment approved", "T-000123", "POST /v1/x", uint8(0))
	f.Add("auth Bearer "+testJWT, "isk_live_8aB-x9", "mer_1 cus_2", uint8(5))
	f.Add("isk_"+testJWT, "eyJ.a.b", "bearer\t\tq", uint8(17))
	f.Add("\xff\xfeeyJ\x00.x.", "sec\"ret\\", "\u212Aey_1", uint8(200))

	f.Fuzz(func(t *testing.T, msg, secret, plain string, k uint8) {
		key := sensitiveKeys[int(k)%len(sensitiveKeys)]
		l, buf := newTestLogger(t, testKey)
		l.With(key, secret).WithGroup("g").Info(msg,
			key, secret, "route", plain,
			slog.Group("req", key, secret, "detail", plain),
			"lv", valuer{slog.GroupValue(slog.String(key, secret))})
		got := mustDecode(t, buf)

		// Sensitive values are replaced by their fingerprint, or stay empty.
		wantFP := ""
		if secret != "" {
			wantFP = Fingerprint(testKey, secret)
		}
		g, _ := got["g"].(map[string]any)
		req, _ := g["req"].(map[string]any)
		lv, _ := g["lv"].(map[string]any)
		for _, v := range []struct {
			path string
			got  any
		}{
			{key, got[key]},
			{"g." + key, g[key]},
			{"g.req." + key, req[key]},
			{"g.lv." + key, lv[key]},
		} {
			if v.got != wantFP {
				t.Errorf("%s = %q, want %q", v.path, v.got, wantFP)
			}
		}

		// Ordinary values keep their text, less the credentials in it.
		wantPlain, _ := NewRedactingHandler(slog.DiscardHandler, testKey).(*redactingHandler).r.text(plain)
		wantPlain = jsonText(wantPlain)
		for _, v := range []struct {
			path string
			got  any
		}{{"g.route", g["route"]}, {"g.req.detail", req["detail"]}} {
			if v.got != wantPlain {
				t.Errorf("%s = %q, want %q", v.path, v.got, wantPlain)
			}
		}

		// No string in the line shows the sensitive value, unless it is
		// part of a key or fingerprint, or of the message or ordinary value
		// it was also given as.
		if len(secret) >= 6 && !strings.Contains(key, secret) && !strings.Contains(wantFP, secret) {
			for path, s := range stringLeaves("", got) {
				if (path == "msg" && strings.Contains(jsonText(msg), secret)) ||
					(path != "msg" && strings.Contains(jsonText(plain), secret)) {
					continue
				}
				for _, piece := range anyFingerprint.Split(s, -1) {
					if strings.Contains(piece, secret) {
						t.Errorf("%s = %q, contains sensitive value %q", path, s, secret)
					}
				}
			}
		}

		// The message and ordinary values keep no credential shape.
		for path, s := range map[string]string{"msg": got["msg"].(string), "g.route": wantPlain} {
			if m := leftoverCredential(s); m != "" {
				t.Errorf("%s = %q, %s", path, s, m)
			}
		}
		for _, re := range []*regexp.Regexp{bearerPattern, jwtPattern, prefixedPattern} {
			if re.MatchString(msg) && !mayContainCredential(msg) {
				t.Errorf("mayContainCredential(%q) = false, but %s matches", msg, re)
			}
		}
	})
}

var anyFingerprint = regexp.MustCompile(`fp:[0-9a-f]{10}`)

// jsonText returns s as it reads back from JSON: each invalid UTF-8 byte
// becomes U+FFFD.
func jsonText(s string) string { return string([]rune(s)) }

// stringLeaves returns the string values in a decoded JSON value, by path.
func stringLeaves(path string, v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case string:
		out[path] = v
	case map[string]any:
		for k, e := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			for lp, s := range stringLeaves(p, e) {
				out[lp] = s
			}
		}
	}
	return out
}

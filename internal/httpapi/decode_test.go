package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
)

type sample struct {
	TerminalID string `json:"terminalId"`
	Amount     int64  `json:"amount"`
	Small      int8   `json:"small"`
	Print      bool   `json:"printReceipt"`
	Nested     struct {
		Lines []string `json:"lines"`
	} `json:"nested"`
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantCode    string
		wantFields  []instore.FieldError
	}{
		{"ok", "application/json", `{"terminalId":"10000001","amount":1250}`, "", nil},
		{"ok with charset", "application/json; charset=utf-8", `{"amount":1}`, "", nil},
		{"no content type", "", `{}`, instore.EUnsupportedMediaType, nil},
		{"form", "application/x-www-form-urlencoded", `a=b`, instore.EUnsupportedMediaType, nil},
		{"latin1", "application/json; charset=latin1", `{}`, instore.EUnsupportedMediaType, nil},
		{"empty", "application/json", ``, instore.EValidation, []instore.FieldError{{Field: "", Message: "a JSON request body is required"}}},
		{"syntax", "application/json", `{"amount":}`, instore.EValidation, []instore.FieldError{{Field: "", Message: "malformed JSON at byte 10"}}},
		{"truncated", "application/json", `{"amount":1`, instore.EValidation, []instore.FieldError{{Field: "", Message: "malformed JSON: unexpected end of input"}}},
		{"unknown field", "application/json", `{"amount":1,"amout":2}`, instore.EValidation, []instore.FieldError{{Field: "/amout", Message: "unknown field"}}},
		{"wrong type", "application/json", `{"amount":"12.50"}`, instore.EValidation, []instore.FieldError{{Field: "/amount", Message: "must be a number"}}},
		{"wrong type bool", "application/json", `{"printReceipt":"yes"}`, instore.EValidation, []instore.FieldError{{Field: "/printReceipt", Message: "must be a boolean"}}},
		{"out of range", "application/json", `{"small":300}`, instore.EValidation, []instore.FieldError{{Field: "/small", Message: "number out of range or not an integer"}}},
		{"fraction", "application/json", `{"amount":12.5}`, instore.EValidation, []instore.FieldError{{Field: "/amount", Message: "number out of range or not an integer"}}},
		{"huge", "application/json", `{"amount":1e30}`, instore.EValidation, []instore.FieldError{{Field: "/amount", Message: "number out of range or not an integer"}}},
		{"nested type", "application/json", `{"nested":{"lines":[1]}}`, instore.EValidation, []instore.FieldError{{Field: "/nested/lines/0", Message: "must be a string"}}},
		{"nested unknown", "application/json", `{"nested":{"line":[]}}`, instore.EValidation, []instore.FieldError{{Field: "/nested/line", Message: "unknown field"}}},
		{"unknown field escaped", "application/json", `{"a/b~":1}`, instore.EValidation, []instore.FieldError{{Field: "/a~1b~0", Message: "unknown field"}}},
		{"unknown field with NUL", "application/json", `{"a\u0000":1}`, instore.EValidation, []instore.FieldError{{Field: "/a\x00", Message: "unknown field"}}},
		// Names match exactly: encoding/json v1 took TERMINALID as terminalId.
		{"case variant", "application/json", `{"TERMINALID":"10000001"}`, instore.EValidation, []instore.FieldError{{Field: "/TERMINALID", Message: "unknown field"}}},
		{"case variant beside the field", "application/json", `{"terminalId":"10000001","TerminalId":"10000002"}`, instore.EValidation, []instore.FieldError{{Field: "/TerminalId", Message: "unknown field"}}},
		// A name given twice: v1 let the last one win (100 asked, 99999 charged).
		{"duplicate", "application/json", `{"amount":100,"terminalId":"10000001","amount":99999}`, instore.EValidation, []instore.FieldError{{Field: "/amount", Message: "given more than once"}}},
		{"duplicate nested", "application/json", `{"nested":{"lines":["a"],"lines":["b"]}}`, instore.EValidation, []instore.FieldError{{Field: "/nested/lines", Message: "given more than once"}}},
		{"duplicate object", "application/json", `{"nested":{},"nested":{}}`, instore.EValidation, []instore.FieldError{{Field: "/nested", Message: "given more than once"}}},
		// Text that is not UTF-8: v1 replaced it with U+FFFD.
		{"invalid UTF-8 value", "application/json", "{\"terminalId\":\"1000\xff0001\"}", instore.EValidation, []instore.FieldError{{Field: "/terminalId", Message: "not valid UTF-8"}}},
		{"invalid UTF-8 in a line", "application/json", "{\"nested\":{\"lines\":[\"ok\",\"\xc3\"]}}", instore.EValidation, []instore.FieldError{{Field: "/nested/lines/1", Message: "not valid UTF-8"}}},
		{"invalid UTF-8 name", "application/json", "{\"amount\xff\":1}", instore.EValidation, []instore.FieldError{{Field: "", Message: "not valid UTF-8"}}},
		{"overlong NUL", "application/json", "{\"terminalId\":\"\xc0\x80\"}", instore.EValidation, []instore.FieldError{{Field: "/terminalId", Message: "not valid UTF-8"}}},
		{"lone surrogate", "application/json", `{"terminalId":"\ud800"}`, instore.EValidation, []instore.FieldError{{Field: "", Message: "malformed JSON at byte 15"}}},
		{"invalid UTF-8 after a syntax error", "application/json", "{\"amount\":} \xff", instore.EValidation, []instore.FieldError{{Field: "", Message: "malformed JSON at byte 10"}}},
		// null is the zero value, as if absent; the operation then asks
		// for what it requires.
		{"null body", "application/json", `null`, "", nil},
		{"null member", "application/json", `{"amount":null,"nested":null,"printReceipt":null}`, "", nil},
		{"trailing garbage", "application/json", `{"amount":1}x`, instore.EValidation, []instore.FieldError{{Field: "", Message: "the body must hold exactly one JSON value"}}},
		{"exponent", "application/json", `{"amount":1e2}`, instore.EValidation, []instore.FieldError{{Field: "/amount", Message: "number out of range or not an integer"}}},
		{"string for object", "application/json", `{"nested":"x"}`, instore.EValidation, []instore.FieldError{{Field: "/nested", Message: "must be an object"}}},
		{"string body", "application/json", `"x"`, instore.EValidation, []instore.FieldError{{Field: "", Message: "the body must be a JSON object"}}},
		{"not an object", "application/json", `[1,2]`, instore.EValidation, []instore.FieldError{{Field: "", Message: "the body must be a JSON object"}}},
		{"two values", "application/json", `{} {}`, instore.EValidation, []instore.FieldError{{Field: "", Message: "the body must hold exactly one JSON value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			var dst sample
			err := DecodeJSON(r, &dst)
			if got := codeOf(err); got != tt.wantCode {
				t.Fatalf("DecodeJSON(%q) code = %q, want %q (err %v)", tt.body, got, tt.wantCode, err)
			}
			if tt.wantFields != nil {
				var e *instore.Error
				errors.As(err, &e)
				if diff := cmp.Diff(tt.wantFields, e.Fields); diff != "" {
					t.Errorf("DecodeJSON(%q) fields (-want +got):\n%s", tt.body, diff)
				}
			}
		})
	}
}

// TestDecodeContentEncoding: a body with a content coding is refused with
// 415 before it is read (a gzip body read as it comes was answered as
// malformed JSON, and a plain one labelled gzip was taken; found by the
// black-box review); identity is no coding.
func TestDecodeContentEncoding(t *testing.T) {
	for _, tc := range []struct {
		encoding []string
		want     string
	}{
		{nil, ""},
		{[]string{"identity"}, ""},
		{[]string{"IDENTITY"}, ""},
		{[]string{"gzip"}, instore.EUnsupportedMediaType},
		{[]string{"identity, gzip"}, instore.EUnsupportedMediaType},
		{[]string{"identity", "br"}, instore.EUnsupportedMediaType},
		{[]string{"x-anything"}, instore.EUnsupportedMediaType},
	} {
		r := httptest.NewRequest("POST", "/x", strings.NewReader(`{"amount":1}`))
		r.Header.Set("Content-Type", "application/json")
		for _, e := range tc.encoding {
			r.Header.Add("Content-Encoding", e)
		}
		var dst sample
		if got := codeOf(DecodeJSON(r, &dst)); got != tc.want {
			t.Errorf("DecodeJSON with Content-Encoding %q = %q, want %q", tc.encoding, got, tc.want)
		}
		form := httptest.NewRequest("POST", "/x", strings.NewReader(`a=b`))
		form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, e := range tc.encoding {
			form.Header.Add("Content-Encoding", e)
		}
		if got := codeOf(ReadForm(form)); got != tc.want {
			t.Errorf("ReadForm with Content-Encoding %q = %q, want %q", tc.encoding, got, tc.want)
		}
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return instore.ErrorCode(err)
}

func TestDecodeJSONBodyLimit(t *testing.T) {
	body := `{"terminalId":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, MaxBodyBytes)
	var dst sample
	if got := codeOf(DecodeJSON(r, &dst)); got != instore.EPayloadTooLarge {
		t.Fatalf("DecodeJSON(64 KiB + 1) code = %q, want %q", got, instore.EPayloadTooLarge)
	}
}

// FuzzDecodeJSON: any body either decodes or is a 4xx validation, media
// type or size problem; it never panics and never yields an internal error.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"amount":1}`, `{"amount":"x"}`, `[`, `{"nested":{"lines":["a",1]}}`, `{"a\u0000":1}`, `{"small":-129}`, "\xff", `{"amount":1}{"amount":2}`,
		`{"amount":100,"amount":99999}`, `{"TERMINALID":"10000001"}`, "{\"terminalId\":\"\xff\"}", "{\"a\xff\":1}", `{"terminalId":"\ud800"}`,
		`{"terminalId":"a\u0000b"}`, "{\"terminalId\":\"\t\"}", `null`, `{"nested":null}`, `{"nested":{"lines":["a"],"lines":[]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var dst sample
		err := DecodeJSON(r, &dst)
		if err == nil {
			return
		}
		code := instore.ErrorCode(err)
		if s := instore.HTTPStatus(code); s < 400 || s >= 500 {
			t.Fatalf("DecodeJSON(%q) = %v: status %d, want 4xx", body, err, s)
		}
		p := NewProblem(err, "req", &instore.Metadata{})
		if p.Status != instore.HTTPStatus(code) || p.Type != "urn:instore:problem:"+code {
			t.Fatalf("NewProblem(%v) = %+v", err, p)
		}
	})
}

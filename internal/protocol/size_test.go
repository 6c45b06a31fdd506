package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/instore-dev/instore"
)

// escapeAll rewrites every string of the JSON document b (member names
// too) with every character as a \u escape, one outside the Basic
// Multilingual Plane as an escaped surrogate pair: the longest form JSON
// allows a string, as a terminal's encoder may write it (Python's
// json.dumps does for anything not ASCII).
func escapeAll(t *testing.T, b []byte) []byte {
	t.Helper()
	var out []byte
	for i := 0; i < len(b); {
		if b[i] != '"' {
			out = append(out, b[i])
			i++
			continue
		}
		j := i + 1
		for b[j] != '"' {
			if b[j] == '\\' {
				j++
			}
			j++
		}
		var s string
		if err := json.Unmarshal(b[i:j+1], &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, '"')
		for _, r := range s {
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		}
		out = append(out, '"')
		i = j + 1
	}
	return out
}

// longest returns the largest form of a message: indented (a line break
// and two spaces per level, more whitespace than a compact encoder or
// Python's ", " and ": " write), every string escaped at its longest.
func longest(t *testing.T, env *Envelope, data any) []byte {
	t.Helper()
	e := map[string]any{"type": env.Type, "id": env.ID}
	if env.Re != "" {
		e["re"] = env.Re
	}
	if env.Ref != "" {
		e["ref"] = env.Ref
	}
	if data != nil {
		e["data"] = data
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return escapeAll(t, b)
}

// TestLargestMessagesFit builds the largest legal message of every type,
// in both directions, with every field at its longest and its text of
// characters outside the Basic Multilingual Plane (4 bytes of UTF-8, 12
// escaped), writes it as Encode does and at its longest (longest), and
// checks that each form decodes as valid and fits MaxFrameBytes: no legal
// message is refused for its size. It also holds the parts of the limit
// to account: what a message holds besides its arrays of lines fits
// maxOtherBytes, an array of lines MaxLinesBytes, and the largest result
// comes within maxOtherBytes of the limit, which is so no larger than it
// must be.
func TestLargestMessagesFit(t *testing.T) {
	const wide = "\U0001F600" // 4 bytes of UTF-8, 12 escaped
	text := func(n int) string { return strings.Repeat(wide, n) }
	id := func(c byte) string { return strings.Repeat(string(c), MaxIDLen) }
	lines := func(n, l int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat(s, l)
		}
		return out
	}
	maxInt := math.MaxInt
	vat := int64(MaxAmount)
	receipt := lines(MaxReceiptLines, MaxReceiptLineLen, wide)
	result := Result{StatusID: instore.StatusWrongPIN, EntryMode: text(32), CardBrand: text(32), MaskedPAN: "*********0123456789",
		AuthorizationCode: strings.Repeat("A", 16), PaymentMethodID: &maxInt, TipAmount: MaxAmount, CustomerReceipt: receipt, MerchantReceipt: receipt}
	tests := []struct {
		env  Envelope
		data any
		// stripped is data without its arrays of lines (nil: the same).
		stripped any
	}{
		{Envelope{Type: TypeHello, ID: id('h')}, Hello{Protocol: Version, Model: text(MaxTextLen), SoftwareVersion: text(MaxTextLen)}, nil},
		{Envelope{Type: TypeAck, ID: id('a'), Re: id('r'), Ref: id('f')}, nil, nil},
		{Envelope{Type: TypeProgress, ID: id('p'), Ref: id('f')}, Progress{Stage: instore.TerminalStages[0]}, nil},
		{Envelope{Type: TypeResult, ID: id('r'), Ref: id('f')}, result, func() Result { r := result; r.CustomerReceipt, r.MerchantReceipt = nil, nil; return r }()},
		{Envelope{Type: TypePrintResult, ID: id('p'), Ref: id('f')}, PrintResult{StatusID: instore.PrintTimeout}, nil},
		{Envelope{Type: TypeUpdateStatus, ID: id('u'), Ref: id('f')}, UpdateStatus{Status: UpdateFailed, SoftwareVersion: text(MaxTextLen), Reason: text(instore.MaxUpdateReasonLen)}, nil},
		{Envelope{Type: TypeConfirm, ID: id('c'), Re: id('r'), Ref: id('f')}, nil, nil},
		{Envelope{Type: TypeForwarded, ID: id('w'), Ref: id('f')}, Forwarded{Declined: new(true), ForwardedAt: time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))}, nil},
		{Envelope{Type: TypeLinkCode, ID: id('l')}, LinkCode{Code: id('9')}, nil},
		{Envelope{Type: TypeLinked, ID: id('l')}, Linked{TerminalID: id('T'), MinSoftwareVersion: text(MaxTextLen)}, nil},
		{Envelope{Type: TypePurchase, ID: id('p'), Ref: id('f')}, Payment{Amount: MaxAmount, CashbackAmount: MaxAmount, VATAmount: &vat, Currency: "SEK",
			PaymentMethodID: &maxInt, ECRReference: text(instore.MaxECRReferenceLen), Deadline: time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.UTC),
			PaymentMethodCode: text(MaxIDLen), Tip: &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{100, 99, 98}}}, nil}, // a tip at its longest
		{Envelope{Type: TypeRefund, ID: id('p'), Ref: id('f')}, Payment{Amount: MaxAmount, VATAmount: &vat, Currency: "SEK",
			PaymentMethodID: &maxInt, ECRReference: text(instore.MaxECRReferenceLen), Deadline: time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.UTC),
			OriginalRef: id('o'), PaymentMethodCode: text(MaxIDLen)}, nil},
		{Envelope{Type: TypeCapture, ID: id('p'), Ref: id('f')}, Payment{Amount: MaxAmount, TipAmount: MaxAmount, VATAmount: &vat, Currency: "SEK",
			ECRReference: text(instore.MaxECRReferenceLen), Deadline: time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.UTC), OriginalRef: id('o')}, nil},
		{Envelope{Type: TypeReversal, ID: id('r'), Ref: id('f')}, Reversal{Reason: instore.ReversalByECR, OriginalRef: id('o')}, nil},
		{Envelope{Type: TypeCancel, ID: id('c'), Ref: id('f')}, Cancel{Reason: instore.CancelAckTimeout}, nil},
		{Envelope{Type: TypePrint, ID: id('p'), Ref: id('f')}, Print{Lines: lines(instore.MaxPrintLines, instore.MaxPrintLineLen, wide)}, Print{}},
		// What Go's encoder (Encode) writes longest: < > & and U+2028 as
		// \u escapes of 6 bytes.
		{Envelope{Type: TypePrint, ID: id('p'), Ref: id('f')}, Print{Lines: lines(instore.MaxPrintLines, instore.MaxPrintLineLen/2, "<\u2028")}, Print{}},
		{Envelope{Type: TypeUpdate, ID: id('u'), Ref: id('f')}, Update{PackageID: id('k'), Name: text(200), Version: text(MaxTextLen), SizeBytes: math.MaxInt64,
			SHA256: strings.Repeat("f", 64), Mandatory: true}, nil},
	}
	var largestResult int
	for _, tt := range tests {
		t.Run(tt.env.Type, func(t *testing.T) {
			env := tt.env
			if tt.data != nil {
				b, err := json.Marshal(tt.data)
				if err != nil {
					t.Fatal(err)
				}
				env.Data = b
			}
			goForm, err := Encode(&env)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			long := longest(t, &tt.env, tt.data)
			frames := [][]byte{goForm, long}
			for i, frame := range frames {
				if len(frame) > MaxFrameBytes {
					t.Errorf("%s of %d bytes, more than MaxFrameBytes %d", tt.env.Type, len(frame), MaxFrameBytes)
				}
				got, err := Decode(frame)
				if err != nil {
					t.Fatalf("Decode of the largest %s: %v", tt.env.Type, err)
				}
				// The server writes its messages as Encode does; the
				// longest form of one is only measured (encoding/json's
				// time.Time takes no escapes).
				if tt.data != nil && (i == 0 || FromTerminal(tt.env.Type)) {
					dst := spec(t, got.Type)
					if err := DecodeData(got, dst); err != nil {
						t.Fatalf("DecodeData of the largest %s: %v", tt.env.Type, err)
					}
				}
			}
			stripped := tt.stripped
			if stripped == nil {
				stripped = tt.data
			}
			if n := len(longest(t, &tt.env, stripped)); n > maxOtherBytes {
				t.Errorf("%s without its lines: %d bytes, more than maxOtherBytes %d", tt.env.Type, n, maxOtherBytes)
			}
			if tt.env.Type == TypeResult {
				largestResult = len(long)
			}
		})
	}
	// An array of lines at its longest, at the depth of a result's
	// receipts (level 3: a line break and six spaces per line).
	b, _ := json.MarshalIndent(map[string]any{"a": map[string]any{"b": receipt}}, "", "  ")
	if n := len(escapeAll(t, b)); n > MaxLinesBytes {
		t.Errorf("a receipt at its longest: %d bytes, more than MaxLinesBytes %d", n, MaxLinesBytes)
	}
	if largestResult < MaxFrameBytes-maxOtherBytes {
		t.Errorf("the largest result is %d bytes, the limit %d: larger than it must be", largestResult, MaxFrameBytes)
	}
}

// spec returns a new value of the data type of typ.
func spec(t *testing.T, typ string) any {
	t.Helper()
	d := NewData(typ)
	if d == nil {
		t.Fatalf("no data type for %s", typ)
	}
	return d
}

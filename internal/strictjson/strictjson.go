// Package strictjson is the one set of JSON decoding rules for what the
// service reads from its peers: the ECR's request bodies (internal/httpapi)
// and the terminals' frames (internal/protocol). Each caller words the
// errors for its own peer; the rules are these:
//
//   - a member name matches a field only exactly ("TERMINALID" is not
//     terminalId, "Type" is not type);
//   - a name given twice in one object is refused, rather than one of the
//     values silently winning;
//   - text that is not UTF-8 (raw bytes, or an escaped lone surrogate) is
//     refused rather than replaced, in a request body (Options); in a
//     terminal's frame (FrameOptions) it is read as U+FFFD, as the
//     terminal protocol always did: a result is never refused for one
//     character of its receipt (raw bytes that are not UTF-8 never get
//     this far: the gateway refuses such a text message with 1007);
//   - a member no field of the destination names is refused;
//   - exactly one JSON value: anything after it but white space is refused.
//
// Together with what JSON itself refuses (raw control characters in a
// string) and what encoding/json/v2 does for every caller (a number
// decodes into an integer field only when it is an integer in range; null
// is the field's zero value, as if absent).
package strictjson

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Options are the decoding options of every peer's JSON: the defaults of
// encoding/json/v2 spelled out, so that no change of default loosens them.
var Options = json.JoinOptions(
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
	json.MatchCaseInsensitiveNames(false),
	json.RejectUnknownMembers(true),
)

// FrameOptions are Options for a terminal's frame: the same rules, but an
// escaped lone surrogate is read as U+FFFD (see the package comment).
var FrameOptions = json.JoinOptions(Options, jsontext.AllowInvalidUTF8(true))

// ErrTrailingData is Unmarshal's error for a text holding more than one
// JSON value (or one value and then something that is not JSON).
var ErrTrailingData = errors.New("strictjson: more than one JSON value")

// Unmarshal decodes the one JSON value of b into dst with Options. Its
// error is a *jsontext.SyntacticError, a *json.SemanticError, or
// ErrTrailingData when the value is followed by anything but white space.
//
// The whole text goes through one call, which refuses anything after the
// value too; only a refused text goes through the streaming decoder, which
// tells a second value from other errors.
func Unmarshal(b []byte, dst any) error { return unmarshal(b, dst, Options) }

// UnmarshalFrame is Unmarshal with FrameOptions, for a terminal's frame.
func UnmarshalFrame(b []byte, dst any) error { return unmarshal(b, dst, FrameOptions) }

func unmarshal(b []byte, dst any, opts json.Options) error {
	first := json.Unmarshal(b, dst, opts)
	if first == nil {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b), opts)
	if err := json.UnmarshalDecode(dec, dst, opts); err != nil {
		if err == io.EOF { // no value at all: the one call's error says so
			return first
		}
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}

// Valid reports whether b is exactly one JSON value by Options (no
// duplicate names, valid UTF-8).
func Valid(b []byte) bool {
	return jsontext.Value(b).IsValid(Options)
}

// ValidFrame is Valid by FrameOptions.
func ValidFrame(b []byte) bool {
	return jsontext.Value(b).IsValid(FrameOptions)
}

package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Error is why a frame or a data object was refused. Field names what is
// wrong ("id", "data.amount"; empty for the frame as a whole) and Problem
// says how. Neither ever quotes a value the peer sent, so an Error is safe
// to log and to send back as a close reason.
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "protocol: " + e.Problem
	}
	return "protocol: " + e.Field + ": " + e.Problem
}

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Directions a message type travels in.
const (
	fromTerminal = 1 << iota
	fromServer
)

// Data rules of a message type.
const (
	dataNone     = iota // absent (or an empty object)
	dataRequired        // a data object must be present
	dataAny             // optional, not checked by this package yet
)

// typeSpec is what the envelope of a message type must carry.
type typeSpec struct {
	from int
	ref  bool // ref required
	re   bool // re required
	// reAllowed: re may be given (confirm; ack, naming the command).
	reAllowed bool
	data      int
	// dataType is the Go type of the data object (nil: not defined yet).
	dataType reflect.Type
}

var types = map[string]typeSpec{
	TypeHello:        {from: fromTerminal, data: dataRequired, dataType: reflect.TypeFor[Hello]()},
	TypeAck:          {from: fromTerminal, ref: true, reAllowed: true, data: dataNone},
	TypeProgress:     {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[Progress]()},
	TypeResult:       {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[Result]()},
	TypePrintResult:  {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[PrintResult]()},
	TypeUpdateStatus: {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[UpdateStatus]()},
	TypeLinkCode:     {from: fromServer, data: dataRequired, dataType: reflect.TypeFor[LinkCode]()},
	TypeLinked:       {from: fromServer, data: dataRequired, dataType: reflect.TypeFor[Linked]()},
	TypePurchase:     {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeRefund:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeReversal:     {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Reversal]()},
	TypeCancel:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Cancel]()},
	TypePrint:        {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Print]()},
	TypeUpdate:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Update]()},
	TypeConfirm:      {from: fromTerminal | fromServer, re: true, reAllowed: true, data: dataNone},
}

// FromTerminal reports whether a terminal may send messages of type typ.
func FromTerminal(typ string) bool { return types[typ].from&fromTerminal != 0 }

// FromServer reports whether the server may send messages of type typ.
func FromServer(typ string) bool { return types[typ].from&fromServer != 0 }

// validID reports whether s is 1-MaxIDLen printable ASCII characters
// without spaces: message ids and references are compared byte for byte
// and logged, so they carry nothing a terminal could get subtly wrong.
func validID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Validate checks an envelope as Decode does: the type is known, the id
// valid, ref and re valid and present where the type needs them, data a
// JSON object where the type has one.
func (env *Envelope) Validate() error {
	spec, ok := types[env.Type]
	switch {
	case env.Type == "":
		return errorf("type", "required")
	case !ok:
		return errorf("type", "unknown message type")
	case env.ID == "":
		return errorf("id", "required")
	case !validID(env.ID):
		return errorf("id", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	case env.Re != "" && !validID(env.Re):
		return errorf("re", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	case env.Ref != "" && !validID(env.Ref):
		return errorf("ref", "must be 1-%d printable ASCII characters without spaces", MaxIDLen)
	case spec.re && env.Re == "":
		return errorf("re", "required for %s", env.Type)
	case env.Re != "" && !spec.reAllowed:
		return errorf("re", "not allowed for %s", env.Type)
	case spec.ref && env.Ref == "":
		return errorf("ref", "required for %s", env.Type)
	case len(env.Data) > MaxFrameBytes:
		return errorf("data", "larger than %d bytes", MaxFrameBytes)
	}
	if len(env.Data) > 0 {
		if !isObject(env.Data) {
			return errorf("data", "must be a JSON object")
		}
		if spec.data == dataNone && !isEmptyObject(env.Data) {
			return errorf("data", "not allowed for %s", env.Type)
		}
	} else if spec.data == dataRequired {
		return errorf("data", "required for %s", env.Type)
	}
	return nil
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && json.Valid(b)
}

func isEmptyObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && len(m) == 0
}

// Field bits of the envelope, to refuse duplicates.
var envelopeFields = map[string]int{"type": 1, "id": 2, "re": 4, "ref": 8, "data": 16}

// Decode parses and validates one frame. It is strict: the frame is one
// JSON object with no field but type, id, re, ref and data (exact names,
// each at most once), the strings are strings, data is an object, and the
// envelope passes Validate. A null member counts as absent. The data object
// is returned compacted and is checked by DecodeData, not here.
func Decode(frame []byte) (*Envelope, error) {
	if len(frame) > MaxFrameBytes {
		return nil, errorf("", "frame larger than %d bytes", MaxFrameBytes)
	}
	d := json.NewDecoder(bytes.NewReader(frame))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, errorf("", "not a JSON object")
	}
	var env Envelope
	seen := 0
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, errorf("", "not valid JSON")
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, errorf("", "not valid JSON")
		}
		bit, ok := envelopeFields[key]
		if !ok {
			return nil, errorf(quoteKey(key), "unknown field")
		}
		if seen&bit != 0 {
			return nil, errorf(key, "duplicate field")
		}
		seen |= bit
		if string(raw) == "null" {
			continue
		}
		if key == "data" {
			if raw[0] != '{' {
				return nil, errorf("data", "must be a JSON object")
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return nil, errorf("data", "not valid JSON")
			}
			env.Data = buf.Bytes()
			continue
		}
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, errorf(key, "must be a string")
		}
		switch key {
		case "type":
			env.Type = s
		case "id":
			env.ID = s
		case "re":
			env.Re = s
		case "ref":
			env.Ref = s
		}
	}
	if _, err := d.Token(); err != nil { // the closing brace
		return nil, errorf("", "not valid JSON")
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errorf("", "more than one JSON value in the frame")
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	return &env, nil
}

// quoteKey makes an unknown member name safe to log and short.
func quoteKey(k string) string {
	if len(k) > 32 {
		k = k[:32] + "..."
	}
	return strconv.QuoteToASCII(k)
}

// Encode validates env and returns its frame: compact JSON, HTML characters
// not escaped, so that Decode(Encode(env)) gives env back byte for byte.
func Encode(env *Envelope) ([]byte, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return nil, fmt.Errorf("protocol: encode %s: %w", env.Type, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxFrameBytes {
		return nil, errorf("", "frame larger than %d bytes", MaxFrameBytes)
	}
	return b, nil
}

// validator is implemented by the data types that know their rules.
type validator interface{ Validate() error }

// NewEnvelope builds a message of type typ with the given id and ref and
// data (nil for none), validating data first when it has a Validate
// method.
func NewEnvelope(typ, id, ref string, data any) (*Envelope, error) {
	env := &Envelope{Type: typ, ID: id, Ref: ref}
	if data != nil {
		v, ok := data.(validator)
		if !ok { // a value whose pointer has the method
			pv := reflect.New(reflect.TypeOf(data))
			pv.Elem().Set(reflect.ValueOf(data))
			v, ok = pv.Interface().(validator)
		}
		if ok {
			if err := v.Validate(); err != nil {
				return nil, err
			}
		}
		b, err := json.Marshal(data)
		if err != nil {
			return nil, fmt.Errorf("protocol: encode %s data: %w", typ, err)
		}
		env.Data = b
	}
	return env, env.Validate()
}

// DecodeData decodes env.Data into dst (a pointer to the data type of
// env.Type, Hello for hello and so on) strictly: every member must be a
// field of dst by its exact name, at most once, of the right JSON type,
// with nothing after the object; null counts as absent. The decoded value
// is then validated. For types whose data is not defined in this package
// yet, dst may be any pointer and is only decoded.
func DecodeData(env *Envelope, dst any) error {
	spec, ok := types[env.Type]
	if !ok {
		return errorf("type", "unknown message type")
	}
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("protocol: DecodeData needs a non-nil pointer, not %T", dst)
	}
	if spec.dataType != nil && rv.Elem().Type() != spec.dataType {
		return fmt.Errorf("protocol: the data of %s is a %v, not a %T", env.Type, spec.dataType, dst)
	}
	if len(env.Data) == 0 {
		if spec.data == dataRequired {
			return errorf("data", "required for %s", env.Type)
		}
	} else {
		if err := checkMembers(env.Data, rv.Elem().Type()); err != nil {
			return err
		}
		d := json.NewDecoder(bytes.NewReader(env.Data))
		d.DisallowUnknownFields()
		if err := d.Decode(dst); err != nil {
			return dataError(err)
		}
		if _, err := d.Token(); err != io.EOF {
			return errorf("data", "more than one JSON value")
		}
	}
	if v, ok := dst.(validator); ok {
		return v.Validate()
	}
	return nil
}

// checkMembers refuses the members encoding/json would let through: names
// that match a field only case-insensitively, and duplicates.
func checkMembers(data []byte, t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := jsonNames(t)
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return errorf("data", "must be a JSON object")
	}
	seen := make(map[string]bool, len(names))
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return errorf("data", "not valid JSON")
		}
		key, _ := tok.(string)
		if !names[key] {
			return errorf("data."+quoteKey(key), "unknown field")
		}
		if seen[key] {
			return errorf("data."+key, "duplicate field")
		}
		seen[key] = true
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return errorf("data", "not valid JSON")
		}
	}
	return nil
}

var jsonNamesCache sync.Map // reflect.Type -> map[string]bool

// jsonNames returns the JSON member names of a struct type's fields.
func jsonNames(t reflect.Type) map[string]bool {
	if v, ok := jsonNamesCache.Load(t); ok {
		return v.(map[string]bool)
	}
	names := make(map[string]bool, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			if n, _, _ := strings.Cut(tag, ","); n != "" {
				name = n
			}
		}
		names[name] = true
	}
	jsonNamesCache.Store(t, names)
	return names
}

// dataError turns an encoding/json error into an Error naming the field.
func dataError(err error) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := "data"
		if ute.Field != "" {
			field += "." + ute.Field
		}
		return errorf(field, "must be a JSON %s", jsonKind(ute.Type))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errorf("data", "not valid JSON")
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return errorf("data", "a time is not in RFC 3339 format")
	}
	return errorf("data", "invalid")
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		if t == reflect.TypeFor[time.Time]() {
			return "string in RFC 3339 format"
		}
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer in range"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return "string in RFC 3339 format"
		}
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value of another type"
}

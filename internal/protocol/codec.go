package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/instore-dev/instore/internal/strictjson"
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
	TypeForwarded:    {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[Forwarded]()},
	TypeLinkCode:     {from: fromServer, data: dataRequired, dataType: reflect.TypeFor[LinkCode]()},
	TypeLinked:       {from: fromServer, data: dataRequired, dataType: reflect.TypeFor[Linked]()},
	TypePurchase:     {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeRefund:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeReversal:     {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Reversal]()},
	TypePreAuth:      {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeIncrement:    {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeCapture:      {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeVoid:         {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Payment]()},
	TypeCancel:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Cancel]()},
	TypePrint:        {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Print]()},
	TypeUpdate:       {from: fromServer, ref: true, data: dataRequired, dataType: reflect.TypeFor[Update]()},
	TypeConfirm:      {from: fromTerminal | fromServer, re: true, reAllowed: true, data: dataNone},
	TypeClose:        {from: fromServer, ref: true, data: dataNone},
	TypeBatch:        {from: fromTerminal, ref: true, data: dataRequired, dataType: reflect.TypeFor[Batch]()},
}

// FromTerminal reports whether a terminal may send messages of type typ.
func FromTerminal(typ string) bool { return types[typ].from&fromTerminal != 0 }

// FromServer reports whether the server may send messages of type typ.
func FromServer(typ string) bool { return types[typ].from&fromServer != 0 }

// NewData returns a pointer to a new value of the data type of typ (a
// *Payment for purchase and refund), to decode its data into with
// DecodeData; nil for a type with no data (ack, confirm) or an unknown one.
func NewData(typ string) any {
	if spec, ok := types[typ]; ok && spec.dataType != nil {
		return reflect.New(spec.dataType).Interface()
	}
	return nil
}

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
	return len(b) >= 2 && b[0] == '{' && strictjson.ValidFrame(b)
}

func isEmptyObject(b []byte) bool {
	var m map[string]jsontext.Value
	return strictjson.UnmarshalFrame(b, &m) == nil && len(m) == 0
}

// wireEnvelope is the envelope as Decode reads it: data kept as its text.
type wireEnvelope struct {
	Type string         `json:"type"`
	ID   string         `json:"id"`
	Re   string         `json:"re"`
	Ref  string         `json:"ref"`
	Data jsontext.Value `json:"data"`
}

// Decode parses and validates one frame. It is strict, by the rules of
// internal/strictjson shared with the HTTP API: the frame is one JSON
// object with no field but type, id, re, ref and data (exact names, each at
// most once, in no object of the frame), valid UTF-8, the strings are
// strings, data is an object, and the envelope passes Validate. A null
// member counts as absent. The data object is returned compacted and is
// checked by DecodeData, not here.
func Decode(frame []byte) (*Envelope, error) {
	if len(frame) > MaxFrameBytes {
		return nil, errorf("", "frame larger than %d bytes", MaxFrameBytes)
	}
	var w wireEnvelope
	if err := strictjson.UnmarshalFrame(frame, &w); err != nil {
		return nil, envelopeError(err)
	}
	env := Envelope{Type: w.Type, ID: w.ID, Re: w.Re, Ref: w.Ref}
	if len(w.Data) > 0 && w.Data.Kind() != 'n' {
		if w.Data.Kind() != '{' {
			return nil, errorf("data", "must be a JSON object")
		}
		if err := w.Data.Compact(strictjson.FrameOptions); err != nil { // cannot fail: the value was decoded
			return nil, errorf("data", "not valid JSON")
		}
		env.Data = json.RawMessage(w.Data)
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	return &env, nil
}

// strictError words the strictjson errors a frame and its data object
// share, naming the member below prefix ("" for the frame, "data"): a
// second value (said as trailing), a field named twice, an unknown field.
// Any other error is nil, for the caller to word. (A field named twice is
// a syntactic error, an unknown one a semantic error: dataError's case of
// any other syntactic error never takes one of these.)
func strictError(err error, prefix, trailing string) error {
	var (
		syn *jsontext.SyntacticError
		sem *jsonv2.SemanticError
	)
	switch {
	case errors.Is(err, strictjson.ErrTrailingData):
		return errorf(prefix, "%s", trailing)
	case errors.As(err, &syn) && errors.Is(err, jsontext.ErrDuplicateName):
		return errorf(fieldOf(prefix, syn.JSONPointer), "duplicate field")
	case errors.As(err, &sem) && errors.Is(err, jsonv2.ErrUnknownName):
		return errorf(unknownField(prefix, sem.JSONPointer), "unknown field")
	}
	return nil
}

// envelopeError words a strictjson error of a frame.
func envelopeError(err error) error {
	if e := strictError(err, "", "more than one JSON value in the frame"); e != nil {
		return e
	}
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &sem) && sem.JSONPointer == "":
		return errorf("", "not a JSON object")
	case errors.As(err, &sem):
		return errorf(fieldOf("", sem.JSONPointer), "must be a string")
	}
	return errorf("", "not valid JSON")
}

// fieldOf names the member at p below prefix ("data", or "" for the
// frame) as this package names fields: dotted, without array indexes
// ("data.customerReceipt").
func fieldOf(prefix string, p jsontext.Pointer) string {
	field := prefix
	for tok := range p.Tokens() {
		if isIndex(tok) {
			continue
		}
		if field != "" {
			field += "."
		}
		field += tok
	}
	return field
}

// unknownField is fieldOf for a member no field names, the unknown name
// quoted and cut short (it is the peer's text).
func unknownField(prefix string, p jsontext.Pointer) string {
	parent := fieldOf(prefix, p.Parent())
	if parent != "" {
		parent += "."
	}
	return parent + quoteKey(p.LastToken())
}

func isIndex(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
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

// typedValidator is implemented by a data type several message types
// share (Payment), whose rules differ by type: ValidateAs is called
// instead of Validate.
type typedValidator interface{ ValidateAs(typ string) error }

// validate checks v, the data of a message of type typ, by its rules.
func validate(typ string, v any) error {
	switch v := v.(type) {
	case typedValidator:
		return v.ValidateAs(typ)
	case validator:
		return v.Validate()
	}
	return nil
}

// NewEnvelope builds a message of type typ with the given id and ref and
// data (nil for none), validating data first when it has a Validate
// method.
func NewEnvelope(typ, id, ref string, data any) (*Envelope, error) {
	env := &Envelope{Type: typ, ID: id, Ref: ref}
	if data != nil {
		v := data
		if rv := reflect.ValueOf(data); rv.Kind() != reflect.Pointer { // a value whose pointer has the methods
			pv := reflect.New(rv.Type())
			pv.Elem().Set(rv)
			v = pv.Interface()
		}
		if err := validate(typ, v); err != nil {
			return nil, err
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
// env.Type, Hello for hello and so on) strictly, by the rules of
// internal/strictjson: every member must be a field of dst by its exact
// name, at most once, of the right JSON type, with nothing after the
// object; null counts as absent. The decoded value is then validated. For
// types whose data is not defined in this package yet, dst may be any
// pointer and is only decoded.
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
	} else if err := strictjson.UnmarshalFrame(env.Data, dst); err != nil {
		return dataError(err)
	}
	return validate(env.Type, dst)
}

// dataError words a strictjson error of a data object, naming the field.
func dataError(err error) error {
	if e := strictError(err, "data", "more than one JSON value"); e != nil {
		return e
	}
	var (
		syn *jsontext.SyntacticError
		sem *jsonv2.SemanticError
	)
	switch {
	case errors.As(err, &syn):
		return errorf("data", "not valid JSON")
	case errors.As(err, &sem) && sem.GoType == reflect.TypeFor[time.Time]() && sem.JSONKind == '"':
		return errorf("data", "a time is not in RFC 3339 format")
	case errors.As(err, &sem) && sem.GoType != nil:
		return errorf(fieldOf("data", sem.JSONPointer), "must be a JSON %s", jsonKind(sem.GoType))
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

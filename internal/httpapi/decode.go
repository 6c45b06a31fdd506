package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/instore-dev/instore"
)

// DecodeJSON reads a JSON request body into dst strictly: the media type
// must be application/json (415 otherwise), the body at most the API's
// limit (413), one JSON value with no unknown fields and no wrong types
// (400 validation, with one entry per field in errors).
func DecodeJSON(r *http.Request, dst any) error {
	if err := requireMediaType(r, "application/json"); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return DecodeJSONBytes(body, dst)
}

// DecodeJSONBytes is the decoding half of DecodeJSON, for a body already
// read (the idempotency layer hashes the bytes first).
func DecodeJSONBytes(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return validation(instore.FieldError{Field: "", Message: "a JSON request body is required"})
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return validation(instore.FieldError{Field: "", Message: "the body must hold exactly one JSON value"})
	}
	return nil
}

// ReadForm reads an application/x-www-form-urlencoded body (415 for any
// other media type, 413 past the limit).
func ReadForm(r *http.Request) error {
	if err := requireMediaType(r, "application/x-www-form-urlencoded"); err != nil {
		return err
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf413(mbe.Limit)
		}
		return validation(instore.FieldError{Field: "", Message: "the form body is malformed"})
	}
	return nil
}

func requireMediaType(r *http.Request, want string) error {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != want {
		return instore.Errorf(instore.EUnsupportedMediaType, "The request body must be %s.", want)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return instore.Errorf(instore.EUnsupportedMediaType, "The request body must be UTF-8.")
	}
	return nil
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, Errorf413(mbe.Limit)
		}
		return nil, instore.Errorf(instore.EValidation, "The request body could not be read.")
	}
	return b, nil
}

func validation(fields ...instore.FieldError) error {
	return &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.", Fields: fields}
}

// Validation returns a validation error listing fields.
func Validation(fields ...instore.FieldError) error { return validation(fields...) }

// jsonError turns an encoding/json error into field errors whose field is a
// JSON pointer.
func jsonError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return validation(instore.FieldError{Field: "", Message: fmt.Sprintf("malformed JSON at byte %d", syn.Offset)})
	case errors.Is(err, io.ErrUnexpectedEOF):
		return validation(instore.FieldError{Field: "", Message: "malformed JSON: unexpected end of input"})
	case errors.As(err, &typ):
		field := pointer(typ.Field)
		if typ.Field == "" {
			return validation(instore.FieldError{Field: "", Message: "the body must be a JSON object"})
		}
		if strings.HasPrefix(typ.Value, "number") && isNumberKind(typ.Type.Kind().String()) {
			return validation(instore.FieldError{Field: field, Message: "number out of range or not an integer"})
		}
		return validation(instore.FieldError{Field: field, Message: "must be " + jsonKind(typ.Type.Kind().String())})
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return validation(instore.FieldError{Field: "/" + escapePointer(name), Message: "unknown field"})
	}
	return validation(instore.FieldError{Field: "", Message: "malformed JSON"})
}

func isNumberKind(k string) bool {
	return strings.HasPrefix(k, "int") || strings.HasPrefix(k, "uint") || strings.HasPrefix(k, "float")
}

func jsonKind(k string) string {
	switch {
	case isNumberKind(k):
		return "a number"
	case k == "string":
		return "a string"
	case k == "bool":
		return "a boolean"
	case k == "slice" || k == "array":
		return "an array"
	case k == "map" || k == "struct":
		return "an object"
	}
	return "of another type"
}

// pointer turns encoding/json's dotted field path into a JSON pointer.
func pointer(dotted string) string {
	parts := strings.Split(dotted, ".")
	for i, p := range parts {
		parts[i] = escapePointer(p)
	}
	return "/" + strings.Join(parts, "/")
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

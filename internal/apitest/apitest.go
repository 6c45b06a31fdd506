// Package apitest checks, in tests, that every HTTP response a server gives
// matches its OpenAPI document (api.OnlineYAML and later documents).
//
// A test wraps its HTTP client with a Validator:
//
//	v := apitest.NewValidator(t, api.OnlineYAML)
//	client := v.Client(t)
//	resp, err := client.Get(srv.URL + "/in-store/api/v1/metadata")
//
// Every response is matched to the operation of its method and path and
// checked: the status must be documented for that operation, headers the
// document marks required must be present and match their schema, and the
// content type and body must match the schema. Problem bodies
// (application/problem+json) are also checked against the error vocabulary of
// package instore: status equal to the HTTP status, requestId equal to the
// X-Request-Id header, the status of the problem type as in the code table,
// and for a service error code, errorId, errorCode and title as in the
// errorCodes list. A mismatch is reported with t.Errorf; the caller still gets
// the response, body intact.
//
// Requests themselves are not validated, credentials included: tests send
// bad requests on purpose. FieldsOf reads the fields of a validation error
// a test got without HTTP (from a request's Validate or the service).
package apitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/instore-dev/instore"
)

func init() {
	// kin-openapi decodes YAML bodies into values; a document served as YAML
	// is described as a string, so a string schema gets the raw text.
	openapi3filter.RegisterBodyDecoder("application/yaml", yamlBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/x-yaml", yamlBodyDecoder)
	// application/problem+json is registered as JSON by kin-openapi itself;
	// make sure of it in case a later version drops it.
	if openapi3filter.RegisteredBodyDecoder("application/problem+json") == nil {
		openapi3filter.RegisterBodyDecoder("application/problem+json", openapi3filter.JSONBodyDecoder)
	}
}

func yamlBodyDecoder(body io.Reader, h http.Header, schema *openapi3.SchemaRef, encFn openapi3filter.EncodingFn) (any, error) {
	if schema != nil && schema.Value != nil && schema.Value.Type != nil && schema.Value.Type.IsSingle() && schema.Value.Type.Is("string") {
		return openapi3filter.PlainBodyDecoder(body, h, schema, encFn)
	}
	return openapi3filter.YamlBodyDecoder(body, h, schema, encFn)
}

// maxBodyInError is how much of a response body an error message shows.
const maxBodyInError = 2 << 10

// spec is a loaded and validated document with its router, shared by every
// Validator of the same document content.
type spec struct {
	doc    *openapi3.T
	router routers.Router
	// opIDs lists the operationId of every operation, sorted.
	opIDs []string
	// unmatched is a made-up route whose responses are the document's
	// NotFound (404) and MethodNotAllowed (405) components, used to check
	// the answer to a request no operation matches; nil if the document has
	// neither.
	unmatched *routers.Route
}

type specEntry struct {
	once sync.Once
	spec *spec
	err  error
}

var specs sync.Map // [sha256.Size]byte -> *specEntry

func loadSpec(data []byte) (*spec, error) {
	e, _ := specs.LoadOrStore(sha256.Sum256(data), &specEntry{})
	entry := e.(*specEntry)
	entry.once.Do(func() { entry.spec, entry.err = parseSpec(data) })
	return entry.spec, entry.err
}

func parseSpec(data []byte) (*spec, error) {
	ctx := context.Background()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loading OpenAPI document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validating OpenAPI document: %w", err)
	}
	// Route on the path alone: tests run servers on random local ports, so
	// the document's servers must not take part in matching.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("building router: %w", err)
	}
	s := &spec{doc: doc, router: router}
	seen := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				return nil, fmt.Errorf("%s %s has no operationId", method, path)
			}
			if seen[op.OperationID] {
				return nil, fmt.Errorf("operationId %q is used twice", op.OperationID)
			}
			seen[op.OperationID] = true
			s.opIDs = append(s.opIDs, op.OperationID)
		}
	}
	slices.Sort(s.opIDs)

	if doc.Components != nil {
		var opts []openapi3.NewResponsesOption
		if r := doc.Components.Responses["NotFound"]; r != nil {
			opts = append(opts, openapi3.WithStatus(http.StatusNotFound, r))
		}
		if r := doc.Components.Responses["MethodNotAllowed"]; r != nil {
			opts = append(opts, openapi3.WithStatus(http.StatusMethodNotAllowed, r))
		}
		if len(opts) > 0 {
			op := openapi3.NewOperation()
			op.Responses = openapi3.NewResponses(opts...)
			s.unmatched = &routers.Route{Spec: doc, Path: "(no operation)", PathItem: &openapi3.PathItem{}, Operation: op}
		}
	}
	return s, nil
}

// Validator checks HTTP responses against one OpenAPI document and records
// which operations it saw. It is safe for concurrent use.
type Validator struct {
	spec *spec

	mu      sync.Mutex
	covered map[string]bool
}

// NewValidator returns a Validator for the OpenAPI document spec (YAML or
// JSON). The document is loaded and validated once per content and shared;
// each Validator records its own coverage. A document that does not load or
// validate fails the test.
func NewValidator(t testing.TB, spec []byte) *Validator {
	t.Helper()
	s, err := loadSpec(spec)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	return &Validator{spec: s, covered: map[string]bool{}}
}

// Doc returns the loaded document. Its servers are cleared; callers must not
// modify it.
func (v *Validator) Doc() *openapi3.T { return v.spec.doc }

// Covered returns, for the operationId of every operation of the document,
// whether a response to it was seen that passed validation.
func (v *Validator) Covered() map[string]bool {
	m := make(map[string]bool, len(v.spec.opIDs))
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range v.spec.opIDs {
		m[id] = v.covered[id]
	}
	return m
}

// Client returns an HTTP client whose responses are validated (see
// Transport), over http.DefaultTransport, with a 30 s timeout.
func (v *Validator) Client(t testing.TB) *http.Client {
	return &http.Client{Transport: v.Transport(t, http.DefaultTransport), Timeout: 30 * time.Second}
}

// Transport returns a RoundTripper that sends each request with next
// (http.DefaultTransport if nil), reads the whole response body, validates
// the response and hands it back with its body restored. A mismatch is
// reported with t.Errorf, naming method, path, status, the error and the
// body (at most 2 KiB of it). A request no operation matches is an error
// unless the answer is a 404 or 405 that matches the document's NotFound or
// MethodNotAllowed response. A transport error, or a failure to read the
// body, is returned as is and not reported. 101 Switching Protocols is passed
// through unchecked.
func (v *Validator) Transport(t testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{v: v, t: t, next: next}
}

type transport struct {
	v    *Validator
	t    testing.TB
	next http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("apitest: reading response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))

	_, err = tr.v.Check(req, resp, body)
	if err != nil {
		tr.t.Helper()
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		tr.t.Errorf("apitest: %s %s: response %d does not match the OpenAPI document: %v\nbody: %s",
			method, req.URL.Path, resp.StatusCode, err, truncate(body))
	}
	return resp, nil
}

func truncate(body []byte) string {
	if len(body) <= maxBodyInError {
		return string(body)
	}
	return fmt.Sprintf("%s... (%d bytes in all)", body[:maxBodyInError], len(body))
}

// Check validates one response to req, whose body has been read into body,
// and returns the operationId of the operation it answers ("" for an
// unmatched request); a response that passes counts towards Covered. It is
// what Transport uses, for callers that got a response some other way (an
// httptest.ResponseRecorder, say). resp.Body is not read.
func (v *Validator) Check(req *http.Request, resp *http.Response, body []byte) (operationID string, err error) {
	opID, err := v.check(req, resp, body)
	if err != nil {
		return "", err
	}
	if opID != "" {
		v.mu.Lock()
		v.covered[opID] = true
		v.mu.Unlock()
	}
	return opID, nil
}

func (v *Validator) check(req *http.Request, resp *http.Response, body []byte) (string, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	head := method == http.MethodHead
	lookup := req
	if method != req.Method || head {
		// HEAD answers like GET, without a body.
		lookup = req.Clone(req.Context())
		lookup.Method = method
		if head {
			lookup.Method = http.MethodGet
		}
	}
	route, pathParams, err := v.spec.router.FindRoute(lookup)
	opID := ""
	if err != nil {
		status := resp.StatusCode
		if v.spec.unmatched == nil || (status != http.StatusNotFound && status != http.StatusMethodNotAllowed) {
			return "", fmt.Errorf("no operation of the document matches %s %s (%v)", method, req.URL.Path, err)
		}
		route, pathParams = v.spec.unmatched, nil
	} else {
		opID = route.Operation.OperationID
	}
	if err := v.checkResponse(lookup, route, pathParams, resp, body, head); err != nil {
		return "", err
	}
	return opID, nil
}

func (v *Validator) checkResponse(req *http.Request, route *routers.Route, pathParams map[string]string, resp *http.Response, body []byte, head bool) error {
	status := resp.StatusCode
	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented for operation %s (documented: %s)",
			status, describe(route), strings.Join(slices.Sorted(maps.Keys(route.Operation.Responses.Map())), ", "))
	}
	doc := ref.Value

	// kin-openapi checks headers, but not for 304; check presence here for
	// every status, so the same rule holds everywhere.
	for _, name := range slices.Sorted(maps.Keys(doc.Headers)) {
		h := doc.Headers[name]
		if h != nil && h.Value != nil && h.Value.Required && len(resp.Header.Values(name)) == 0 {
			return fmt.Errorf("required response header %q is missing", name)
		}
	}
	if len(doc.Content) == 0 && len(body) > 0 && !head {
		return fmt.Errorf("status %d is documented without a body, but the response has %d bytes", status, len(body))
	}
	if head {
		// No body to check.
		return nil
	}

	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	opts.WithCustomSchemaErrorFunc(schemaErrorMessage)
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams,
			Route:      route,
			Options:    opts,
		},
		Status:  status,
		Header:  resp.Header,
		Options: opts,
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		return fmt.Errorf("operation %s: %w", describe(route), err)
	}

	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" {
		if err := checkProblem(resp, body); err != nil {
			return fmt.Errorf("operation %s: problem body: %w", describe(route), err)
		}
	}
	return nil
}

// schemaErrorMessage says where and what without dumping the schema and the
// value (the body is shown once, after the error).
func schemaErrorMessage(err *openapi3.SchemaError) string {
	if err.Origin != nil || err.Reason == "" {
		return "" // kin-openapi's own message
	}
	if strings.HasPrefix(err.Reason, "at '") {
		return err.Reason // JSON Schema 2020-12 reasons name the path already
	}
	return fmt.Sprintf("at %q: %s", "/"+strings.Join(err.JSONPointer(), "/"), err.Reason)
}

func describe(route *routers.Route) string {
	if route.Operation.OperationID != "" {
		return route.Operation.OperationID
	}
	return route.Path
}

const problemPrefix = "urn:instore:problem:"

// checkProblem checks a problem body against the error vocabulary of package
// instore, beyond what the schema can say.
func checkProblem(resp *http.Response, body []byte) error {
	var p struct {
		Type      string `json:"type"`
		Title     string `json:"title"`
		Status    int    `json:"status"`
		RequestID string `json:"requestId"`
		ErrorID   *int   `json:"errorId"`
		ErrorCode string `json:"errorCode"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return err
	}
	var errs []error
	if p.Status != resp.StatusCode {
		errs = append(errs, fmt.Errorf("status is %d, the response's is %d", p.Status, resp.StatusCode))
	}
	if id := resp.Header.Get("X-Request-Id"); id != "" && p.RequestID != id {
		errs = append(errs, fmt.Errorf("requestId is %q, X-Request-Id is %q", p.RequestID, id))
	}
	name, ok := strings.CutPrefix(p.Type, problemPrefix)
	if !ok {
		errs = append(errs, fmt.Errorf("type %q does not start with %s", p.Type, problemPrefix))
	} else if want := instore.HTTPStatus(name); want != resp.StatusCode {
		errs = append(errs, fmt.Errorf("type %q answers with status %d (error.go), not %d", p.Type, want, resp.StatusCode))
	}
	if p.ErrorCode != "" {
		md := instore.DefaultMetadata()
		c, found := md.ErrorCode(p.ErrorCode)
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("errorCode %q is not in the errorCodes list", p.ErrorCode))
		default:
			if p.Type != problemPrefix+p.ErrorCode {
				errs = append(errs, fmt.Errorf("errorCode %q with type %q, want type %s%s", p.ErrorCode, p.Type, problemPrefix, p.ErrorCode))
			}
			if p.ErrorID == nil || *p.ErrorID != c.ID {
				errs = append(errs, fmt.Errorf("errorCode %q wants errorId %d", p.ErrorCode, c.ID))
			}
			if p.Title != c.Description {
				errs = append(errs, fmt.Errorf("errorCode %q wants title %q, got %q", p.ErrorCode, c.Description, p.Title))
			}
		}
	}
	return errors.Join(errs...)
}

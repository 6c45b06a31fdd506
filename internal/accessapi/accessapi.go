// Package accessapi is the HTTP adapter of Access API 2.0, on its own
// listener and base URL: one route table with exactly the specification's
// paths, handlers that decode, call one domain operation and encode.
// Authentication, problems, body limits, strict JSON and idempotency are
// those of the Online API.
package accessapi

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
)

// Config holds what the Access API needs.
type Config struct {
	API     *httpapi.API
	Guard   *httpapi.Guard
	Service *service.Service
	// Store keeps the idempotency records.
	Store instore.IdempotencyStore
	// OpenAPI is the document served at /openapi.yaml.
	OpenAPI []byte
	Logger  *slog.Logger
	// IdempotencyHolders tells whether another node holding a key's
	// attempt is alive (several nodes); nil on one node.
	IdempotencyHolders httpapi.Holders
}

// idempotencyScope prefixes the customer id in the idempotency records'
// scope: the Online API scopes them by merchant, the Access API by
// customer, and the prefix keeps the two apart.
const idempotencyScope = "access:"

// Register adds the Access API's routes to cfg.API: the route table.
func Register(cfg Config) {
	a, g := cfg.API, cfg.Guard
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handlers{svc: cfg.Service}
	// Access API keys are scoped by the principal's customer.
	idem := &httpapi.Idempotency{API: a, Store: cfg.Store, Logger: logger, Clock: cfg.Service.Clock,
		Scope:   func(p *instore.Principal) string { return idempotencyScope + p.CustomerID },
		Holders: cfg.IdempotencyHolders}
	post := func(f httpapi.AuthedFunc) httpapi.HandlerFunc { return g.Wrap(idem.Wrap(f)) }
	doc := newDoc(cfg.OpenAPI)

	a.Handle("POST /oauth2/token", httpapi.LimitPeer(g.Limiter, httpapi.TokenHandler(g.Auth, instore.SurfaceAccess)))
	a.Handle("GET /openapi.yaml", g.Wrap(doc.serve))
	a.Handle("POST /getTerminalId", post(httpapi.Decoded(h.svc.AllocateTerminal, allocated)))
	a.Handle("POST /getTerminalInfo", g.Wrap(httpapi.Decoded(h.svc.TerminalInfo, terminalInfo)))
	a.Handle("GET /terminal/getPackages/{customerId}/{model}", g.Wrap(h.getPackages))
	a.Handle("POST /terminal/createUpdate", post(httpapi.Decoded(h.svc.CreateUpdate, updateCreated)))
}

// handlers are the Access API's operation handlers; those whose
// operation takes a JSON body are httpapi.Decoded, in the route table.
type handlers struct {
	svc *service.Service
}

func allocated(w http.ResponseWriter, t *instore.AllocatedTerminal) error {
	return httpapi.WriteJSON(w, http.StatusCreated, t.Wire())
}

func terminalInfo(w http.ResponseWriter, info *instore.TerminalInfo) error {
	return httpapi.WriteJSON(w, http.StatusOK, info.Wire())
}

func updateCreated(w http.ResponseWriter, u *instore.Update) error {
	return httpapi.WriteJSON(w, http.StatusCreated, u.Wire())
}

func (h *handlers) getPackages(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	ps, err := h.svc.Packages(r.Context(), p, r.PathValue("customerId"), r.PathValue("model"))
	if err != nil {
		return err
	}
	out := make([]*instore.Package, len(ps))
	for i, pk := range ps {
		out[i] = pk.Wire()
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"packages": out})
}

// doc is the OpenAPI document, served with an ETag.
type doc struct {
	body []byte
	etag string
}

func newDoc(body []byte) *doc {
	sum := sha256.Sum256(body)
	return &doc{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (d *doc) serve(w http.ResponseWriter, r *http.Request, _ *instore.Principal) error {
	h := w.Header()
	h.Set("Etag", d.etag)
	h.Set("Cache-Control", "private, no-cache")
	for _, part := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t := strings.TrimSpace(part); t == "*" || strings.TrimPrefix(t, "W/") == d.etag {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
	}
	h.Set("Content-Type", "application/yaml")
	h.Set("Content-Length", strconv.Itoa(len(d.body)))
	w.Write(d.body)
	return nil
}

// Package onlineapi is the HTTP adapter of the Online API
// (/in-store/api/v1): one route table, handlers that decode, call one
// domain operation and encode.
package onlineapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
)

// Prefix is the base path of the Online API.
const Prefix = "/in-store/api/v1"

// Config holds what the Online API needs.
type Config struct {
	API      *httpapi.API
	Guard    *httpapi.Guard
	Metadata *instore.Metadata
	Service  *service.Service
	Store    instore.Store
	// OpenAPI is the document served at /in-store/api/v1/openapi.yaml.
	OpenAPI []byte
	Logger  *slog.Logger
	// IdempotencyWait bounds how long a retry waits for the first request
	// with its Idempotency-Key before it answers 409 (default
	// httpapi.DefaultIdempotencyWait). It must be shorter than the server's write
	// timeout, or the answer is lost.
	IdempotencyWait time.Duration
	// IdempotencyHolders tells whether another node holding a key's
	// attempt is alive (several nodes); nil on one node.
	IdempotencyHolders httpapi.Holders
	// Streams bounds the event streams (zero members: the defaults).
	Streams StreamLimits
}

// Register adds the Online API's routes to cfg.API: the route table.
func Register(cfg Config) {
	a, g := cfg.API, cfg.Guard
	meta := newStaticDoc(mustJSON(cfg.Metadata), "application/json")
	doc := newStaticDoc(cfg.OpenAPI, "application/yaml")

	h := &handlers{svc: cfg.Service, meta: cfg.Metadata, streams: newStreamCounter(cfg.Streams)}
	// The service's clock, which also dates the expiry sweep's cut.
	idem := &httpapi.Idempotency{API: a, Store: cfg.Store, Logger: cfg.Logger, Clock: cfg.Service.Clock, Wait: cfg.IdempotencyWait,
		Holders: cfg.IdempotencyHolders}
	post := func(f httpapi.AuthedFunc) httpapi.HandlerFunc { return g.Wrap(idem.Wrap(f)) }

	// Limited per peer: the endpoint reads the store for any well-formed
	// client_id, before it knows the client.
	a.Handle("POST /oauth2/token", httpapi.LimitPeer(g.Limiter, httpapi.TokenHandler(g.Auth, instore.SurfaceOnline)))
	a.Handle("GET "+Prefix+"/metadata", g.Wrap(meta.serve))
	a.Handle("GET "+Prefix+"/openapi.yaml", g.Wrap(doc.serve))
	a.Handle("POST "+Prefix+"/terminal/link", post(httpapi.DecodedJSON(http.StatusOK, h.svc.Link)))
	a.Handle("POST "+Prefix+"/terminal/unlink", post(httpapi.DecodedJSON(http.StatusOK, h.svc.Unlink)))
	a.Handle("GET "+Prefix+"/terminals", g.Wrap(httpapi.Listed("terminals", h.svc.Terminals)))
	a.Handle("GET "+Prefix+"/terminal/{terminalId}", g.Wrap(httpapi.Named("terminalId", h.svc.Terminal, httpapi.JSONAnswer[*instore.TerminalView](http.StatusOK))))
	a.Handle("POST "+Prefix+"/purchase", post(httpapi.DecodedClaimed(h.svc.Purchase, h.transactionAt(http.StatusCreated))))
	a.Handle("GET "+Prefix+"/transaction/{onlineAPIRefId}", g.Wrap(h.transaction))
	a.Handle("GET "+Prefix+"/transaction/{onlineAPIRefId}/events", g.Wrap(httpapi.Named("onlineAPIRefId", h.svc.TransactionEvents, httpapi.ListAnswer[instore.TransactionEvent]("events"))))
	// The confirmed sale; a body, if any, is not read.
	a.Handle("POST "+Prefix+"/transaction/{onlineAPIRefId}/confirm", post(httpapi.Named("onlineAPIRefId", h.svc.Confirm, h.transactionOK)))
	a.Handle("POST "+Prefix+"/cancel", post(httpapi.Decoded(h.svc.Cancel, h.transactionAt(http.StatusAccepted))))
	a.Handle("POST "+Prefix+"/refund", post(httpapi.DecodedClaimed(h.svc.Refund, h.transactionAt(http.StatusCreated))))
	a.Handle("POST "+Prefix+"/reversal", post(httpapi.DecodedClaimed(h.svc.Reversal, h.transactionAt(http.StatusCreated))))
	a.Handle("POST "+Prefix+"/preauthorization", post(httpapi.DecodedClaimed(h.svc.Preauthorize, h.transactionAt(http.StatusCreated))))
	for path, op := range map[string]instore.TransactionType{"/increment": instore.TypeIncrement, "/capture": instore.TypeCapture, "/void": instore.TypeVoid} {
		a.Handle("POST "+Prefix+path, post(httpapi.DecodedClaimed(h.preAuthOp(op), h.transactionAt(http.StatusCreated))))
	}
	a.Handle("GET "+Prefix+"/transactions", g.Wrap(h.transactions))
	a.Handle("POST "+Prefix+"/terminal/{terminalId}/close", post(h.closeBatch))
	a.Handle("GET "+Prefix+"/batches", g.Wrap(h.batches))
	a.Handle("GET "+Prefix+"/batch/{batchId}", g.Wrap(h.batch))
	a.Handle("POST "+Prefix+"/print", post(httpapi.Decoded(h.svc.Print, h.printJobAt)))
	// A print job at its limits of lines and characters fits the body
	// however its JSON is written: 64 KiB would not.
	if a.BodyLimits == nil {
		a.BodyLimits = map[string]int64{}
	}
	a.BodyLimits[Prefix+"/print"] = instore.MaxPrintBodyBytes
	a.Handle("GET "+Prefix+"/totals", g.Wrap(h.totals))
	a.Handle("POST "+Prefix+"/reconciliation", post(httpapi.DecodedJSON(http.StatusOK, h.svc.Reconcile)))
	// 10,000 lines of an ECR's books at their longest (books.go).
	a.BodyLimits[Prefix+"/reconciliation"] = instore.MaxReconcileBodyBytes
	a.Handle("GET "+Prefix+"/print/{printId}", g.Wrap(httpapi.Named("printId", h.svc.PrintJob, h.printJobOK)))
	a.Handle("GET "+Prefix+"/events", g.Wrap(h.events))
	a.Handle("GET "+Prefix+"/events/stream", g.Wrap(h.eventStream))
	a.Handle("POST "+Prefix+"/webhooks", post(httpapi.Decoded(h.svc.CreateWebhook, webhookCreated)))
	a.Handle("GET "+Prefix+"/webhooks", g.Wrap(httpapi.Listed("webhooks", h.svc.Webhooks)))
	a.Handle("GET "+Prefix+"/webhooks/{webhookId}", g.Wrap(httpapi.Named("webhookId", h.svc.Webhook, httpapi.JSONAnswer[*instore.WebhookWire](http.StatusOK))))
	a.Handle("PATCH "+Prefix+"/webhooks/{webhookId}", g.Wrap(h.updateWebhook))
	a.Handle("DELETE "+Prefix+"/webhooks/{webhookId}", g.Wrap(h.deleteWebhook))
	a.Handle("POST "+Prefix+"/webhooks/{webhookId}/rotate-secret", post(httpapi.Named("webhookId", h.svc.RotateWebhookSecret, httpapi.JSONAnswer[*instore.WebhookWire](http.StatusOK))))
	a.Handle("GET "+Prefix+"/webhooks/{webhookId}/deliveries", g.Wrap(h.webhookDeliveries))
	a.Handle("POST "+Prefix+"/webhooks/{webhookId}/deliveries/{deliveryId}/retry", post(h.retryDelivery))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// staticDoc is a response encoded once at start: serving it costs a header
// copy and one write, with ETag revalidation.
type staticDoc struct {
	body []byte
	etag string
	// The header's values, shared by every response (net/http copies the
	// header before writing it); assigned one by one, which spares a map
	// iteration per request.
	contentType, etagValue, cacheControl, contentLength []string
}

func newStaticDoc(body []byte, contentType string) *staticDoc {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	return &staticDoc{
		body:          body,
		etag:          etag,
		contentType:   []string{contentType},
		etagValue:     []string{etag},
		cacheControl:  []string{"private, no-cache"},
		contentLength: []string{strconv.Itoa(len(body))},
	}
}

func (d *staticDoc) serve(w http.ResponseWriter, r *http.Request, _ *instore.Principal) error {
	h := w.Header()
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && inm[0] != "" && etagMatch(inm[0], d.etag) {
		h["Etag"] = d.etagValue
		h["Cache-Control"] = d.cacheControl
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h["Content-Type"] = d.contentType
	h["Etag"] = d.etagValue
	h["Cache-Control"] = d.cacheControl
	h["Content-Length"] = d.contentLength
	if r.Method != http.MethodHead {
		w.Write(d.body)
	}
	return nil
}

// etagMatch implements the weak comparison of If-None-Match (RFC 9110 13.1.2).
func etagMatch(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		t := strings.TrimSpace(part)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

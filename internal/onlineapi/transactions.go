package onlineapi

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
)

// writeJSON answers with a JSON body (httpapi.WriteJSON).
var writeJSON = httpapi.WriteJSON

// handlers are the Online API's operation handlers: decode, call one
// operation of the Service, encode. Those whose operation takes a JSON
// body are httpapi.Decoded, in the route table.
type handlers struct {
	svc     *service.Service
	meta    *instore.Metadata
	streams *streamCounter
}

// transactionAt answers status with a transaction and its Location.
func (h *handlers) transactionAt(status int) func(http.ResponseWriter, *instore.Transaction) error {
	return func(w http.ResponseWriter, t *instore.Transaction) error {
		w.Header().Set("Location", Prefix+"/transaction/"+t.ID)
		return writeJSON(w, status, h.meta.TransactionWire(t))
	}
}

// transactionOK answers 200 with a transaction.
func (h *handlers) transactionOK(w http.ResponseWriter, t *instore.Transaction) error {
	return writeJSON(w, http.StatusOK, h.meta.TransactionWire(t))
}

// printJobOK answers 200 with a print job.
func (h *handlers) printJobOK(w http.ResponseWriter, j *instore.PrintJob) error {
	return writeJSON(w, http.StatusOK, h.meta.PrintJobWire(j))
}

// printJobAt answers 200 with a print job and its Location.
func (h *handlers) printJobAt(w http.ResponseWriter, j *instore.PrintJob) error {
	w.Header().Set("Location", Prefix+"/print/"+j.ID)
	return h.printJobOK(w, j)
}

// repeated names the parameters of v given more than once: one of two
// values is not a choice to make for the client.
func repeated(v url.Values, names ...string) []instore.FieldError {
	var errs []instore.FieldError
	for _, name := range names {
		if len(v[name]) > 1 {
			errs = append(errs, instore.FieldError{Field: name, Message: "must be given once"})
		}
	}
	return errs
}

func (h *handlers) transaction(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if errs := repeated(r.URL.Query(), "wait", "afterVersion"); errs != nil {
		return httpapi.Validation(errs...)
	}
	wait := 0
	if q := r.URL.Query(); q.Has("wait") {
		n, err := atoi(q.Get("wait"))
		if err != nil || n > instore.MaxWait {
			return httpapi.Validation(instore.FieldError{Field: "wait", Message: "must be an integer number of seconds from 0 to 60"})
		}
		wait = int(n)
	}
	var after *int64
	if q := r.URL.Query(); q.Has("afterVersion") {
		n, err := atoi(q.Get("afterVersion"))
		if err != nil {
			return httpapi.Validation(instore.FieldError{Field: "afterVersion", Message: "must be a transaction version: an integer from 0"})
		}
		after = &n
	}
	if wait > 0 {
		httpapi.Waiting(w, httpapi.WaitLongPoll)
	}
	t, err := h.svc.Transaction(r.Context(), p, r.PathValue("onlineAPIRefId"), time.Duration(wait)*time.Second, after)
	if err != nil {
		return err
	}
	return h.transactionOK(w, t)
}

// listQuery parses the query of GET /transactions; shape errors are
// validation problems naming the parameter.
func listQuery(r *http.Request) (instore.ListQuery, error) {
	v := r.URL.Query()
	var q instore.ListQuery
	errs := repeated(v, "from", "to", "terminalId", "statusId", "ecrReference", "unconfirmed", "limit", "cursor", "type", "authorizationState", "forwarding")
	parseInt := func(name string) *int {
		if !v.Has(name) {
			return nil
		}
		n, err := atoi(v.Get(name))
		if err != nil || n > math.MaxInt32 {
			errs = append(errs, instore.FieldError{Field: name, Message: "must be an integer (decimal digits)"})
			return nil
		}
		i := int(n)
		return &i
	}
	q.From, q.To = queryTime(v, "from", &errs), queryTime(v, "to", &errs)
	q.StatusID = (*instore.TransactionStatus)(parseInt("statusId"))
	if l := parseInt("limit"); l != nil {
		q.Limit = *l
		if *l == 0 {
			errs = append(errs, instore.FieldError{Field: "limit", Message: "must be 1-1000"})
		}
	}
	q.TerminalID, q.ECRReference, q.Cursor = v.Get("terminalId"), v.Get("ecrReference"), v.Get("cursor")
	if v.Has("unconfirmed") {
		switch v.Get("unconfirmed") {
		case "true":
			q.Unconfirmed = true
		case "false":
		default:
			errs = append(errs, instore.FieldError{Field: "unconfirmed", Message: "must be true or false"})
		}
	}
	if v.Has("type") {
		for typ := range strings.SplitSeq(v.Get("type"), ",") {
			if !slices.Contains(instore.TransactionTypes, instore.TransactionType(typ)) {
				errs = append(errs, instore.FieldError{Field: "type", Message: "must list transaction types separated by commas: " + instore.JoinTypes(instore.TransactionTypes)})
				break
			}
			q.Types = append(q.Types, instore.TransactionType(typ))
		}
	}
	if v.Has("authorizationState") {
		q.AuthorizationState = instore.AuthorizationState(v.Get("authorizationState"))
		if !slices.Contains(instore.AuthorizationStates, q.AuthorizationState) {
			errs = append(errs, instore.FieldError{Field: "authorizationState", Message: "must be OPEN, CAPTURED, VOIDED or EXPIRED"})
		}
	}
	if v.Has("forwarding") {
		q.Forwarding = instore.ForwardingState(v.Get("forwarding"))
		if !slices.Contains(instore.ForwardingStates, q.Forwarding) {
			errs = append(errs, instore.FieldError{Field: "forwarding", Message: "must be QUEUED, FORWARDED or DECLINED"})
		}
	}
	if len(errs) > 0 {
		return q, httpapi.Validation(errs...)
	}
	return q, nil
}

// preAuthOp is the operation of POST /increment, /capture or /void (op).
func (h *handlers) preAuthOp(op instore.TransactionType) func(context.Context, *instore.Principal, *instore.PreAuthOpRequest, *instore.IdempotencyClaim) (*instore.Transaction, error) {
	return func(ctx context.Context, p *instore.Principal, req *instore.PreAuthOpRequest, claim *instore.IdempotencyClaim) (*instore.Transaction, error) {
		req.Op = op
		return h.svc.PreAuthOp(ctx, p, req, claim)
	}
}

func (h *handlers) transactions(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	q, err := listQuery(r)
	if err != nil {
		return err
	}
	ts, next, err := h.svc.Transactions(r.Context(), p, q)
	if err != nil {
		return err
	}
	if wantsCSV(r) {
		return h.transactionsCSV(w, r, ts, next)
	}
	return writeJSON(w, http.StatusOK, struct {
		Transactions []*instore.TransactionWire `json:"transactions"`
		NextCursor   *string                    `json:"nextCursor"`
	}{wires(ts, h.meta.TransactionWire), nextCursor(next)})
}

// wires renders the items of a page as the API shows them.
func wires[T, W any](items []T, wire func(T) W) []W {
	out := make([]W, len(items))
	for i, it := range items {
		out[i] = wire(it)
	}
	return out
}

// nextCursor is a page's nextCursor: null on the last page (next "").
func nextCursor(next string) *string {
	if next == "" {
		return nil
	}
	return &next
}

// atoi parses a query parameter's integer (instore.ParseDigits: decimal
// digits only, as an event cursor's).
func atoi(s string) (int64, error) {
	if n, ok := instore.ParseDigits(s); ok {
		return n, nil
	}
	return 0, strconv.ErrSyntax
}

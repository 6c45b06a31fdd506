package onlineapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/service"
)

// writeJSON answers with a JSON body (httpapi.WriteJSON).
var writeJSON = httpapi.WriteJSON

// handlers are the Online API's operation handlers: decode, call one
// operation of the Service, encode.
type handlers struct {
	svc     *service.Service
	meta    *instore.Metadata
	streams *streamCounter
}

func (h *handlers) link(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.LinkRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	v, err := h.svc.Link(r.Context(), p, &req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (h *handlers) unlink(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.TerminalRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	v, err := h.svc.Unlink(r.Context(), p, &req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (h *handlers) terminals(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	vs, err := h.svc.Terminals(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"terminals": vs})
}

func (h *handlers) terminal(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	v, err := h.svc.Terminal(r.Context(), p, r.PathValue("terminalId"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (h *handlers) purchase(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.PurchaseRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	t, err := h.svc.Purchase(r.Context(), p, &req, httpapi.Claim(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/transaction/"+t.ID)
	return writeJSON(w, http.StatusCreated, h.meta.TransactionWire(t))
}

// confirm answers POST /transaction/{onlineAPIRefId}/confirm: the
// confirmed sale (a body, if any, is not read).
func (h *handlers) confirm(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	t, err := h.svc.Confirm(r.Context(), p, r.PathValue("onlineAPIRefId"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h.meta.TransactionWire(t))
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

// transactionEvents answers GET /transaction/{onlineAPIRefId}/events: the
// transaction's timeline.
func (h *handlers) transactionEvents(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	es, err := h.svc.TransactionEvents(r.Context(), p, r.PathValue("onlineAPIRefId"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Events []instore.TransactionEvent `json:"events"`
	}{es})
}

func (h *handlers) transaction(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if errs := repeated(r.URL.Query(), "wait", "afterVersion"); errs != nil {
		return httpapi.Validation(errs...)
	}
	wait := 0
	if q := r.URL.Query(); q.Has("wait") {
		n, err := strconv.Atoi(q.Get("wait"))
		if err != nil || n < 0 || n > instore.MaxWait {
			return httpapi.Validation(instore.FieldError{Field: "wait", Message: "must be an integer number of seconds from 0 to 60"})
		}
		wait = n
	}
	var after *int64
	if q := r.URL.Query(); q.Has("afterVersion") {
		n, err := strconv.ParseInt(q.Get("afterVersion"), 10, 64)
		if err != nil || n < 0 {
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
	return writeJSON(w, http.StatusOK, h.meta.TransactionWire(t))
}

func (h *handlers) cancel(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.CancelRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	t, err := h.svc.Cancel(r.Context(), p, &req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/transaction/"+t.ID)
	return writeJSON(w, http.StatusAccepted, h.meta.TransactionWire(t))
}

func (h *handlers) refund(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.RefundRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	t, err := h.svc.Refund(r.Context(), p, &req, httpapi.Claim(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/transaction/"+t.ID)
	return writeJSON(w, http.StatusCreated, h.meta.TransactionWire(t))
}

func (h *handlers) reversal(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.ReversalRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	t, err := h.svc.Reversal(r.Context(), p, &req, httpapi.Claim(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/transaction/"+t.ID)
	return writeJSON(w, http.StatusCreated, h.meta.TransactionWire(t))
}

// listQuery parses the query of GET /transactions; shape errors are
// validation problems naming the parameter.
func listQuery(r *http.Request) (instore.ListQuery, error) {
	v := r.URL.Query()
	var q instore.ListQuery
	errs := repeated(v, "from", "to", "terminalId", "statusId", "ecrReference", "unconfirmed", "limit", "cursor")
	parseTime := func(name string) *time.Time {
		if !v.Has(name) {
			return nil
		}
		t, err := time.Parse(time.RFC3339, v.Get(name))
		if err != nil {
			errs = append(errs, instore.FieldError{Field: name, Message: "must be an RFC 3339 time such as 2026-01-31T12:00:00Z"})
			return nil
		}
		t = t.UTC()
		return &t
	}
	parseInt := func(name string) *int {
		if !v.Has(name) {
			return nil
		}
		n, err := strconv.Atoi(v.Get(name))
		if err != nil {
			errs = append(errs, instore.FieldError{Field: name, Message: "must be an integer"})
			return nil
		}
		return &n
	}
	q.From, q.To = parseTime("from"), parseTime("to")
	q.StatusID = parseInt("statusId")
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
	if len(errs) > 0 {
		return q, httpapi.Validation(errs...)
	}
	return q, nil
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
	out := make([]*instore.TransactionWire, len(ts))
	for i, t := range ts {
		out[i] = h.meta.TransactionWire(t)
	}
	var cursor *string
	if next != "" {
		cursor = &next
	}
	return writeJSON(w, http.StatusOK, struct {
		Transactions []*instore.TransactionWire `json:"transactions"`
		NextCursor   *string                    `json:"nextCursor"`
	}{out, cursor})
}

// printJobJSON is a print job as the Online API shows it.

func (h *handlers) print(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.PrintRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	j, err := h.svc.Print(r.Context(), p, &req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/print/"+j.ID)
	return writeJSON(w, http.StatusOK, h.meta.PrintJobWire(j))
}

func (h *handlers) printJob(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	j, err := h.svc.PrintJob(r.Context(), p, r.PathValue("printId"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h.meta.PrintJobWire(j))
}

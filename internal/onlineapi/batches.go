package onlineapi

import (
	"net/http"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// closeBatch answers POST /terminal/{terminalId}/close: 201 with the
// closed batch (a body, if any, is not read).
func (h *handlers) closeBatch(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	b, err := h.svc.CloseBatch(r.Context(), p, r.PathValue("terminalId"), httpapi.Claim(r))
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/batch/"+b.ID)
	return writeJSON(w, http.StatusCreated, h.meta.BatchWire(b))
}

func (h *handlers) batch(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	b, err := h.svc.Batch(r.Context(), p, r.PathValue("batchId"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h.meta.BatchWire(b))
}

// batches answers GET /batches: the parameters of GET /transactions that
// apply to batches (from, to, terminalId, limit, cursor); the others are
// refused.
func (h *handlers) batches(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var errs []instore.FieldError
	for _, name := range []string{"statusId", "ecrReference", "unconfirmed", "type", "authorizationState"} {
		if r.URL.Query().Has(name) {
			errs = append(errs, instore.FieldError{Field: name, Message: "is not a parameter of GET /batches"})
		}
	}
	if len(errs) > 0 {
		return &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.", Fields: errs}
	}
	lq, err := listQuery(r)
	if err != nil {
		return err
	}
	bs, next, err := h.svc.Batches(r.Context(), p, instore.BatchQuery{From: lq.From, To: lq.To, TerminalID: lq.TerminalID, Limit: lq.Limit, Cursor: lq.Cursor})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Batches    []*instore.BatchWire `json:"batches"`
		NextCursor *string              `json:"nextCursor"`
	}{wires(bs, h.meta.BatchWire), nextCursor(next)})
}

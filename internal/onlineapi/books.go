package onlineapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// totals answers GET /totals: the merchant's transactions of a window
// summed by currency, type and status.
func (h *handlers) totals(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	v := r.URL.Query()
	errs := repeated(v, "from", "to", "terminalId")
	q := instore.TotalsQuery{From: queryTime(v, "from", &errs), To: queryTime(v, "to", &errs), TerminalID: v.Get("terminalId")}
	if len(errs) > 0 {
		return httpapi.Validation(errs...)
	}
	out, err := h.svc.Totals(r.Context(), p, q)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// queryTime parses the RFC 3339 time of the query parameter name (nil
// when absent), adding a field error to errs when it is not one.
func queryTime(v url.Values, name string, errs *[]instore.FieldError) *time.Time {
	if !v.Has(name) {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v.Get(name))
	if err != nil {
		*errs = append(*errs, instore.FieldError{Field: name, Message: "must be an RFC 3339 time such as 2026-01-31T12:00:00Z"})
		return nil
	}
	t = t.UTC()
	return &t
}

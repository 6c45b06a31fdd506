package sandbox

import (
	"net/http"
	"slices"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// batchExtraBody is the body of POST /sandbox/v1/terminals/{terminalId}/batch-extra.
type batchExtraBody struct {
	Amount   *int64                  `json:"amount"`
	Type     instore.TransactionType `json:"type"`
	Currency string                  `json:"currency"`
}

// batchExtra adds to the virtual terminal's open batch an approved sale
// the service never saw (its next close shows it MISSING_IN_SERVICE) and
// answers 200 with {"reference": the terminal's own reference}.
func (s *sandbox) batchExtra(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var body batchExtraBody
	if err := httpapi.DecodeJSON(r, &body); err != nil {
		return err
	}
	var errs []instore.FieldError
	if body.Amount == nil || *body.Amount < 1 || *body.Amount > instore.MaxAmount {
		errs = append(errs, instore.FieldError{Field: "/amount", Message: "is required: 1-99999999 minor units"})
	}
	if body.Type == "" {
		body.Type = instore.TypePurchase
	}
	if !slices.Contains(instore.TransactionTypes, body.Type) {
		errs = append(errs, instore.FieldError{Field: "/type", Message: "must be a transaction type: " + instore.JoinTypes(instore.TransactionTypes)})
	}
	if body.Currency == "" {
		body.Currency = "SEK"
	}
	if !knownCurrency(body.Currency) {
		errs = append(errs, instore.FieldError{Field: "/currency", Message: "must be an ISO 4217 code such as SEK"})
	}
	if len(errs) > 0 {
		return httpapi.Validation(errs...)
	}
	vt, err := s.device(r.Context(), p, r.PathValue("terminalId"))
	if err != nil {
		return err
	}
	ref := vt.AddBatchExtra(body.Type, *body.Amount, body.Currency)
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"reference": ref, "batchNumber": vt.BatchNumber()})
}

func knownCurrency(c string) bool {
	_, ok := instore.CurrencyExponent(c)
	return ok
}

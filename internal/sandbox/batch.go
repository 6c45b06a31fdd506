package sandbox

import (
	"net/http"
	"slices"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/sim"
)

// batchExtraBody is the body of POST /sandbox/v1/terminals/{terminalId}/batch-extra.
type batchExtraBody struct {
	Amount   *int64                  `json:"amount"`
	Type     instore.TransactionType `json:"type"`
	Currency string                  `json:"currency"`
}

// check lists what is wrong with a batch-extra body and fills in its
// type's and currency's defaults (a purchase, SEK).
func (b *batchExtraBody) check() []instore.FieldError {
	var errs []instore.FieldError
	if b.Amount == nil || *b.Amount < 1 || *b.Amount > instore.MaxAmount {
		errs = append(errs, instore.FieldError{Field: "/amount", Message: "is required: 1-99999999 minor units"})
	}
	if b.Type == "" {
		b.Type = instore.TypePurchase
	}
	if !slices.Contains(instore.TransactionTypes, b.Type) {
		errs = append(errs, instore.FieldError{Field: "/type", Message: "must be a transaction type: " + instore.JoinTypes(instore.TransactionTypes)})
	}
	if b.Currency == "" {
		b.Currency = "SEK"
	}
	if !knownCurrency(b.Currency) {
		errs = append(errs, instore.FieldError{Field: "/currency", Message: "must be an ISO 4217 code such as SEK"})
	}
	return errs
}

// apply adds to the virtual terminal's open batch an approved sale the
// service never saw (its next close shows it MISSING_IN_SERVICE) and
// answers 200 with {"reference": the terminal's own reference}.
func (b *batchExtraBody) apply(w http.ResponseWriter, _ *sandbox, vt *sim.Terminal) error {
	ref := vt.AddBatchExtra(b.Type, *b.Amount, b.Currency)
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"reference": ref, "batchNumber": vt.BatchNumber()})
}

func knownCurrency(c string) bool {
	_, ok := instore.CurrencyExponent(c)
	return ok
}

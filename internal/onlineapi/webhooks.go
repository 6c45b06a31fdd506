package onlineapi

import (
	"fmt"
	"net/http"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
)

// Webhook endpoints (docs/events.md): decode, call one operation, encode.

// webhookCreated answers 201 with a new endpoint and its Location.
func webhookCreated(w http.ResponseWriter, v *instore.WebhookWire) error {
	w.Header().Set("Location", Prefix+"/webhooks/"+v.WebhookID)
	return writeJSON(w, http.StatusCreated, v)
}

func (h *handlers) updateWebhook(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	var req instore.WebhookRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	v, err := h.svc.UpdateWebhook(r.Context(), p, r.PathValue("webhookId"), &req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (h *handlers) deleteWebhook(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	if err := h.svc.DeleteWebhook(r.Context(), p, r.PathValue("webhookId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handlers) webhookDeliveries(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	q := r.URL.Query()
	if errs := repeated(q, "cursor", "limit"); errs != nil {
		return httpapi.Validation(errs...)
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := atoi(v)
		if err != nil || n < 1 || n > 100 {
			return httpapi.Validation(instore.FieldError{Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", 100)})
		}
		limit = int(n)
	}
	ds, next, err := h.svc.WebhookDeliveries(r.Context(), p, r.PathValue("webhookId"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Deliveries []instore.DeliveryWire `json:"deliveries"`
		NextCursor *string                `json:"nextCursor"`
	}{ds, next})
}

func (h *handlers) retryDelivery(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	v, err := h.svc.RetryDelivery(r.Context(), p, r.PathValue("webhookId"), r.PathValue("deliveryId"))
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/webhooks/"+r.PathValue("webhookId")+"/deliveries")
	return writeJSON(w, http.StatusAccepted, v)
}

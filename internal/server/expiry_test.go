package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/internal/wallclock"
)

// TestIdempotencyRecordsExpire moves the service's clock past the
// Idempotency-Key window: the sweep deletes the record, and the key then
// runs as a new request (a second purchase), not a replay.
func TestIdempotencyRecordsExpire(t *testing.T) {
	clock := clocktest.Shift(wallclock.Clock{}, 0) // the wall clock, its time of day moved below
	s := startSandbox(t, func(c *server.Config) {
		c.Clock = clock
		c.IdempotencySweep = 10 * time.Millisecond
	})
	ctx := context.Background()
	body := map[string]any{"terminalId": s.terminals[0], "amount": 2500, "currency": "SEK"}
	key := map[string]string{"Idempotency-Key": "order-expiring"}
	first := s.post(t, "/in-store/api/v1/purchase", body, key).tx(t, 201)
	s.final(t, first.OnlineAPIRefID)

	// Within the window: kept (sweeps run meanwhile) and replayed.
	replay := s.post(t, "/in-store/api/v1/purchase", body, key)
	if got := replay.tx(t, 201); got.OnlineAPIRefID != first.OnlineAPIRefID || replay.resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry within the window = %s (replayed %q), want the replay of %s", got.OnlineAPIRefID, replay.resp.Header.Get("Idempotent-Replayed"), first.OnlineAPIRefID)
	}
	if _, err := s.srv.Store.IdempotencyRecord(ctx, s.merchantRec.ID, "order-expiring"); err != nil {
		t.Fatalf("IdempotencyRecord within the window = %v, want it kept", err)
	}

	clock.Shift(httpapi.IdempotencyTTL + time.Minute)
	testwait.For(t, "the sweep to delete the record past its window", func() bool {
		_, err := s.srv.Store.IdempotencyRecord(ctx, s.merchantRec.ID, "order-expiring")
		if err != nil && !errors.Is(err, instore.ErrNotFound) {
			t.Fatalf("IdempotencyRecord = %v", err)
		}
		return err != nil
	})

	// The token expired with the day that passed on the server's clock: a
	// new one, as a client gets it.
	s.token = s.getToken(t, s.online, s.clientID, s.clientSecret)
	again := s.post(t, "/in-store/api/v1/purchase", body, key)
	got := again.tx(t, 201)
	if got.OnlineAPIRefID == first.OnlineAPIRefID || again.resp.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the key after its window = %s (replayed %q), want a new purchase, not %s", got.OnlineAPIRefID, again.resp.Header.Get("Idempotent-Replayed"), first.OnlineAPIRefID)
	}
	if tx := s.final(t, got.OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("the new purchase ended %d, want APPROVED", tx.StatusID)
	}
}

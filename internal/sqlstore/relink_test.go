package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestCreationWaitsForARacingLink: on PostgreSQL a link (or unlink)
// that locked the terminal ID's row before a creation for its old device
// reached the database makes the creation wait, and once the link
// commits, refuse (instore.ErrRelinked), keyed or not, with nothing
// stored: under READ COMMITTED a plain read of the terminal, taken before
// the wait, would still see the old device, and the command would go to
// a device no longer linked to the terminal ID while the link answered
// 200 (found by the black-box review). The link's side is the database's
// own order: it locks the row FOR UPDATE as LinkTerminal does.
func TestCreationWaitsForARacingLink(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	must := func(err error) { mustT(t, err) }
	must(db.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "C", CreatedAt: at}))
	must(db.CreateMerchant(ctx, &instore.Merchant{ID: "mer_1", CustomerID: "cus_1", Name: "M", Active: true, CreatedAt: at}))
	for _, serial := range []string{"S-OLD", "S-NEW"} {
		must(db.CreateDevice(ctx, &instore.Device{SerialNumber: serial, Model: instore.ModelCountertop, CustomerID: "cus_1",
			SecretHash: []byte("h"), SoftwareVersion: "1.0.0", CreatedAt: at}))
	}
	term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: at}
	must(db.AllocateTerminalID(ctx, term))
	for i, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			_, _, err := db.LinkTerminal(ctx, term.TerminalID, "S-OLD", at)
			mustT(t, err)
			tx := &instore.Transaction{ID: fmt.Sprintf("txn_race%d", i), MerchantID: "mer_1", TerminalID: term.TerminalID,
				SerialNumber: "S-OLD", Type: instore.TypePurchase, Amount: 100, Currency: "SEK",
				StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: at}
			ch := &instore.Change{T: tx, OnDevice: "S-OLD",
				Events: []instore.TransactionEvent{{Version: 1, Kind: instore.EventCreated, At: at, Actor: instore.ActorECR, StatusAfter: "PENDING"}}}
			if keyed {
				key := fmt.Sprintf("key-%d", i)
				_, err := db.BeginIdempotency(ctx, &instore.IdempotencyRecord{MerchantID: "mer_1", Key: key, Attempt: "att",
					Method: "POST", Path: "/in-store/api/v1/purchase", RequestHash: []byte("0123456789abcdef0123456789abcdef"), CreatedAt: at})
				mustT(t, err)
				ch.Idempotency = &instore.IdempotencyClaim{MerchantID: "mer_1", Key: key, Attempt: "att"}
			}
			link, err := raw.BeginTx(ctx, nil)
			mustT(t, err)
			defer link.Rollback()
			_, err = link.ExecContext(ctx, `SELECT 1 FROM terminals WHERE terminal_id = $1 FOR UPDATE`, term.TerminalID)
			mustT(t, err)
			_, err = link.ExecContext(ctx, `UPDATE terminals SET serial_number = 'S-NEW' WHERE terminal_id = $1`, term.TerminalID)
			mustT(t, err)
			created := make(chan error, 1)
			go func() { created <- db.CreateTransaction(context.WithoutCancel(ctx), ch) }()
			testwait.ForNil(t, "the creation to wait for the link's lock", func() error {
				var n int
				if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return errors.New("no statement waits for a lock")
				}
				return nil
			})
			mustT(t, link.Commit())
			if err := <-created; !errors.Is(err, instore.ErrRelinked) {
				t.Fatalf("CreateTransaction for the old device after the link = %v, want instore.ErrRelinked", err)
			}
			if _, err := db.Transaction(ctx, tx.ID); !errors.Is(err, instore.ErrNotFound) {
				t.Errorf("the refused creation stored its transaction: %v", err)
			}
			if keyed {
				rec, err := db.IdempotencyRecord(ctx, "mer_1", ch.Idempotency.Key)
				mustT(t, err)
				if rec.TransactionID != "" {
					t.Errorf("the refused creation tied the record to %q", rec.TransactionID)
				}
			}
		})
	}
}

func mustT(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

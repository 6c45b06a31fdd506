package sqlstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestHorizonCountsEventWriters: on PostgreSQL the told horizon is held
// back by the store's own event-writing transactions only. A long write
// transaction of another application in the same database does not hold
// the stream; a slow store write transaction that took its id before
// later events committed holds them back (even before it inserted its
// event) until it commits, and the stream then shows every event in order.
func TestHorizonCountsEventWriters(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	if _, err := raw.ExecContext(ctx, `CREATE TABLE foreign_load (n INT)`); err != nil {
		t.Fatal(err)
	}
	// Another application's long write transaction: it has an id older
	// than every event below.
	foreign, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Rollback()
	if _, err := foreign.ExecContext(ctx, `INSERT INTO foreign_load VALUES (1)`); err != nil {
		t.Fatal(err)
	}

	ev := func(terminal string) instore.OutboxEvent {
		return instore.OutboxEvent{MerchantID: "mer_h", TerminalID: terminal, Type: instore.EventTerminalOnline,
			At: time.Unix(1_800_000_000, 0).UTC(), Data: []byte(`{}`)}
	}
	shown := func() []string {
		t.Helper()
		evs, err := db.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_h", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, e := range evs {
			if i > 0 && e.Seq <= evs[i-1].Seq {
				t.Errorf("events out of order: %d after %d", e.Seq, evs[i-1].Seq)
			}
			got = append(got, e.TerminalID)
		}
		return got
	}
	seqOf := func(terminal string) int64 {
		t.Helper()
		var seq int64
		if err := raw.QueryRowContext(ctx, `SELECT seq FROM events WHERE terminal_id = $1`, terminal).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}

	if err := db.AppendEvents(ctx, []instore.OutboxEvent{ev("c")}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SequenceEvents(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got := shown(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("with a foreign write transaction open, the stream shows %q, want [c]", got)
	}

	// A slow store write: its id is taken before b's, its event inserted
	// after b committed.
	held, release, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- db.HoldEventWrite(context.WithoutCancel(ctx), func() { close(held) }, release, ev("a"))
	}()
	select {
	case <-held:
	case err := <-errc:
		t.Fatal(err)
	}
	if err := db.AppendEvents(ctx, []instore.OutboxEvent{ev("b")}); err != nil {
		close(release)
		t.Fatal(err)
	}
	bound, err := db.HorizonBound(ctx)
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if b := seqOf("b"); bound >= b {
		close(release)
		t.Fatalf("horizon bound %d reached b (%d) while a transaction with an older id could still insert an event", bound, b)
	}
	if err := db.AdvanceToldOnce(ctx); err != nil {
		close(release)
		t.Fatal(err)
	}
	if got := shown(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("while the slow writer runs, the stream shows %q, want [c]", got)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if seqOf("a") >= seqOf("b") {
		t.Errorf("a (%d) numbered after b (%d): a's id is the older", seqOf("a"), seqOf("b"))
	}
	if _, err := db.SequenceEvents(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got := shown(); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Errorf("after the slow writer committed, the stream shows %q, want [c a b]", got)
	}
}

// TestEventsNumberedInTheirTransactionsOrder: on PostgreSQL an event's
// number is its transaction's id and then its place among that
// transaction's events, counted from 1 in each transaction, so that the
// events of one write are told in the order written (a sequence shared by
// all transactions, cut to its low 20 bits, told two events of one
// transaction in the wrong order whenever it passed a multiple of 2^20
// between them).
func TestEventsNumberedInTheirTransactionsOrder(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	for write := range 3 {
		var evs []instore.OutboxEvent
		for i := range 3 {
			evs = append(evs, instore.OutboxEvent{MerchantID: "mer_o", TerminalID: string(rune('a'+write)) + string(rune('0'+i)),
				Type: instore.EventTerminalOnline, At: time.Unix(1_800_000_000, 0).UTC(), Data: []byte(`{}`)})
		}
		if err := db.AppendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
		rows, err := raw.QueryContext(ctx, `SELECT seq & 1048575, terminal_id FROM events WHERE terminal_id LIKE $1 ORDER BY seq`,
			string(rune('a'+write))+"%")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var place int64
			var terminal string
			if err := rows.Scan(&place, &terminal); err != nil {
				t.Fatal(err)
			}
			got = append(got, string(rune('0'+place))+terminal)
		}
		rows.Close()
		want := []string{"1" + evs[0].TerminalID, "2" + evs[1].TerminalID, "3" + evs[2].TerminalID}
		if !slices.Equal(got, want) {
			t.Errorf("write %d: places and events %q, want %q", write, got, want)
		}
	}
}

// TestHorizonToldOnAQuietDatabase: on PostgreSQL an event is told when
// the last WAL record written after its commit is one no commit follows
// (here a row lock of a transaction left open): the WAL writer flushes
// only up to the last relaxed commit, so the store flushes the WAL itself
// (flushWAL) instead of waiting for the next write of the database.
// (Before: SequenceEvents gave up after toldWait with the event untold, and
// the webhook dispatcher and the stream waited for another write.) A flush
// that fails (here it waits for a lock on the setting it writes) is tried
// again: the event is told once it can be.
func TestHorizonToldOnAQuietDatabase(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	if _, err := raw.ExecContext(ctx, `CREATE TABLE quiet_probe (id INT PRIMARY KEY); INSERT INTO quiet_probe VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	ev := func(terminal string) instore.OutboxEvent {
		return instore.OutboxEvent{MerchantID: "mer_q", TerminalID: terminal, Type: instore.EventTerminalOnline,
			At: time.Unix(1_800_000_000, 0).UTC(), Data: []byte(`{}`)}
	}
	// lockRow writes a WAL record after the events' durable commits, in a
	// transaction that stays open: nothing commits after it.
	lockRow := func(id int) {
		t.Helper()
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		if _, err := tx.ExecContext(ctx, `SELECT id FROM quiet_probe WHERE id = $1 FOR UPDATE`, id); err != nil {
			t.Fatal(err)
		}
		var inserted, flushed int64
		if err := raw.QueryRowContext(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint,
			(pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&inserted, &flushed); err != nil {
			t.Fatal(err)
		}
		if inserted <= flushed {
			t.Skip("the WAL was flushed past the row lock already (another write of the database): the quiet case cannot be made this run")
		}
	}
	told := func() int {
		t.Helper()
		evs, err := db.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_q", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	flushes := func() int {
		t.Helper()
		var n int
		if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM settings WHERE name = 'events.told'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if err := db.AppendEvents(ctx, []instore.OutboxEvent{ev("q1")}); err != nil {
		t.Fatal(err)
	}
	lockRow(1)
	n, err := db.SequenceEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || told() != 1 {
		t.Fatalf("SequenceEvents() = %d, %d events listed; want the event told (1, 1)", n, told())
	}
	if flushes() == 0 {
		t.Skip("another write of the database flushed the WAL first: the store's own flush is not tested this run")
	}
	if f, failed := db.ToldFlushes(); f < 1 || failed != 0 {
		t.Fatalf("ToldFlushes() = %d, %d after one flush that succeeded; want at least 1, 0", f, failed)
	}

	// The setting's table locked (no transaction id, no WAL): the store's
	// flush waits for it and fails.
	holder, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `LOCK TABLE settings IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendEvents(ctx, []instore.OutboxEvent{ev("q2")}); err != nil {
		t.Fatal(err)
	}
	lockRow(2)
	short, cancel := context.WithTimeout(ctx, sqlstore.ToldNudgeAfter+sqlstore.ToldNudgeTimeout+500*time.Millisecond)
	db.SequenceEvents(short, 100) // its flush fails; it gives up with short
	cancel()
	if told() != 1 {
		t.Skip("another write of the database flushed the WAL while the store's flush waited: the retry is not tested this run")
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SequenceEvents(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got := told(); got != 2 {
		t.Fatalf("after a failed flush and the lock's release: %d events told, want 2 (the flush tried again)", got)
	}
	if _, failed := db.ToldFlushes(); failed < 1 {
		t.Fatalf("ToldFlushes() counts %d failed flushes after one failed (instore_store_told_flush_failures_total)", failed)
	}
}

package sim

import (
	"context"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// TestStateVersionAndNextOutcome: every change gives the state a higher
// Version, so a reader can tell the newer of two states; the next outcome
// and the next print status show in the state until a transaction or a
// print job takes them; SetOffline(true) shows offline at once.
func TestStateVersionAndNextOutcome(t *testing.T) {
	t.Parallel()
	_, r, c := linked(t, nil)
	before := r.State()
	if before.NextOutcome != nil || before.NextPrint != nil || before.Interactive {
		t.Fatalf("fresh state %+v, want no next outcome, no next print, not interactive", before)
	}

	if err := r.SetNextOutcome(instore.StatusTransactionDeclined); err != nil {
		t.Fatal(err)
	}
	st := r.State()
	if st.NextOutcome == nil || *st.NextOutcome != instore.StatusTransactionDeclined || st.Version <= before.Version {
		t.Fatalf("after SetNextOutcome(11): %+v (version before %d), want nextOutcome 11 and a higher version", st, before.Version)
	}
	// The state is a copy: changing it changes nothing in the terminal.
	*st.NextOutcome = 0
	if got := r.State().NextOutcome; got == nil || *got != instore.StatusTransactionDeclined {
		t.Fatalf("the state shares its next outcome with the terminal")
	}
	r.SetNextPrint(instore.PrintOutOfPaper)
	r.SetInteractive(true)
	st2 := r.State()
	if st2.NextPrint == nil || *st2.NextPrint != instore.PrintOutOfPaper || !st2.Interactive || st2.Version <= st.Version {
		t.Fatalf("after SetNextPrint(2) and SetInteractive: %+v, want nextPrint 2, interactive and a higher version", st2)
	}
	r.SetInteractive(false)

	// The next transaction takes the outcome: the state no longer shows it.
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	if _, res, _ := c.result("ref-1"); res.StatusID != instore.StatusTransactionDeclined {
		t.Fatalf("statusId = %d, want 11", res.StatusID)
	}
	st3 := waitState(t, r.Terminal, "the next outcome taken", func(s State) bool { return s.NextOutcome == nil })
	if st3.Version <= st2.Version {
		t.Errorf("version %d after the transaction, want more than %d", st3.Version, st2.Version)
	}

	r.SetOffline(true)
	if st := r.State(); st.Online {
		t.Errorf("state right after SetOffline(true) = %+v, want offline", st)
	}
}

// TestAwait: Await returns once the state satisfies the condition, and
// with the current state and false when its context ends first.
func TestAwait(t *testing.T) {
	t.Parallel()
	g, r, _ := linked(t, nil)
	r.SetOffline(true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if st, ok := r.Await(ctx, func(s State) bool { return s.Online }); ok || st.Online {
		t.Errorf("Await with an ended context = %+v %v, want offline, false", st, ok)
	}
	r.SetOffline(false)
	done := make(chan State, 1)
	go func() {
		st, _ := r.Await(t.Context(), func(s State) bool { return s.Online && s.TerminalID == "10000002" })
		done <- st
	}()
	c := g.accept(t)
	c.link("10000002")
	var st State
	select {
	case st = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Await never returned")
	}
	if !st.Online || st.TerminalID != "10000002" {
		t.Errorf("Await = %+v, want online and linked to 10000002", st)
	}
}

package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testlog"
)

// TestStateVersionAndNextOutcome: every change gives the state a higher
// Version, so a reader can tell the newer of two states; the next outcome
// and the next print status show in the state until a transaction or a
// print job takes them; SetOffline(true) shows offline at once.
func TestStateVersionAndNextOutcome(t *testing.T) {
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

func TestOnChange(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	screens := make(chan string, 100)
	r.OnChange(func() {
		select {
		case screens <- r.State().Screen:
		default:
		}
	})
	c := g.accept(t)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "654321"})
	timeout := time.After(waitTimeout)
	for {
		select {
		case s := <-screens:
			if s == "Link code 654321" {
				return
			}
		case <-timeout:
			t.Fatal("OnChange never reported the link code screen")
		}
	}
}

func TestSetOffline(t *testing.T) {
	g, r, c := linked(t, nil)

	r.SetOffline(true)
	c.waitClosed()
	st := waitState(t, r.Terminal, "offline", func(s State) bool { return !s.Online })
	if st.Screen != "Offline" {
		t.Errorf("screen %q, want Offline", st.Screen)
	}
	select {
	case <-g.conns:
		t.Fatal("the terminal reconnected while set offline")
	case <-time.After(200 * time.Millisecond): // many backoff steps
	}

	r.SetOffline(false)
	c2 := g.accept(t)
	c2.link("10000001")
	waitState(t, r.Terminal, "online", func(s State) bool { return s.Online })

	// A pending result survives going offline and back.
	c2.expectAck(c2.purchase("ref-1", payment(1000)), "ref-1")
	first, _, _ := c2.result("ref-1")
	r.SetOffline(true)
	c2.waitClosed()
	r.SetOffline(false)
	c3 := g.accept(t)
	again := c3.expect(protocol.TypeResult)
	if again.ID != first.ID {
		t.Errorf("resent result id %q, want %q", again.ID, first.ID)
	}
}

func TestOfflineDuringTransaction(t *testing.T) {
	g, r, c := linked(t, func(c *Config) { c.Delay = 300 * time.Millisecond })
	c.expectAck(c.purchase("ref-1", payment(1000)), "ref-1")
	r.SetOffline(true)
	c.waitClosed()
	// Whatever it reported, the result comes after the next hello.
	waitState(t, r.Terminal, "done", func(s State) bool { return s.Screen == "APPROVED" })
	r.SetOffline(false)
	c2 := g.accept(t)
	if _, res, _ := c2.result("ref-1"); res.StatusID != instore.StatusApproved {
		t.Errorf("statusId = %d, want 0", res.StatusID)
	}
}

func TestPrintScreens(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	r := startTerminal(t, g, nil)
	var out testlog.Buffer
	r.PrintScreens(&out)
	c := g.accept(t)
	c.send(protocol.TypeLinkCode, "", "", protocol.LinkCode{Code: "123456"})
	waitState(t, r.Terminal, "link code", func(s State) bool { return s.LinkCode == "123456" })
	c.link("10000001")
	c.expectAck(c.purchase("ref-1", payment(1250)), "ref-1")
	c.result("ref-1")
	waitState(t, r.Terminal, "APPROVED", func(s State) bool { return s.Screen == "APPROVED" })

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"Link code 123456", "Linked to terminal 10000001", "APPROVED"}
	i := 0
	for _, l := range lines {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("printed\n%s\nwant, in order, %q", out.String(), want)
	}
	for j := 1; j < len(lines); j++ {
		if lines[j] == lines[j-1] {
			t.Errorf("line %q printed twice in a row", lines[j])
		}
	}
}

func TestInteractiveWaitsForAPerson(t *testing.T) {
	_, r, c := linked(t, nil)
	if err := r.Terminal.Decide(0); !errors.Is(err, ErrNothingToDecide) {
		t.Fatalf("Decide with nothing running = %v, want ErrNothingToDecide", err)
	}
	r.Terminal.SetInteractive(true)
	// An amount that would be approved: the person declines it.
	c.expectAck(c.purchase("ref-i", payment(1000)), "ref-i")
	waitState(t, r.Terminal, "the card prompt", func(s State) bool { return strings.Contains(s.Screen, "Present card") })
	if err := r.Terminal.Decide(instore.StatusTransactionDeclined); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	_, res, _ := c.result("ref-i")
	if res.StatusID != instore.StatusTransactionDeclined {
		t.Errorf("interactive result = %d, want the person's 11", res.StatusID)
	}
	if err := r.Terminal.Decide(99); err == nil {
		t.Errorf("Decide(99) accepted")
	}
}

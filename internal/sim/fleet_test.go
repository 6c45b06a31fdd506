package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testwait"
)

func TestFleet(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for _, s := range []string{"VT-B", "VT-A", "VT-C"} {
		g.addDevice(s, "secret-"+s)
	}
	f := NewFleet()
	cfg := func(serial string) Config {
		return Config{GatewayURL: g.url(), SerialNumber: serial, Secret: "secret-" + serial,
			BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	}
	for _, s := range []string{"VT-B", "VT-A"} {
		if _, err := f.Add(cfg(s)); err != nil {
			t.Fatalf("Add(%s): %v", s, err)
		}
	}
	if _, err := f.Add(cfg("VT-A")); err == nil {
		t.Error("Add of a serial already in the fleet succeeded")
	}
	if _, err := f.Add(Config{SerialNumber: "bad"}); err == nil {
		t.Error("Add of an invalid config succeeded")
	}

	f.Start(context.Background())
	f.Start(context.Background()) // no effect
	seen := map[string]*gwConn{}
	for range 2 {
		c := g.accept(t)
		seen[c.serial] = c
	}
	if seen["VT-A"] == nil || seen["VT-B"] == nil {
		t.Fatalf("sessions from %v, want VT-A and VT-B", seen)
	}
	seen["VT-A"].link("10000001")

	if _, err := f.Add(cfg("VT-C")); err != nil { // started at once
		t.Fatal(err)
	}
	if c := g.accept(t); c.serial != "VT-C" {
		t.Errorf("session from %q, want VT-C", c.serial)
	}
	vt, ok := f.Get("VT-A")
	if !ok {
		t.Fatal("Get(VT-A) not found")
	}
	waitState(t, vt, "linked", func(s State) bool { return s.TerminalID == "10000001" })
	if _, ok := f.Get("VT-Z"); ok {
		t.Error("Get(VT-Z) found a terminal")
	}

	testwait.ForNil(t, "all of States() online", func() error {
		states := f.States()
		var serials []string
		online := 0
		for _, s := range states {
			serials = append(serials, s.SerialNumber)
			if s.Online {
				online++
			}
		}
		if len(serials) != 3 || serials[0] != "VT-A" || serials[1] != "VT-B" || serials[2] != "VT-C" {
			t.Fatalf("States() serials %v, want VT-A VT-B VT-C", serials)
		}
		if online != 3 {
			return fmt.Errorf("States() = %+v", states)
		}
		return nil
	})

	f.Stop()
	for _, s := range f.States() {
		if s.Online {
			t.Errorf("%s online after Stop", s.SerialNumber)
		}
	}
	if _, err := f.Add(cfg("VT-D")); !errors.Is(err, ErrFleetStopped) {
		t.Errorf("Add after Stop = %v, want ErrFleetStopped", err)
	}
}

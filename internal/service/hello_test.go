package service_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/testwait"
)

// readCounter counts the store reads a hello makes, by method.
type readCounter struct {
	instore.Store
	mu sync.Mutex
	n  map[string]int
	// hold, if set, holds the next DevicesBySerial until it is closed;
	// holdSessions the next DeviceSessions.
	hold, holdSessions chan struct{}
	// refuseSeen, if set, is a serial number whose hello DevicesSeen
	// refuses (an error of the store), and with it the whole call.
	refuseSeen string
}

// wait waits until *hold, if set, is closed, and clears it: the test
// holds this read while others queue behind it.
func (c *readCounter) wait(hold *chan struct{}) {
	c.mu.Lock()
	h := *hold
	*hold = nil
	c.mu.Unlock()
	if h != nil {
		<-h
	}
}

func (c *readCounter) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *readCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// waitHeld waits until the read that *hold holds is held.
func (c *readCounter) waitHeld(t *testing.T, hold *chan struct{}) {
	t.Helper()
	testwait.ForNil(t, "the first read to be held", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if *hold != nil {
			return errors.New("not yet")
		}
		return nil
	})
}

// counted counts a read of name and makes it.
func counted[T any](c *readCounter, name string, read func() (T, error)) (T, error) {
	c.count(name)
	return read()
}

func (c *readCounter) Device(ctx context.Context, serial string) (*instore.Device, error) {
	return counted(c, "Device", func() (*instore.Device, error) { return c.Store.Device(ctx, serial) })
}
func (c *readCounter) DevicesBySerial(ctx context.Context, serials []string) ([]*instore.Device, error) {
	c.wait(&c.hold)
	return counted(c, "Device", func() ([]*instore.Device, error) { return c.Store.DevicesBySerial(ctx, serials) })
}
func (c *readCounter) TerminalBySerial(ctx context.Context, serial string) (*instore.Terminal, error) {
	return counted(c, "TerminalBySerial", func() (*instore.Terminal, error) { return c.Store.TerminalBySerial(ctx, serial) })
}
func (c *readCounter) ActiveTransaction(ctx context.Context, id string) (*instore.Transaction, error) {
	return counted(c, "ActiveTransaction", func() (*instore.Transaction, error) { return c.Store.ActiveTransaction(ctx, id) })
}
func (c *readCounter) OpenUpdate(ctx context.Context, id string) (*instore.Update, error) {
	return counted(c, "OpenUpdate", func() (*instore.Update, error) { return c.Store.OpenUpdate(ctx, id) })
}
func (c *readCounter) PendingBatch(ctx context.Context, id string) (*instore.Batch, error) {
	return counted(c, "PendingBatch", func() (*instore.Batch, error) { return c.Store.PendingBatch(ctx, id) })
}

func (c *readCounter) DeviceSessions(ctx context.Context, serials []string) ([]*instore.DeviceSession, error) {
	c.wait(&c.holdSessions)
	return counted(c, "DeviceSessions", func() ([]*instore.DeviceSession, error) { return c.Store.DeviceSessions(ctx, serials) })
}
func (c *readCounter) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	return counted(c, "OpenEffects", func() ([]*instore.Effect, error) { return c.Store.OpenEffects(ctx, serial) })
}
func (c *readCounter) Packages(ctx context.Context, customerID, model string) ([]*instore.Package, error) {
	return counted(c, "Packages", func() ([]*instore.Package, error) { return c.Store.Packages(ctx, customerID, model) })
}
func (c *readCounter) AppendEvents(ctx context.Context, evs []instore.OutboxEvent) error {
	c.count("AppendEvents")
	return c.Store.AppendEvents(ctx, evs)
}

// DevicesSeen counts its write transactions (DevicesSeen) and the events
// they hold, by type.
func (c *readCounter) DevicesSeen(ctx context.Context, seen []instore.DeviceSeen) error {
	c.count("DevicesSeen")
	for _, r := range seen {
		if r.SerialNumber == c.refuseSeen {
			return errors.New("the store refuses this hello")
		}
	}
	for _, r := range seen {
		for _, ev := range r.Events {
			c.count("DevicesSeen " + string(ev.Type))
		}
	}
	return c.Store.DevicesSeen(ctx, seen)
}

// TestAuthenticateDeviceCachesPassedCredentials: a serial number and
// secret that passed pass again without a read of the store (a device's
// secret never changes); a wrong secret is still checked against the
// store and refused, and so is an unknown device.
func TestAuthenticateDeviceCachesPassedCredentials(t *testing.T) {
	f := newFixture(t, "FULL", "SN-AUTH-0001")
	ctx := context.Background()
	_, secret, err := admin.New(f.st).CreateDevice(ctx, "SN-AUTH-0002", instore.ModelCountertop, "")
	if err != nil {
		t.Fatal(err)
	}
	rc := &readCounter{Store: f.st}
	f.svc.Store, f.svc.SecretMatches = rc, auth.Matches
	for i := range 3 {
		d, err := f.svc.AuthenticateDevice(ctx, "SN-AUTH-0002", secret)
		if err != nil || d == nil || d.SerialNumber != "SN-AUTH-0002" || d.Model != instore.ModelCountertop {
			t.Fatalf("authentication %d: %+v, %v", i, d, err)
		}
	}
	if n := rc.counts()["Device"]; n != 1 {
		t.Errorf("three authentications read the device %d times, want 1", n)
	}
	for _, c := range []struct{ serial, secret string }{
		{"SN-AUTH-0002", secret + "x"}, {"SN-AUTH-0002", "wrong"}, {"SN-AUTH-0003", secret},
	} {
		if d, err := f.svc.AuthenticateDevice(ctx, c.serial, c.secret); err == nil || instore.ErrorCode(err) != instore.EUnauthorized {
			t.Errorf("%s with a wrong secret: %+v, %v; want unauthorized", c.serial, d, err)
		}
	}
	if n := rc.counts()["Device"]; n != 4 {
		t.Errorf("the refused ones read the device %d times in all, want 4 (each checked against the store)", n-1)
	}
}

// TestAuthenticationsReadTogether: devices that authenticate while the
// read of another is under way (a fleet reconnecting to a node whose
// cache is cold) are read together, in one read, each with its own
// answer: the right secrets pass, a wrong one and an unknown device fail.
func TestAuthenticationsReadTogether(t *testing.T) {
	f := newFixture(t, "FULL", "SN-AUTH-0001")
	ctx := context.Background()
	secrets := map[string]string{}
	for i := range 20 {
		serial := "SN-TOGETHER-" + strconv.Itoa(100+i)
		_, secret, err := admin.New(f.st).CreateDevice(ctx, serial, instore.ModelCountertop, "")
		if err != nil {
			t.Fatal(err)
		}
		secrets[serial] = secret
	}
	hold := make(chan struct{})
	rc := &readCounter{Store: f.st, hold: hold}
	f.svc.Store, f.svc.SecretMatches = rc, auth.Matches
	first := make(chan error, 1)
	go func() {
		_, err := f.svc.AuthenticateDevice(ctx, "SN-TOGETHER-100", secrets["SN-TOGETHER-100"])
		first <- err
	}()
	rc.waitHeld(t, &rc.hold)
	type answer struct {
		serial string
		err    error
	}
	answers := make(chan answer, 21)
	for i := 1; i < 20; i++ {
		serial := "SN-TOGETHER-" + strconv.Itoa(100+i)
		secret := secrets[serial]
		if i == 7 {
			secret = "wrong"
		}
		go func() {
			_, err := f.svc.AuthenticateDevice(ctx, serial, secret)
			answers <- answer{serial, err}
		}()
	}
	go func() {
		_, err := f.svc.AuthenticateDevice(ctx, "SN-TOGETHER-999", "unknown")
		answers <- answer{"SN-TOGETHER-999", err}
	}()
	testwait.ForNil(t, "the others to queue behind the held read", func() error {
		if n := f.svc.QueuedAuthentications(); n != 20 {
			return errors.New(strconv.Itoa(n) + " queued")
		}
		return nil
	})
	close(hold)
	if err := <-first; err != nil {
		t.Fatalf("the first: %v", err)
	}
	for range 20 {
		a := <-answers
		wantOK := a.serial != "SN-TOGETHER-107" && a.serial != "SN-TOGETHER-999"
		if (a.err == nil) != wantOK || a.err != nil && instore.ErrorCode(a.err) != instore.EUnauthorized {
			t.Errorf("%s: %v (want passed: %v)", a.serial, a.err, wantOK)
		}
	}
	if n := rc.counts()["Device"]; n != 2 {
		t.Errorf("21 authentications read the devices %d times, want 2 (the held one, then the rest together)", n)
	}
}

// onlineGateway takes every message, as a session that is up.
type onlineGateway struct{ instore.NoGateway }

func (onlineGateway) Online(string) bool                               { return true }
func (onlineGateway) Ready(string) bool                                { return true }
func (onlineGateway) SendLinked(context.Context, string, string) error { return nil }

// TestHelloReadsEachRowOnce: a hello of an idle terminal reads the store
// once (DeviceSessions: its terminal ID, device, active transaction, open
// update, pending close and whether it is owed anything, in one
// statement), and sends what that read says; its minimum software version
// comes from the device row it read and, the second time, from the cache.
func TestHelloReadsEachRowOnce(t *testing.T) {
	const serial = "SN-HELLO-0001"
	f := newFixture(t, "FULL", serial)
	ctx := context.Background()
	rc := &readCounter{Store: f.st}
	f.svc.Store, f.svc.Gateway = rc, minVersionGateway{svc: f.svc}
	for range 2 {
		if err := f.svc.DeviceConnected(ctx, serial, instore.DeviceHello{Model: instore.ModelCountertop, SoftwareVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	got := rc.counts()
	want := map[string]int{"DeviceSessions": 2, "Packages": 1, "DevicesSeen": 2, "DevicesSeen " + string(instore.EventTerminalOnline): 2}
	if len(got) != len(want) {
		t.Errorf("two hellos made %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("two hellos made %d of %s, want %d (all: %v)", got[k], k, n, got)
		}
	}
}

// minVersionGateway takes every message, as a session that is up, and
// asks for the minimum software version of `linked` as the gateway does.
type minVersionGateway struct {
	onlineGateway
	svc interface {
		MinSoftwareVersion(ctx context.Context, serial string) (string, error)
	}
}

func (g minVersionGateway) SendLinked(ctx context.Context, serial, _ string) error {
	_, err := g.svc.MinSoftwareVersion(ctx, serial)
	return err
}

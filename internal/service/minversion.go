package service

import (
	"context"
	"fmt"
	"sync"

	"github.com/instore-dev/instore"
)

// MinSoftwareVersion returns the version below which a device must answer
// purchases with TERMINAL_MUST_UPDATE (10): the version of the newest
// mandatory package of its model that its customer may install ("" when
// there is none). The gateway puts it in every `linked` message. In a
// hello the device row is the one the hello read (DeviceConnected); the
// version is cached per customer and model (minVersions).
func (s *Service) MinSoftwareVersion(ctx context.Context, serial string) (string, error) {
	d, _ := ctx.Value(helloDeviceKey{}).(*instore.Device)
	if d == nil || d.SerialNumber != serial {
		var err error
		if d, err = s.Store.Device(ctx, serial); err != nil {
			return "", fmt.Errorf("device: %w", err)
		}
	}
	return s.minVersions.get(d.CustomerID, d.Model, func() (string, error) {
		ps, err := s.Store.Packages(ctx, d.CustomerID, d.Model)
		if err != nil {
			return "", fmt.Errorf("packages: %w", err)
		}
		return instore.MinVersion(ps), nil
	})
}

// minVersions caches the minimum software version per customer and
// model, so that a reconnecting fleet does not list the packages of its
// model at every hello. Packages are immutable and only added, by an
// import that changes the store's catalogue setting
// (instore.CatalogueSetting); each node's update sweep (RunUpdates) reads
// that setting and, when it changed, empties this cache before it sends
// every online device its new minimum (announceMinVersions). So a hello
// gets a minimum at most one sweep (30 s by default) older than an
// import, which the announcement after it corrects: the same bound as a
// device that was online during the import, on this node and on every
// other (each reads the shared setting). A version read while a forget
// ran is not kept (gen).
type minVersions struct {
	mu  sync.Mutex
	gen uint64
	m   map[minVersionKey]string
}

type minVersionKey struct{ customer, model string }

// maxMinVersions bounds the cache: past it, it starts again empty.
const maxMinVersions = 1 << 16

// get returns the cached minimum of customer and model, or reads it with
// read and keeps it.
func (c *minVersions) get(customer, model string, read func() (string, error)) (string, error) {
	k := minVersionKey{customer, model}
	c.mu.Lock()
	v, ok := c.m[k]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		if c.m == nil || len(c.m) >= maxMinVersions {
			c.m = map[minVersionKey]string{}
		}
		c.m[k] = v
	}
	return v, nil
}

// forget empties the cache: the catalogue changed.
func (c *minVersions) forget() {
	c.mu.Lock()
	c.gen++
	c.m = nil
	c.mu.Unlock()
}

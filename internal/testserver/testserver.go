// Package testserver starts the service in-process for tests, the one way
// every test package does: every listener on a free loopback port, the
// data in a directory of the test's, the server closed at the test's end.
// What a test changes beyond that (time-outs, a logger, TLS, PostgreSQL)
// it sets on the Config before starting.
package testserver

import (
	"context"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/testlog"
)

// Config is a test server's configuration: the four listeners on free
// loopback ports, the SQLite data in dir, written with synchronous=NORMAL
// (a test need not survive a power cut).
func Config(dir string) server.Config {
	cfg := server.Config{DataDir: dir, SQLiteSynchronous: "NORMAL"}
	Loopback(&cfg)
	return cfg
}

// Loopback sets every listener of cfg to a free loopback port (another
// node's configuration, copied from the first's).
func Loopback(cfg *server.Config) {
	cfg.ListenOnline, cfg.ListenAccess, cfg.ListenTerminal, cfg.ListenOps = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
}

// Logs sets cfg's logger to JSON lines in a new buffer and returns the
// buffer, for a test that reads what the server logged.
func Logs(cfg *server.Config) *testlog.Buffer {
	logs := &testlog.Buffer{}
	cfg.Logger = logging.New(logs, logging.Options{Format: "json"})
	return logs
}

// Start starts a server on cfg and closes it when the test ends; it fails
// the test if the server does not start.
func Start(tb testing.TB, cfg server.Config) *server.Server {
	tb.Helper()
	return StartWith(tb, cfg, Hooks{})
}

// Hooks change how StartWith builds a server.
type Hooks struct {
	// Wrap wraps the store cfg opens (nil: the store as it is), for a
	// test that makes it fail or slow.
	Wrap func(instore.Store) instore.Store
	// BeforeStart runs between New and Start (nil: nothing).
	BeforeStart func(*server.Server)
}

// StartWith is Start with h.
func StartWith(tb testing.TB, cfg server.Config, h Hooks) *server.Server {
	tb.Helper()
	ctx := context.Background()
	var srv *server.Server
	var err error
	if h.Wrap == nil {
		srv, err = server.New(ctx, cfg)
	} else {
		var st *sqlstore.DB
		if st, err = server.OpenStore(ctx, cfg); err == nil {
			srv, err = server.NewWithStore(ctx, cfg, h.Wrap(st))
		}
	}
	if err != nil {
		tb.Fatalf("server.New: %v", err)
	}
	if h.BeforeStart != nil {
		h.BeforeStart(srv)
	}
	if err := srv.Start(); err != nil {
		tb.Fatalf("server Start: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

// Demo starts the demo on cfg (a sandbox server with a merchant, its
// credentials and linked virtual terminals, returned once they are ready)
// and closes it when the test ends.
func Demo(tb testing.TB, cfg server.Config) *demo.Demo {
	tb.Helper()
	d, err := demo.Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("demo.Start: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

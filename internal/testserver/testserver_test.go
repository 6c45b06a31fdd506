package testserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/instore-dev/instore/internal/testserver"
)

// TestStart starts a server on the test configuration: every listener on
// loopback, the data in the test's directory, the logs in the buffer.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	cfg := testserver.Config(dir)
	logs := testserver.Logs(&cfg)
	srv := testserver.Start(t, cfg)
	for name, scheme := range map[string]string{"online": "http://", "access": "http://", "terminal": "ws://", "ops": "http://"} {
		if u := srv.URL(name); !strings.HasPrefix(u, scheme+"127.0.0.1:") {
			t.Errorf("URL(%s) = %s, want %s127.0.0.1:...", name, u, scheme)
		}
	}
	if srv.DataDir() != dir {
		t.Errorf("DataDir() = %s, want %s", srv.DataDir(), dir)
	}
	resp, err := http.Get(srv.URL("online") + "/in-store/api/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET metadata without credentials = %d, want 401", resp.StatusCode)
	}
	if logs.String() == "" {
		t.Error("nothing logged in the buffer")
	}
}

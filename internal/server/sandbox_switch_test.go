package server_test

import (
	"encoding/json"
	"testing"

	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
)

// TestSandboxOfflineOnlineAnswerTheNewState: POST .../offline and
// .../online answer with the virtual terminal's state after the change,
// and the service already sees it: a purchase right after offline is WP23,
// one right after online runs.
func TestSandboxOfflineOnlineAnswerTheNewState(t *testing.T) {
	s := startSandbox(t)
	term := s.terminals[1]
	state := func(path string) sandboxapi.DeviceJSON {
		t.Helper()
		resp, body := s.post(t, "/sandbox/v1/terminals/"+term+path, nil, nil).parts()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, body)
		}
		var d sandboxapi.DeviceJSON
		must(t, json.Unmarshal(body, &d))
		if d.TerminalID == nil || *d.TerminalID != term {
			t.Fatalf("POST %s answered %s, want terminal %s", path, body, term)
		}
		return d
	}
	// Twice: the second time the screen still shows the last result.
	for i := range 2 {
		if d := state("/offline"); d.Online || i == 0 && d.Screen != "Offline" {
			t.Fatalf("offline answered %+v, want online false (and the Offline screen)", d)
		}
		s.purchase(t, term, 100).problem(t, 409, "WP23")
		if d := state("/online"); !d.Online || i == 0 && d.Screen != "Idle" {
			t.Fatalf("online answered %+v, want online true (and the Idle screen)", d)
		}
		if tx := s.final(t, s.purchase(t, term, 100).tx(t, 201).OnlineAPIRefID); tx.StatusID != 0 {
			t.Fatalf("purchase right after online ended %d, want 0 APPROVED", tx.StatusID)
		}
	}
}

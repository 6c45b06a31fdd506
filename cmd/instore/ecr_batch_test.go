package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/instore-dev/instore/client"
)

// TestEcrClose: ecr close against the demo, for people and with --json, a
// sale only the terminal knows shown as a difference, and ecr batches
// listing the closes and showing one.
func TestEcrClose(t *testing.T) {
	info, ecr := ecrDemo(t)
	term := info.Terminals[0].TerminalID

	ecr(0, "purchase", "12.50", "--wait")
	out, _ := ecr(0, "close")
	if !regexp.MustCompile(`(?m)^MATCHED  batch (bat_[0-9a-f]{32}) \(number 1\) of terminal `+term+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  terminal\s+PURCHASE\s+1\s+12\.50 SEK$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  service\s+PURCHASE\s+1\s+12\.50 SEK$`).MatchString(out) {
		t.Errorf("close:\n%s", out)
	}

	// A sale the service never saw: a difference.
	c, err := client.New(client.Config{OnlineAPIURL: info.OnlineAPIBaseURL, Online: client.Credentials{SubscriptionKey: info.SubscriptionKey, AccessToken: info.AccessToken}})
	must(t, err)
	extra, err := c.SandboxBatchExtra(context.Background(), term, client.SandboxBatchExtraParams{Amount: 700})
	must(t, err)
	var b struct {
		BatchID     string `json:"batchId"`
		Matched     bool   `json:"matched"`
		Differences []struct {
			Kind           string `json:"kind"`
			OnlineAPIRefID string `json:"onlineAPIRefId"`
		} `json:"differences"`
	}
	out, _ = ecr(0, "close", term, "--json")
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("close --json %q: %v", out, err)
	}
	if b.Matched || len(b.Differences) != 1 || b.Differences[0].Kind != "MISSING_IN_SERVICE" || b.Differences[0].OnlineAPIRefID != extra.Reference {
		t.Errorf("close --json = %+v, want one MISSING_IN_SERVICE %s", b, extra.Reference)
	}
	out, _ = ecr(0, "batches", b.BatchID)
	if !strings.HasPrefix(out, "1 DIFFERENCES  batch "+b.BatchID+" (number 2)") ||
		!regexp.MustCompile(`(?m)^  MISSING_IN_SERVICE\s+`+regexp.QuoteMeta(extra.Reference)+`\s+PURCHASE APPROVED 7\.00 SEK\s+-$`).MatchString(out) {
		t.Errorf("batches %s:\n%s", b.BatchID, out)
	}

	out, _ = ecr(0, "batches", "--terminal", term)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.Contains(lines[1], b.BatchID) ||
		!strings.HasSuffix(lines[1], "1 DIFFERENCES") || !strings.HasSuffix(lines[2], "MATCHED") {
		t.Errorf("batches:\n%s", out)
	}
	var page struct {
		Batches    []json.RawMessage `json:"batches"`
		NextCursor *string           `json:"nextCursor"`
	}
	out, _ = ecr(0, "batches", "--limit", "1", "--json")
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Batches) != 1 || page.NextCursor == nil {
		t.Errorf("batches --limit 1 --json = %q (%v), want one and a cursor", out, err)
	}
	if out, _ := ecr(0, "batches", "--limit", "1", "--all"); strings.Count(out, "bat_") != 2 {
		t.Errorf("batches --all:\n%s", out)
	}
	ecr(2, "batches", b.BatchID, "--limit", "1")
	if _, errs := ecr(exitFailed, "batches", "bat_unknown"); !strings.Contains(errs, "404 not-found") {
		t.Errorf("batches bat_unknown: stderr %q", errs)
	}
	if _, errs := ecr(exitFailed, "close", "99999999"); !strings.Contains(errs, "WP16") {
		t.Errorf("close of another's terminal: stderr %q", errs)
	}
}

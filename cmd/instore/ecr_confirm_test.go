package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestEcrConfirm(t *testing.T) {
	_, ecr := ecrDemo(t)
	type confirmed struct {
		OnlineAPIRefID string `json:"onlineAPIRefId"`
		Status         string `json:"status"`
		Version        int64  `json:"version"`
		Confirmation   *struct {
			State         string  `json:"state"`
			WithinSeconds int     `json:"withinSeconds"`
			Deadline      *string `json:"deadline"`
			ConfirmedAt   *string `json:"confirmedAt"`
		} `json:"confirmation"`
	}
	last := func(out string) confirmed {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var tx confirmed
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &tx); err != nil {
			t.Fatalf("--json line %q: %v", lines[len(lines)-1], err)
		}
		return tx
	}

	out, _ := ecr(0, "purchase", "12.50", "--confirm-within", "2m", "--wait", "--json")
	sale := last(out)
	if cf := sale.Confirmation; sale.Status != "APPROVED" || cf == nil || cf.State != "PENDING" || cf.WithinSeconds != 120 || cf.Deadline == nil {
		t.Fatalf("purchase --confirm-within 2m = %+v, want APPROVED and PENDING confirmation within 120 s", sale)
	}
	ref := sale.OnlineAPIRefID
	if out, _ := ecr(0, "status", ref); !regexp.MustCompile(`(?m)^  confirmation\s+PENDING: confirm before \S+ or it is reversed$`).MatchString(out) {
		t.Errorf("status of an unconfirmed sale:\n%s", out)
	}
	plain := lastTx(t, first(ecr(0, "purchase", "13", "--wait", "--json")))
	if out, _ := ecr(0, "list", "--unconfirmed"); !strings.Contains(out, ref) || strings.Contains(out, plain.OnlineAPIRefID) {
		t.Errorf("list --unconfirmed = %q, want %s alone", out, ref)
	}

	out, _ = ecr(0, "confirm", ref)
	if !strings.Contains(out, "APPROVED  PURCHASE 12.50 SEK") || !regexp.MustCompile(`(?m)^  confirmation\s+CONFIRMED at \S+$`).MatchString(out) {
		t.Errorf("confirm:\n%s", out)
	}
	got := last(first(ecr(0, "confirm", ref, "--json")))
	again := last(first(ecr(0, "confirm", ref, "--json")))
	if got.Confirmation == nil || got.Confirmation.State != "CONFIRMED" || got.Confirmation.ConfirmedAt == nil || again.Version != got.Version ||
		*again.Confirmation.ConfirmedAt != *got.Confirmation.ConfirmedAt {
		t.Errorf("confirm --json twice = %+v then %+v, want CONFIRMED, the same", got, again)
	}
	if out, _ := ecr(0, "list", "--unconfirmed"); !strings.Contains(out, "no transactions") {
		t.Errorf("list --unconfirmed after confirm = %q, want none", out)
	}

	if _, errs := ecr(exitFailed, "confirm", plain.OnlineAPIRefID); !strings.Contains(errs, "confirm: 409 not-confirmable") || !strings.Contains(errs, "did not ask for confirmation") {
		t.Errorf("confirm of a sale without confirmation: stderr %q, want 409 not-confirmable with the reason", errs)
	}
	ecr(exitFailed, "confirm", "txn_unknown")             // WP04
	ecr(2, "purchase", "1", "--confirm-within", "1500ms") // not whole seconds
	if _, errs := ecr(exitFailed, "purchase", "1", "--confirm-within", "5s"); !strings.Contains(errs, "confirmWithinSeconds") {
		t.Errorf("purchase --confirm-within 5s: stderr %q, want the range", errs)
	}
}

func first(out, _ string) string { return out }

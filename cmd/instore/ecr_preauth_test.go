package main

import (
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// TestEcrPreAuth runs a hotel stay with the pre-authorisation commands
// against the demo: preauth, increment, capture with a tip, a refund of
// part of it; and a void of another pre-authorisation.
func TestEcrPreAuth(t *testing.T) {
	ecrOnDemo(t, "--sim-delay", "0")
	ecr := ecrRunner(t)
	pre := lastTx(t, ecr(0, "preauth", "500", "--wait", "--json", "--reference", "room-204"))
	if pre.Type != instore.TypePreAuth || pre.Status != "APPROVED" {
		t.Fatalf("preauth = %+v", pre)
	}
	if inc := lastTx(t, ecr(0, "increment", pre.OnlineAPIRefID, "150", "--wait", "--json")); inc.Type != instore.TypeIncrement || inc.Status != "APPROVED" {
		t.Errorf("increment = %+v", inc)
	}
	capture := lastTx(t, ecr(0, "capture", pre.OnlineAPIRefID, "660", "--tip", "10", "--wait", "--json"))
	if capture.Type != instore.TypeCapture || capture.Status != "APPROVED" || capture.TotalAmount != 66000 || capture.TipAmount != 1000 {
		t.Errorf("capture = %+v", capture)
	}
	if out := ecr(0, "status", pre.OnlineAPIRefID, "--json"); !strings.Contains(out, `"state":"CAPTURED"`) || !strings.Contains(out, `"capturedAmount":66000`) {
		t.Errorf("status of the captured pre-auth: %s", out)
	}
	if r := lastTx(t, ecr(0, "refund", "100", "--original", pre.OnlineAPIRefID, "--wait", "--json")); r.Status != "APPROVED" {
		t.Errorf("refund of the capture = %+v", r)
	}
	other := lastTx(t, ecr(0, "preauth", "200", "--wait", "--json"))
	if v := lastTx(t, ecr(0, "void", other.OnlineAPIRefID, "--wait", "--json")); v.Type != instore.TypeVoid || v.Status != "APPROVED" {
		t.Errorf("void = %+v", v)
	}
}

package client_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestIntegrationAccessAPI drives Access API 2.0 through the SDK with the
// demo's customer credentials.
func TestIntegrationAccessAPI(t *testing.T) {
	e := startDemo(t, nil)
	ctx := t.Context()
	c := e.c
	info, err := c.GetTerminalInfo(ctx, e.terms[0])
	if client.ErrorCode(err) == instore.ENotFound || client.ErrorCode(err) == instore.EMethodNotAllowed {
		t.Skipf("the Access API does not serve POST /getTerminalInfo yet: %v", err)
	}
	if err != nil {
		t.Fatalf("GetTerminalInfo: %v", err)
	}
	if info.TerminalID != e.terms[0] || info.CustomerID != e.info.CustomerID || info.MerchantID != e.info.MerchantID || !info.Linked || info.Model != instore.ModelCountertop {
		t.Errorf("GetTerminalInfo = %+v", info)
	}
	alloc := mustOK[*client.AllocatedTerminal](t, "GetTerminalID")(c.GetTerminalID(ctx, client.GetTerminalIDParams{CustomerID: e.info.CustomerID, MerchantID: e.info.MerchantID}))
	if len(alloc.TerminalID) != 8 || alloc.CustomerID != e.info.CustomerID || slices.Contains(e.terms, alloc.TerminalID) {
		t.Errorf("GetTerminalID = %+v, want a new 8-digit terminal ID", alloc)
	}
	// The new terminal ID is the merchant's on the Online API.
	if term := mustOK[*client.Terminal](t, "Terminal")(c.Terminal(ctx, alloc.TerminalID)); term.Linked {
		t.Errorf("a new terminal ID is linked")
	}
	pkgs := mustOK[[]*client.Package](t, "GetPackages")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelCountertop))
	if len(pkgs) == 0 {
		t.Fatalf("the demo catalogue has no countertop package")
	}
	for _, p := range pkgs {
		if p.Model != instore.ModelCountertop || p.PackageID == "" || p.Version == "" {
			t.Errorf("package %+v", p)
		}
	}
	if none := mustOK[[]*client.Package](t, "GetPackages unknown model")(c.GetPackages(ctx, e.info.CustomerID, "toaster")); len(none) != 0 {
		t.Errorf("packages of an unknown model = %d, want none", len(none))
	}
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	up := mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[0], PackageID: pkgs[0].PackageID, NotBefore: &later}))
	if up.UpdateID == "" || up.Status != "SCHEDULED" || up.TerminalID != e.terms[0] {
		t.Errorf("CreateUpdate = %+v, want SCHEDULED", up)
	}
	if info := mustOK[*client.TerminalInfo](t, "GetTerminalInfo")(c.GetTerminalInfo(ctx, e.terms[0])); info.PendingUpdate == nil || info.PendingUpdate.UpdateID != up.UpdateID {
		t.Errorf("pendingUpdate = %+v, want %s", info.PendingUpdate, up.UpdateID)
	}
	// Updates delivered at once: one installed, one failed on purpose.
	pkgs1 := mustOK[[]*client.Package](t, "GetPackages mobile")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelMobile))
	if len(pkgs1) == 0 {
		t.Fatalf("the demo catalogue has no mobile package")
	}
	mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[1], PackageID: pkgs1[0].PackageID}))
	if u := waitUpdate(t, c, e.terms[1]); u.Status != "INSTALLED" || u.SoftwareVersion != pkgs1[0].Version {
		t.Errorf("update of %s = %s %q, want INSTALLED %s", e.terms[1], u.Status, u.SoftwareVersion, pkgs1[0].Version)
	}
	pkgs2 := mustOK[[]*client.Package](t, "GetPackages pinpad")(c.GetPackages(ctx, e.info.CustomerID, instore.ModelPINPad))
	if len(pkgs2) == 0 {
		t.Fatalf("the demo catalogue has no pinpad package")
	}
	mustOK[*client.SandboxDevice](t, "SandboxNextInstall")(c.SandboxNextInstall(ctx, e.terms[2], true, "checksum mismatch"))
	mustOK[*client.Update](t, "CreateUpdate")(c.CreateUpdate(ctx, client.CreateUpdateParams{TerminalID: e.terms[2], PackageID: pkgs2[0].PackageID}))
	if u := waitUpdate(t, c, e.terms[2]); u.Status != "FAILED" || u.Reason != "checksum mismatch" {
		t.Errorf("update of %s = %s %q, want FAILED checksum mismatch", e.terms[2], u.Status, u.Reason)
	}

	// The token endpoint (client credentials) and the document.
	cc := e.newClient(t, func(cfg *client.Config) {
		cfg.Access = client.Credentials{SubscriptionKey: e.info.AccessSubscriptionKey, ClientID: e.d.Credentials.AccessClientID, ClientSecret: e.d.Credentials.AccessClientSecret}
	})
	doc := mustOK[[]byte](t, "AccessOpenAPIDocument")(cc.AccessOpenAPIDocument(ctx))
	if want, err := os.ReadFile("../api/access-api.yaml"); err != nil || string(doc) != string(want) {
		t.Errorf("AccessOpenAPIDocument is not api/access-api.yaml")
	}

	// Another customer's data is forbidden.
	if _, err := c.GetPackages(ctx, "cus_other", instore.ModelCountertop); !client.IsCode(err, instore.EForbidden) {
		t.Errorf("GetPackages of another customer = %v, want forbidden", err)
	}
	if e.access != nil {
		if missed := uncovered(e.access.Covered()); len(missed) > 0 {
			t.Errorf("operations of api/access-api.yaml the SDK suite never called: %v", missed)
		}
	}
}

// waitUpdate follows a terminal's latest update until it is final.
func waitUpdate(t *testing.T, c *client.Client, terminalID string) *client.Update {
	t.Helper()
	var u *client.Update
	testwait.For(t, "the update of "+terminalID+" to end", func() bool {
		info, err := c.GetTerminalInfo(t.Context(), terminalID)
		if err != nil {
			t.Fatalf("GetTerminalInfo: %v", err)
		}
		u = info.LastUpdate
		return u != nil && u.Final()
	})
	return u
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/demo"
	"github.com/instore-dev/instore/internal/testwait"
)

// accessRequest calls the demo's Access API with its Access API
// credentials; the response is validated against api/access-api.yaml.
func accessRequest(t *testing.T, info demo.Info, method, path string, body any) (int, []byte) {
	t.Helper()
	c := apitest.Caller{Client: apitest.NewValidator(t, api.AccessYAML).Client(t), Base: info.AccessAPIBaseURL, Key: info.AccessSubscriptionKey, Token: info.AccessAccessToken}
	return c.Call(t, method, path, body)
}

type demoInfo struct {
	Linked          bool    `json:"linked"`
	Online          bool    `json:"online"`
	SoftwareVersion *string `json:"softwareVersion"`
	LastUpdate      *struct {
		UpdateID string               `json:"updateId"`
		Status   instore.UpdateStatus `json:"status"`
	} `json:"lastUpdate"`
}

// TestDemoAccessAPI checks the demo as the issue does, from outside with
// its Access API credentials: allocate terminal IDs, read terminal info,
// list the packages of each model, schedule an update and watch it
// install while the terminal stays usable, and link a freshly allocated
// terminal ID to a device by its link code on the Online API.
func TestDemoAccessAPI(t *testing.T) {
	info, _, _ := runDemo(t, "--sim-delay", "0")

	st, b := accessRequest(t, info, "POST", "/getTerminalId", map[string]any{"customerId": info.CustomerID, "merchantId": info.MerchantID})
	var fresh struct {
		TerminalID string `json:"terminalId"`
	}
	if json.Unmarshal(b, &fresh); st != 201 || !instore.ValidTerminalID(fresh.TerminalID) {
		t.Fatalf("getTerminalId = %d %s", st, b)
	}

	for _, model := range instore.Models {
		st, b := accessRequest(t, info, "GET", "/terminal/getPackages/"+info.CustomerID+"/"+model, nil)
		var list struct {
			Packages []struct {
				Version   string `json:"version"`
				Mandatory bool   `json:"mandatory"`
			} `json:"packages"`
		}
		json.Unmarshal(b, &list)
		if st != 200 || len(list.Packages) != 3 || list.Packages[0].Version != "1.2.0" || !list.Packages[2].Mandatory {
			t.Errorf("packages of %s = %d %s, want 1.2.0, 1.1.0 and the mandatory 1.0.0", model, st, b)
		}
	}

	term := info.Terminals[0].TerminalID
	readInfo := func() demoInfo {
		t.Helper()
		st, b := accessRequest(t, info, "POST", "/getTerminalInfo", map[string]any{"terminalId": term})
		var in demoInfo
		if json.Unmarshal(b, &in); st != 200 {
			t.Fatalf("getTerminalInfo = %d %s", st, b)
		}
		return in
	}
	testwait.For(t, "the demo's countertop terminal to come online", func() bool { return readInfo().Online })
	if in := readInfo(); !in.Linked || in.SoftwareVersion == nil || *in.SoftwareVersion != "1.0.0" {
		t.Errorf("terminal info = %+v, want linked, online, 1.0.0", in)
	}
	st, b = accessRequest(t, info, "POST", "/terminal/createUpdate", map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
	if st != 201 {
		t.Fatalf("createUpdate = %d %s", st, b)
	}
	testwait.ForNil(t, "the update to install", func() error {
		in := readInfo()
		if in.LastUpdate != nil && in.LastUpdate.Status == instore.UpdateFailed {
			t.Fatalf("the update did not install: %+v", in.LastUpdate)
		}
		if in.LastUpdate == nil || in.LastUpdate.Status != instore.UpdateInstalled {
			return fmt.Errorf("last update %+v", in.LastUpdate)
		}
		return nil
	})
	if in := readInfo(); *in.SoftwareVersion != "1.2.0" {
		t.Errorf("software version after the update = %s, want 1.2.0", *in.SoftwareVersion)
	}
	if got := waitFinal(t, info, purchase(t, info, term, 1250)); got != instore.StatusApproved {
		t.Errorf("purchase after the update ended %d, want APPROVED", got)
	}

	// Unlink the PIN pad; link the fresh terminal ID by its link code.
	pinpad := info.Terminals[2]
	if st, b := apiRequest(t, info, "POST", "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": pinpad.TerminalID}); st != 200 {
		t.Fatalf("unlink = %d %s", st, b)
	}
	var code string
	testwait.For(t, "the PIN pad to show a link code", func() bool {
		st, b := apiRequest(t, info, "GET", "/sandbox/v1/devices", nil)
		var devs struct {
			Devices []struct {
				SerialNumber string  `json:"serialNumber"`
				LinkCode     *string `json:"linkCode"`
			} `json:"devices"`
		}
		json.Unmarshal(b, &devs)
		for _, d := range devs.Devices {
			if d.SerialNumber == pinpad.SerialNumber && d.LinkCode != nil {
				code = *d.LinkCode
			}
		}
		if st != 200 {
			t.Fatalf("the PIN pad never showed a link code: %d %s", st, b)
		}
		return code != ""
	})
	if st, b := apiRequest(t, info, "POST", "/in-store/api/v1/terminal/link", map[string]any{"terminalId": fresh.TerminalID, "linkCode": code}); st != 200 {
		t.Fatalf("link the fresh terminal ID = %d %s", st, b)
	}
	if got := waitFinal(t, info, purchase(t, info, fresh.TerminalID, 700)); got != instore.StatusApproved {
		t.Errorf("purchase on the freshly linked terminal ID ended %d", got)
	}
}

func TestAdminPackagesImport(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := runCmd(t, "admin", "--data", dir, "--json", "customer", "create", "--name", "Shop AB")
	if code != 0 {
		t.Fatalf("customer create: %d %s", code, errs)
	}
	var cus struct {
		ID string `json:"customerId"`
	}
	must(t, json.Unmarshal([]byte(out), &cus))
	sha := strings.Repeat("0a", 32)
	file := filepath.Join(dir, "catalogue.json")
	catalogue := `{"packages":[
		{"packageId":"ct-1.0.0","model":"countertop","name":"Countertop app","version":"1.0.0","mandatory":true,"sizeBytes":100,"sha256":"` + sha + `","releasedAt":"2025-01-01T00:00:00Z"},
		{"packageId":"ct-1.1.0","model":"countertop","name":"Countertop app","version":"1.1.0","sizeBytes":110,"sha256":"` + sha + `","releasedAt":"2025-06-01T00:00:00Z"},
		{"packageId":"ct-own","customerId":"` + cus.ID + `","model":"countertop","name":"Custom build","version":"1.1.1","sizeBytes":111,"sha256":"` + sha + `","releasedAt":"2025-07-01T00:00:00Z"}]}`
	must(t, os.WriteFile(file, []byte(catalogue), 0o600))
	for _, want := range []string{`{"read":3,"added":3}`, `{"read":3,"added":0}`} {
		out, errs, code := runCmd(t, "admin", "--data", dir, "--json", "packages", "import", file)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("packages import = exit %d %q %s, want %s", code, out, errs, want)
		}
	}
	out, errs, code = runCmd(t, "admin", "--data", dir, "--json", "packages", "list", "--model", "countertop", "--customer", cus.ID)
	var list []struct {
		ID string `json:"packageId"`
	}
	if json.Unmarshal([]byte(out), &list); code != 0 || len(list) != 3 || list[0].ID != "ct-own" || list[2].ID != "ct-1.0.0" {
		t.Errorf("packages list = exit %d %s %s, want ct-own, ct-1.1.0, ct-1.0.0", code, out, errs)
	}

	for _, tc := range []struct {
		name, file, want string
	}{
		{"invalid package", `{"packages":[{"packageId":"x y","model":"toaster","name":"","version":"v1","sizeBytes":0,"sha256":"AB","releasedAt":"2025-01-01T00:00:00Z"}]}`,
			"/packages/0/packageId"},
		{"unknown field", `{"packages":[],"extra":1}`, "unknown field"},
		{"changed release", strings.Replace(catalogue, `"sizeBytes":100`, `"sizeBytes":101`, 1), "immutable"},
		{"unknown customer", `{"packages":[{"packageId":"p","customerId":"cus_none","model":"mobile","name":"n","version":"1","sizeBytes":1,"sha256":"` + sha + `","releasedAt":"2025-01-01T00:00:00Z"}]}`,
			"customerId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "c.json")
			must(t, os.WriteFile(f, []byte(tc.file), 0o600))
			_, errs, code := runCmd(t, "admin", "--data", dir, "packages", "import", f)
			if code == 0 || !strings.Contains(errs, tc.want) {
				t.Errorf("import = exit %d %q, want a failure naming %q", code, errs, tc.want)
			}
		})
	}
	out, _, _ = runCmd(t, "admin", "--data", dir, "--json", "packages", "list", "--model", "countertop")
	if strings.Contains(out, "ct-own") || !strings.Contains(out, "ct-1.1.0") {
		t.Errorf("packages list without a customer = %s, want the shared packages only", out)
	}
}

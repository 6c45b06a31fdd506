package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/apitest"
	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// The Access API end to end: over HTTP on its own listener, with real
// terminal sessions (virtual terminals, or raw devices the test drives),
// every response validated against api/access-api.yaml.

// accessPost posts a JSON body to the Access API with the env's Access
// credentials (or those in hdr).
func (e *env) accessPost(t *testing.T, path string, body any, hdr map[string]string) reply {
	t.Helper()
	return e.sendJSON(t, "POST", e.access+path, body, e.auth(e.accessToken, e.accessKey), hdr)
}

func (e *env) accessGet(t *testing.T, path string) reply {
	t.Helper()
	resp, b := e.do(t, "GET", e.access+path, nil, e.auth(e.accessToken, e.accessKey))
	return reply{resp, b}
}

// accessRaw posts body, as it is, with the Content-Type ct to the Access
// API with the env's Access credentials.
func (e *env) accessRaw(t *testing.T, path, ct, body string) reply {
	t.Helper()
	h := e.auth(e.accessToken, e.accessKey)
	h["Content-Type"] = ct
	resp, b := e.do(t, "POST", e.access+path, strings.NewReader(body), h)
	return reply{resp, b}
}

// bodyProblem is a JSON body and the problem it is answered with.
type bodyProblem struct {
	name   string
	body   string
	status int
	code   string
}

// accessProblems posts each case's body to the Access API's path and checks
// the problem it is answered with.
func (e *env) accessProblems(t *testing.T, path string, cases []bodyProblem) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.accessRaw(t, path, "application/json", tc.body).problem(t, tc.status, tc.code)
		})
	}
}

// decode checks the status of a reply and decodes its body into v.
func (r reply) decode(t *testing.T, status int, v any) {
	t.Helper()
	if r.resp.StatusCode != status {
		t.Fatalf("status = %d %s, want %d", r.resp.StatusCode, r.body, status)
	}
	must(t, json.Unmarshal(r.body, v))
}

func (e *env) allocate(t *testing.T, body map[string]any) instore.AllocatedTerminalWire {
	t.Helper()
	if _, ok := body["customerId"]; !ok {
		body["customerId"] = e.customer.ID
	}
	var a instore.AllocatedTerminalWire
	e.accessPost(t, "/getTerminalId", body, nil).decode(t, 201, &a)
	e.secrets = append(e.secrets, a.TerminalID)
	return a
}

func (e *env) info(t *testing.T, terminalID string) instore.TerminalInfoWire {
	t.Helper()
	var in instore.TerminalInfoWire
	e.accessPost(t, "/getTerminalInfo", map[string]any{"terminalId": terminalID}, nil).decode(t, 200, &in)
	return in
}

// waitInfo polls POST /getTerminalInfo until cond holds (bounded).
func (e *env) waitInfo(t *testing.T, terminalID, what string, cond func(instore.TerminalInfoWire) bool) instore.TerminalInfoWire {
	t.Helper()
	var in instore.TerminalInfoWire
	testwait.ForNil(t, "terminal info to show "+what, func() error {
		if in = e.info(t, terminalID); !cond(in) {
			return fmt.Errorf("%+v (pending %+v, last %+v)", in, in.PendingUpdate, in.LastUpdate)
		}
		return nil
	})
	return in
}

func (e *env) createUpdate(t *testing.T, body map[string]any) instore.UpdateWire {
	t.Helper()
	var u instore.UpdateWire
	e.accessPost(t, "/terminal/createUpdate", body, nil).decode(t, 201, &u)
	return u
}

func lastStatus(status instore.UpdateStatus) func(instore.TerminalInfoWire) bool {
	return func(in instore.TerminalInfoWire) bool { return in.LastUpdate != nil && in.LastUpdate.Status == status }
}

// testCatalogue is a catalogue for the three models: a mandatory 1.0.0
// (what virtual terminals run) and a newer 1.2.0 each, and for the
// countertop a 1.1.0 of the env's customer only.
func testCatalogue(customerID string) string {
	var ps []string
	for i, m := range instore.Models {
		for j, v := range []string{"1.0.0", "1.2.0"} {
			ps = append(ps, fmt.Sprintf(`{"packageId":"%s-%s","model":"%s","name":"%s app","version":"%s","mandatory":%v,"sizeBytes":%d,"sha256":"%064x","releasedAt":"2026-0%d-01T00:00:00Z"}`,
				m, v, m, m, v, j == 0, 1000+i, i*10+j+1, 2*j+1))
		}
	}
	ps = append(ps, fmt.Sprintf(`{"packageId":"countertop-1.1.0-own","customerId":%q,"model":"countertop","name":"countertop app","version":"1.1.0","sizeBytes":1,"sha256":"%064x","releasedAt":"2026-02-01T00:00:00Z"}`,
		customerID, 99))
	return `{"packages":[` + strings.Join(ps, ",") + `]}`
}

func (e *env) importCatalogue(t *testing.T, catalogue string) {
	t.Helper()
	if _, err := e.ad.ImportPackages(context.Background(), strings.NewReader(catalogue)); err != nil {
		t.Fatalf("ImportPackages: %v", err)
	}
}

// secondCustomer creates another customer with a merchant, a device and a
// terminal ID, and Access API credentials; it returns the customer id, the
// terminal ID, the merchant id and the credentials as headers.
func (e *env) secondCustomer(t *testing.T) (customerID, terminalID, merchantID string, creds map[string]string) {
	t.Helper()
	ctx := context.Background()
	c, err := e.ad.CreateCustomer(ctx, "Other AB")
	must(t, err)
	m, err := e.ad.CreateMerchant(ctx, c.ID, "Other shop", true)
	must(t, err)
	_, _, err = e.ad.CreateDevice(ctx, "SN-OTHER-1", instore.ModelCountertop, c.ID)
	must(t, err)
	ts, err := e.ad.AllocateTerminals(ctx, m.ID, 1)
	must(t, err)
	cr := apitest.NewCredentials(t, e.ad, instore.SurfaceAccess, c.ID, "other ops")
	token := e.getToken(t, e.access, cr.Client.ID, cr.Secret)
	e.secrets = append(e.secrets, c.ID, m.ID, ts[0].TerminalID, cr.Secret, cr.Key, token)
	return c.ID, ts[0].TerminalID, m.ID, map[string]string{"Authorization": "Bearer " + token, "Ocp-Apim-Subscription-Key": cr.Key}
}

// TestAccessSurface: its own listener, credentials and document; Online
// API credentials are refused here and Access API credentials there.
func TestAccessSurface(t *testing.T) {
	e := start(t, nil)
	resp, body := e.do(t, "GET", e.access+"/openapi.yaml", nil, e.auth(e.accessToken, e.accessKey))
	if resp.StatusCode != 200 || !bytes.Equal(body, api.AccessYAML) {
		t.Errorf("GET /openapi.yaml = %d (%d bytes), want 200 and the embedded document", resp.StatusCode, len(body))
	}
	h := e.auth(e.accessToken, e.accessKey)
	h["If-None-Match"] = resp.Header.Get("ETag")
	if resp, _ := e.do(t, "GET", e.access+"/openapi.yaml", nil, h); resp.StatusCode != 304 {
		t.Errorf("GET /openapi.yaml with its ETag = %d, want 304", resp.StatusCode)
	}

	ops := []struct {
		method, path string
		body         any
	}{
		{"POST", "/getTerminalId", map[string]any{"customerId": e.customer.ID}},
		{"POST", "/getTerminalInfo", map[string]any{"terminalId": "10000001"}},
		{"GET", "/terminal/getPackages/" + e.customer.ID + "/countertop", nil},
		{"POST", "/terminal/createUpdate", map[string]any{"terminalId": "10000001", "packageId": "p"}},
		{"GET", "/openapi.yaml", nil},
	}
	for _, cred := range []struct {
		name string
		hdr  map[string]string
	}{
		{"none", e.auth("", "")},
		{"online token and key", e.auth(e.token, e.key)},
		{"online token, access key", e.auth(e.token, e.accessKey)},
		{"access token, online key", e.auth(e.accessToken, e.key)},
		{"bad token", e.auth(e.accessToken+"x", e.accessKey)},
	} {
		for _, op := range ops {
			t.Run(cred.name+" "+op.path, func(t *testing.T) {
				r := e.sendJSON(t, op.method, e.access+op.path, op.body, cred.hdr, nil)
				if r.resp.StatusCode != 401 || r.resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s = %d %s, want 401 with WWW-Authenticate", op.method, op.path, r.resp.StatusCode, r.body)
				}
			})
		}
	}
	// Access API credentials on the Online API.
	for _, path := range []string{"/in-store/api/v1/metadata", "/in-store/api/v1/terminals"} {
		if resp, body := e.do(t, "GET", e.online+path, nil, e.auth(e.accessToken, e.accessKey)); resp.StatusCode != 401 {
			t.Errorf("GET %s with Access API credentials = %d %s, want 401", path, resp.StatusCode, body)
		}
	}
	// The Access API's paths are not on the Online API's listener, nor the
	// other way round; unknown paths and methods are problems.
	if resp, _ := e.do(t, "POST", e.online+"/getTerminalId", strings.NewReader("{}"), e.auth(e.token, e.key)); resp.StatusCode != 404 {
		t.Errorf("POST /getTerminalId on the Online API listener = %d, want 404", resp.StatusCode)
	}
	e.routeProblems(t, e.access, e.auth(e.accessToken, e.accessKey), []routeProblem{
		{"GET", "/in-store/api/v1/metadata", 404},
		{"GET", "/getTerminalId", 405},
		{"POST", "/terminal/getPackages/x/y", 405},
		{"GET", "/terminal/nothing", 404},
	})
}

func TestGetTerminalID(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	a := e.allocate(t, map[string]any{})
	if !instore.ValidTerminalID(a.TerminalID) || a.CustomerID != e.customer.ID || a.MerchantID != nil || a.SerialNumber != nil || a.Model != nil {
		t.Errorf("allocation for the customer = %+v, want 8 digits, no merchant, device or model", a)
	}
	b := e.allocate(t, map[string]any{"merchantId": e.merchantRec.ID, "model": "mobile"})
	if b.MerchantID == nil || *b.MerchantID != e.merchantRec.ID || b.Model == nil || *b.Model != "mobile" || b.TerminalID <= a.TerminalID {
		t.Errorf("allocation for the merchant = %+v, want the merchant, model mobile and a higher ID than %s", b, a.TerminalID)
	}
	// The merchant uses it on the Online API at once.
	if resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/terminal/"+b.TerminalID, nil, e.auth(e.token, e.key)); resp.StatusCode != 200 {
		t.Errorf("GET the new terminal ID on the Online API = %d %s, want 200", resp.StatusCode, body)
	}
	if resp, _ := e.do(t, "GET", e.online+"/in-store/api/v1/terminal/"+a.TerminalID, nil, e.auth(e.token, e.key)); resp.StatusCode != 403 {
		t.Errorf("GET a terminal ID of no merchant on the Online API = %d, want 403 WP16", resp.StatusCode)
	}
	// The admin command allocates with the same operation: the next ID.
	ts, err := e.ad.AllocateTerminals(ctx, e.merchantRec.ID, 1)
	must(t, err)
	if ts[0].TerminalID <= b.TerminalID {
		t.Errorf("admin allocation = %s after %s, want a new, higher ID", ts[0].TerminalID, b.TerminalID)
	}

	otherCustomer, _, otherMerchant, _ := e.secondCustomer(t)
	e.accessProblems(t, "/getTerminalId", []bodyProblem{
		{"no customerId", `{}`, 400, "validation"},
		{"unknown field", `{"customerId":"` + e.customer.ID + `","terminalId":"1"}`, 400, "validation"},
		{"wrong type", `{"customerId":7}`, 400, "validation"},
		{"bad model", `{"customerId":"` + e.customer.ID + `","model":"toaster"}`, 400, "validation"},
		{"malformed", `{"customerId":`, 400, "validation"},
		{"another customer", `{"customerId":"` + otherCustomer + `"}`, 403, "forbidden"},
		{"an unknown customer", `{"customerId":"cus_unknown"}`, 403, "forbidden"},
		{"another customer's merchant", `{"customerId":"` + e.customer.ID + `","merchantId":"` + otherMerchant + `"}`, 403, "forbidden"},
		{"an unknown merchant", `{"customerId":"` + e.customer.ID + `","merchantId":"mer_unknown"}`, 403, "forbidden"},
		{"another customer's device", `{"customerId":"` + e.customer.ID + `","serialNumber":"SN-OTHER-1"}`, 403, "forbidden"},
		{"an unknown device", `{"customerId":"` + e.customer.ID + `","serialNumber":"SN-NONE"}`, 403, "forbidden"},
	})
	// Forbidden says the same whether the thing exists or not.
	detail := func(body string) string {
		var p struct{ Detail string }
		json.Unmarshal(e.accessRaw(t, "/getTerminalId", "application/json", body).body, &p)
		return p.Detail
	}
	if x, y := detail(`{"customerId":"`+otherCustomer+`"}`), detail(`{"customerId":"cus_unknown"}`); x != y {
		t.Errorf("403 for an existing customer %q differs from an unknown one %q", x, y)
	}
	if r := e.accessRaw(t, "/getTerminalId", "text/plain", `{}`); r.resp.StatusCode != 415 {
		t.Errorf("text/plain body = %d, want 415", r.resp.StatusCode)
	}
	if r := e.accessRaw(t, "/getTerminalId", "application/json", `{"customerId":"`+strings.Repeat("x", 70000)+`"}`); r.resp.StatusCode != 413 {
		t.Errorf("70 kB body = %d, want 413", r.resp.StatusCode)
	}

	// Idempotency: a retry replays the first allocation.
	key := map[string]string{"Idempotency-Key": "alloc-1"}
	first := e.accessPost(t, "/getTerminalId", map[string]any{"customerId": e.customer.ID}, key)
	again := e.accessPost(t, "/getTerminalId", map[string]any{"customerId": e.customer.ID}, key)
	if first.resp.StatusCode != 201 || again.resp.StatusCode != 201 || !bytes.Equal(first.body, again.body) || again.resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retried allocation = %d %s (replayed %q), want the first %d %s replayed",
			again.resp.StatusCode, again.body, again.resp.Header.Get("Idempotent-Replayed"), first.resp.StatusCode, first.body)
	}
	e.accessPost(t, "/getTerminalId", map[string]any{"customerId": e.customer.ID, "model": "pinpad"}, key).problem(t, 422, "idempotency-conflict")
	e.accessPost(t, "/getTerminalId", map[string]any{"customerId": e.customer.ID}, map[string]string{"Idempotency-Key": ""}).problem(t, 400, "validation")
}

// TestGetTerminalIDConcurrent allocates from many goroutines over HTTP and
// finds no terminal ID twice.
func TestGetTerminalIDConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		e := start(t, mutate)
		const workers, each = 24, 5
		body, _ := json.Marshal(map[string]any{"customerId": e.customer.ID, "merchantId": e.merchantRec.ID})
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[string]int{}
			errs []string
		)
		for range workers {
			wg.Go(func() {
				for range each {
					req, _ := http.NewRequest("POST", e.access+"/getTerminalId", bytes.NewReader(body))
					for k, v := range e.auth(e.accessToken, e.accessKey) {
						req.Header.Set(k, v)
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := e.accessClient.Do(req)
					if err != nil {
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
						return
					}
					var a instore.AllocatedTerminalWire
					err = json.NewDecoder(resp.Body).Decode(&a)
					resp.Body.Close()
					mu.Lock()
					if resp.StatusCode != 201 || err != nil {
						errs = append(errs, fmt.Sprintf("status %d, %v", resp.StatusCode, err))
					} else {
						seen[a.TerminalID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("concurrent allocations failed: %v", errs)
		}
		for id, n := range seen {
			if n != 1 || !instore.ValidTerminalID(id) {
				t.Errorf("terminal ID %q handed out %d times", id, n)
			}
		}
		if len(seen) != workers*each {
			t.Errorf("%d distinct terminal IDs, want %d", len(seen), workers*each)
		}
	})
}

// TestGetTerminalIDBindsDevice: a freshly allocated terminal ID bound to a
// device, and one linked on the Online API by the device's link code.
func TestGetTerminalIDBindsDevice(t *testing.T) {
	s := startSandbox(t)
	// Unlink the PIN pad: it shows a link code and belongs to the customer.
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": s.terminals[2]}, nil).tx(t, 200)
	devs := s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[2].LinkCode != nil })
	serial := devs[2].SerialNumber

	s.accessPost(t, "/getTerminalId", map[string]any{"customerId": s.customer.ID, "serialNumber": serial, "model": "mobile"}, nil).problem(t, 400, "validation")
	s.accessPost(t, "/getTerminalId", map[string]any{"customerId": s.customer.ID, "serialNumber": devs[0].SerialNumber}, nil).problem(t, 409, "conflict")
	a := s.allocate(t, map[string]any{"merchantId": s.merchantRec.ID, "serialNumber": serial})
	if a.SerialNumber == nil || *a.SerialNumber != serial || a.Model == nil || *a.Model != instore.ModelPINPad {
		t.Errorf("allocation bound to the PIN pad = %+v", a)
	}
	// The device shows the new terminal ID and takes payments on it.
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		return ds[2].TerminalID != nil && *ds[2].TerminalID == a.TerminalID && ds[2].LinkCode == nil
	})
	if tx := s.final(t, s.purchase(t, a.TerminalID, 1000).tx(t, 201).OnlineAPIRefID); tx.StatusID != instore.StatusApproved {
		t.Errorf("purchase on the bound terminal ID ended %d, want APPROVED", tx.StatusID)
	}
	in := s.info(t, a.TerminalID)
	if !in.Linked || !in.Online || in.SerialNumber == nil || *in.SerialNumber != serial {
		t.Errorf("info of the bound terminal ID = %+v", in)
	}

	// A fresh terminal ID linked on the Online API by the link code.
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": a.TerminalID}, nil).tx(t, 200)
	devs = s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[2].LinkCode != nil })
	b := s.allocate(t, map[string]any{"merchantId": s.merchantRec.ID})
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": b.TerminalID, "linkCode": *devs[2].LinkCode}, nil).tx(t, 200)
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		return ds[2].TerminalID != nil && *ds[2].TerminalID == b.TerminalID
	})
	if in := s.info(t, b.TerminalID); !in.Linked || in.Model == nil || *in.Model != instore.ModelPINPad {
		t.Errorf("info after linking by link code = %+v", in)
	}
}

func TestGetTerminalInfo(t *testing.T) {
	s := startSandbox(t)
	in := s.info(t, s.terminals[0])
	if !in.Linked || !in.Online || in.Model == nil || *in.Model != "countertop" || in.SoftwareVersion == nil || *in.SoftwareVersion != "1.0.0" ||
		in.LastSeenAt == nil || in.MerchantID == nil || *in.MerchantID != s.merchantRec.ID || in.CustomerID != s.customer.ID ||
		in.PendingUpdate != nil || in.LastUpdate != nil || in.MinSoftwareVersion != nil {
		t.Errorf("info of a linked virtual terminal = %+v", in)
	}
	s.post(t, "/sandbox/v1/terminals/"+s.terminals[1]+"/offline", nil, nil)
	s.waitInfo(t, s.terminals[1], "offline", func(in instore.TerminalInfoWire) bool { return !in.Online && in.Linked && in.LastSeenAt != nil })

	a := s.allocate(t, map[string]any{"model": "pinpad"})
	in = s.info(t, a.TerminalID)
	want := instore.TerminalInfoWire{TerminalIDWire: instore.TerminalIDWire{TerminalID: a.TerminalID, CustomerID: s.customer.ID, Model: a.Model}}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("info of an unbound terminal ID (-want +got):\n%s", diff)
	}

	_, otherTerminal, _, otherCreds := s.secondCustomer(t)
	s.accessProblems(t, "/getTerminalInfo", []bodyProblem{
		{"another customer's", `{"terminalId":"` + otherTerminal + `"}`, 403, "forbidden"},
		{"unknown", `{"terminalId":"99999999"}`, 403, "forbidden"},
		{"malformed ID", `{"terminalId":"123"}`, 400, "validation"},
		{"missing", `{}`, 400, "validation"},
		{"unknown field", `{"terminalId":"10000001","x":1}`, 400, "validation"},
	})
	// The other customer sees its own terminal, not this one.
	if r := s.accessPost(t, "/getTerminalInfo", map[string]any{"terminalId": otherTerminal}, otherCreds); r.resp.StatusCode != 200 {
		t.Errorf("the other customer reading its terminal = %d %s", r.resp.StatusCode, r.body)
	}
	s.accessPost(t, "/getTerminalInfo", map[string]any{"terminalId": s.terminals[0]}, otherCreds).problem(t, 403, "forbidden")
}

func TestGetPackages(t *testing.T) {
	e := start(t, nil)
	// The test compares a package's id, model, version and mandatory.
	pkg := func(id, model, version string, mandatory bool) instore.Package {
		return instore.Package{ID: id, Model: model, Version: version, Mandatory: mandatory}
	}
	compared := cmpopts.IgnoreFields(instore.Package{}, "Name", "SizeBytes", "SHA256", "ReleasedAt")
	other, _, _, otherCreds := e.secondCustomer(t)
	e.importCatalogue(t, testCatalogue(e.customer.ID))
	for _, tc := range []struct {
		model string
		want  []instore.Package
	}{
		{"countertop", []instore.Package{
			pkg("countertop-1.2.0", "countertop", "1.2.0", false),
			pkg("countertop-1.1.0-own", "countertop", "1.1.0", false),
			pkg("countertop-1.0.0", "countertop", "1.0.0", true),
		}},
		{"mobile", []instore.Package{pkg("mobile-1.2.0", "mobile", "1.2.0", false), pkg("mobile-1.0.0", "mobile", "1.0.0", true)}},
		{"pinpad", []instore.Package{pkg("pinpad-1.2.0", "pinpad", "1.2.0", false), pkg("pinpad-1.0.0", "pinpad", "1.0.0", true)}},
		{"toaster", []instore.Package{}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			var got struct{ Packages []instore.Package }
			e.accessGet(t, "/terminal/getPackages/"+e.customer.ID+"/"+tc.model).decode(t, 200, &got)
			if diff := cmp.Diff(tc.want, got.Packages, compared); diff != "" {
				t.Errorf("packages (-want +got):\n%s", diff)
			}
		})
	}
	// Another customer sees the shared packages only, and only with its own id.
	var got struct{ Packages []instore.Package }
	resp, body := e.do(t, "GET", e.access+"/terminal/getPackages/"+other+"/countertop", nil, otherCreds)
	reply{resp, body}.decode(t, 200, &got)
	if len(got.Packages) != 2 {
		t.Errorf("the other customer sees %d countertop packages, want the 2 shared ones: %s", len(got.Packages), body)
	}
	e.accessGet(t, "/terminal/getPackages/"+other+"/countertop").problem(t, 403, "forbidden")
	e.accessGet(t, "/terminal/getPackages/cus_unknown/countertop").problem(t, 403, "forbidden")
}

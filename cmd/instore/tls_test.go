package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/internal/tlsfiles/tlstest"
)

// tlsServe is `instore serve` over TLS running as a child process (the
// test binary as the instore binary), so that it can be sent SIGHUP.
type tlsServe struct {
	cmd    *exec.Cmd
	stderr *testlog.Buffer
	addrs  map[string]string // surface: host:port
	done   chan error
}

// startTLSServe starts serve with args and waits for its four "listening"
// log lines.
func startTLSServe(t *testing.T, args ...string) *tlsServe {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	args = slices.Concat([]string{"serve", "--log-format", "json"}, onFreePorts, args)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), asBinaryEnv+"=1")
	pipe, err := cmd.StderrPipe()
	must(t, err)
	s := &tlsServe{cmd: cmd, stderr: &testlog.Buffer{}, addrs: map[string]string{}, done: make(chan error, 1)}
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	listening := make(chan map[string]string, 1)
	go func() {
		addrs := map[string]string{}
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.stderr.Write(append(sc.Bytes(), '\n'))
			var rec struct{ Msg, Surface, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				addrs[rec.Surface] = rec.Addr
				if len(addrs) == 4 {
					listening <- addrs
				}
			}
		}
		io.Copy(io.Discard, pipe)
		s.done <- cmd.Wait()
	}()
	select {
	case s.addrs = <-listening:
	case err := <-s.done:
		s.done <- err
		t.Fatalf("instore serve exited: %v\n%s", err, s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("instore serve did not listen within 30 s:\n%s", s.stderr.String())
	}
	return s
}

// waitLog waits (bounded) until the log holds n lines containing want.
func (s *tlsServe) waitLog(t *testing.T, want string, n int) {
	t.Helper()
	testwait.ForNil(t, fmt.Sprintf("%d lines with %q in the log", n, want), func() error {
		if strings.Count(s.stderr.String(), want) < n {
			return fmt.Errorf("log:\n%s", s.stderr.String())
		}
		return nil
	})
}

// waitSerial waits (bounded) until every TLS listener serves the
// certificate with this serial number.
func (s *tlsServe) waitSerial(t *testing.T, ca *tlstest.CA, want int64) {
	t.Helper()
	for _, name := range []string{"online", "access", "terminal"} {
		testwait.ForNil(t, fmt.Sprintf("%s to serve serial %d", name, want), func() error {
			if got, err := tlstest.ServedSerial(s.addrs[name], ca); err != nil || got != want {
				return fmt.Errorf("serves serial %d (%v)\n%s", got, err, s.stderr.String())
			}
			return nil
		})
	}
}

// TestServeTLS runs `instore serve --tls-cert --tls-key` with a
// certificate of a CA made here: a virtual terminal (`instore terminal
// --ca-file`) connects over wss://, the SDK trusting the CA links it and
// pays over https://, `instore ecr --ca-file` reads the metadata. Then the
// files are replaced and SIGHUP makes the service serve the new
// certificate; a bad replacement keeps it. The ops listener stays plain
// HTTP (instore healthcheck).
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service as a child process")
	}
	ca := tlstest.NewCA(t)
	files := tlstest.NewFiles(t)
	files.Write(t, ca.Issue(t, 1))

	// The store, seeded as `instore admin` would.
	dir := t.TempDir()
	ctx := context.Background()
	st, err := server.OpenStore(ctx, server.Config{DataDir: dir, SQLiteSynchronous: "NORMAL"})
	must(t, err)
	ad := admin.New(st)
	shop := apitest.NewShop(t, ad, "TLS shop", "TLS shop 1", "ecr")
	cli, secret, key := shop.Online.Client, shop.Online.Secret, shop.Online.Key
	_, devSecret, err := ad.CreateDevice(ctx, "TLS-1", instore.ModelCountertop, "")
	must(t, err)
	terms, err := ad.AllocateTerminals(ctx, shop.Merchant.ID, 1)
	must(t, err)
	must(t, st.Close())

	s := startTLSServe(t, "--data", dir, "--sqlite-synchronous", "NORMAL", "--tls-cert", files.Cert, "--tls-key", files.Key,
		"--tls-watch-interval", "0")
	s.waitSerial(t, ca, 1)
	online := "https://" + s.addrs["online"]

	// The virtual terminal over wss://, trusting the CA.
	linkCode, stop := runTerminal(t, ctx, devSecret, "--gateway", "wss://"+s.addrs["terminal"]+"/terminal/v1/connect",
		"--ca-file", ca.File, "--serial", "TLS-1", "--delay", "0")
	defer func() {
		if c := stop(); c != 0 {
			t.Errorf("instore terminal exited %d", c)
		}
	}()

	// The SDK over https://, trusting the CA.
	cfg := client.Config{OnlineAPIURL: online, Online: client.Credentials{SubscriptionKey: key, ClientID: cli.ID, ClientSecret: secret}}
	must(t, cfg.TrustCAFile(ca.File))
	c, err := client.New(cfg)
	must(t, err)
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	if _, err := c.LinkTerminal(cctx, terms[0].TerminalID, linkCode); err != nil {
		t.Fatalf("link over https: %v", err)
	}
	tx, err := c.Purchase(cctx, client.PurchaseParams{TerminalID: terms[0].TerminalID, Amount: 4400, Currency: "SEK"})
	if err != nil {
		t.Fatalf("purchase over https: %v", err)
	}
	final, err := c.WaitForFinal(cctx, tx.OnlineAPIRefID, nil)
	must(t, err)
	if final.StatusID != instore.StatusApproved {
		t.Errorf("purchase ended %s, want APPROVED", final.Status)
	}

	// instore ecr --ca-file; without it the certificate is refused.
	ecrArgs := []string{"ecr", "--url", online, "--subscription-key", key, "--client-id", cli.ID, "--client-secret", secret, "metadata", "--json"}
	if out, errs, code := runCmd(t, append(ecrArgs, "--ca-file", ca.File)...); code != 0 || !strings.Contains(out, `"errorCodes"`) {
		t.Errorf("instore ecr --ca-file metadata = exit %d, %q %q", code, out, errs)
	}
	if _, errs, code := runCmd(t, ecrArgs...); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("instore ecr metadata without the CA = exit %d, %q; want 1 and a certificate error", code, errs)
	}

	// The ops listener is plain HTTP: the container's probe.
	if out, errs, code := runCmd(t, "healthcheck", "--listen-ops", s.addrs["ops"]); code != 0 || !strings.Contains(out, `"ready"`) {
		t.Errorf("instore healthcheck = exit %d, %q %q", code, out, errs)
	}

	// New files and SIGHUP: the new certificate is served.
	files.Write(t, ca.Issue(t, 2))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	s.waitSerial(t, ca, 2)
	// The terminal reconnects with the new certificate after a restart of
	// its session; the SDK's new connections see it: another purchase.
	tx, err = c.Purchase(cctx, client.PurchaseParams{TerminalID: terms[0].TerminalID, Amount: 4400, Currency: "SEK"})
	if err != nil {
		t.Fatalf("purchase after the reload: %v", err)
	}
	if final, err := c.WaitForFinal(cctx, tx.OnlineAPIRefID, nil); err != nil || final.StatusID != instore.StatusApproved {
		t.Errorf("purchase after the reload = %v, %v; want APPROVED", final, err)
	}

	// A bad replacement (a key of another certificate) and SIGHUP: logged,
	// the served certificate stays.
	bad := ca.Issue(t, 3)
	tlstest.WriteFile(t, files.Cert, bad.CertPEM)
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	s.waitLog(t, "TLS certificate not reloaded", 1)
	s.waitSerial(t, ca, 2)
	// A key that is not PEM at all.
	tlstest.WriteFile(t, files.Key, []byte("garbage"))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	s.waitLog(t, "TLS certificate not reloaded", 2)
	s.waitSerial(t, ca, 2)

	must(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Errorf("instore serve after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("instore serve did not exit within 60 s of SIGTERM")
	}
	logs := s.stderr.String()
	for _, secretText := range []string{key, secret, devSecret, "PRIVATE KEY", strings.Split(string(bad.KeyPEM), "\n")[1]} {
		if strings.Contains(logs, secretText) {
			t.Errorf("the service's log holds a secret or key material (%.8s...)", secretText)
		}
	}
	if n := strings.Count(logs, `"msg":"TLS certificate loaded"`); n != 2 {
		t.Errorf("%d 'TLS certificate loaded' lines, want 2 (the start, the SIGHUP reload):\n%s", n, logs)
	}
}

// TestTLSUsage: TLS flags given wrongly exit 2 before anything starts.
func TestTLSUsage(t *testing.T) {
	ca := tlstest.NewCA(t)
	files := tlstest.NewFiles(t)
	files.Write(t, ca.Issue(t, 1))
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"serve", "--data", dir, "--tls-cert", files.Cert}, "--tls-cert and --tls-key go together"},
		{"key without cert", []string{"serve", "--data", dir, "--tls-key", files.Key}, "--tls-cert and --tls-key go together"},
		{"missing cert file", []string{"serve", "--data", dir, "--tls-cert", missing, "--tls-key", files.Key}, "missing.pem"},
		{"key of the wrong file", []string{"serve", "--data", dir, "--tls-cert", files.Cert, "--tls-key", files.Cert}, "tls:"},
		{"bad watch interval", []string{"serve", "--data", dir, "--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-watch-interval", "-1s"}, "--tls-watch-interval"},
		{"terminal CA file missing", []string{"terminal", "--gateway", "wss://127.0.0.1:1/terminal/v1/connect", "--serial", "S", "--secret", "x", "--ca-file", missing}, "--ca-file"},
		{"terminal CA file of a key", []string{"terminal", "--gateway", "wss://127.0.0.1:1/terminal/v1/connect", "--serial", "S", "--secret", "x", "--ca-file", files.Key}, "no PEM certificate"},
		{"ecr CA file missing", []string{"ecr", "--url", "https://127.0.0.1:1", "--subscription-key", "k", "--access-token", "t", "--ca-file", missing, "metadata"}, "--ca-file"},
		{"healthcheck bad address", []string{"healthcheck", "--listen-ops", "nonsense"}, "--listen-ops"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("instore %v = exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errs, tc.want)
			}
		})
	}
	// The TLS environment variables work as the flags do.
	t.Setenv("INSTORE_TLS_CERT", files.Cert)
	if _, errs, code := runCmd(t, "serve", "--data", dir); code != 2 || !strings.Contains(errs, "go together") {
		t.Errorf("INSTORE_TLS_CERT alone = exit %d, %q; want 2", code, errs)
	}
	// Nothing listens on the ops address: the probe fails with exit 1.
	if _, errs, code := runCmd(t, "healthcheck", "--listen-ops", "127.0.0.1:1", "--timeout", "2s"); code != 1 || !strings.Contains(errs, "127.0.0.1:1/readyz") {
		t.Errorf("instore healthcheck with no service = exit %d, %q; want 1", code, errs)
	}
}

// TestServeSIGHUPWithoutTLS: systemctl reload sends SIGHUP whatever the
// configuration; without TLS it is logged and the service keeps running.
func TestServeSIGHUPWithoutTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service as a child process")
	}
	s := startTLSServe(t, "--data", t.TempDir(), "--sqlite-synchronous", "NORMAL")
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	s.waitLog(t, "nothing to reload", 1)
	if out, errs, code := runCmd(t, "healthcheck", "--listen-ops", s.addrs["ops"]); code != 0 || !strings.Contains(out, `"ready"`) {
		t.Errorf("instore healthcheck after SIGHUP = exit %d, %q %q", code, out, errs)
	}
}

// TestEcrUnknownCAHint: instore ecr against a real TLS server whose
// self-signed certificate no trusted CA issued says to pass its CA with
// --ca-file; with --ca-file of that certificate the request goes through.
func TestEcrUnknownCAHint(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"paymentMethods":[],"transactionStatuses":[],"errorCodes":[]}`))
	}))
	defer srv.Close()
	t.Setenv(client.EnvOnlineAPIURL, srv.URL)
	t.Setenv(client.EnvSubscriptionKey, "key")
	t.Setenv(client.EnvAccessToken, "token")
	for _, args := range [][]string{{"ecr", "metadata"}, {"ecr", "purchase", "12.50", "--terminal", "10000001", "--currency", "SEK"}, {"ecr", "events", "--follow"}} {
		_, errs, code := runCmd(t, args...)
		if code != exitFailed || !strings.Contains(errs, "certificate signed by unknown authority: pass the service's CA with --ca-file FILE") {
			t.Errorf("instore %v = exit %d, stderr %q; want %d and the --ca-file hint", args, code, errs, exitFailed)
		}
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCmd(t, "ecr", "metadata", "--ca-file", caFile); code != 0 {
		t.Errorf("instore ecr metadata --ca-file = exit %d, stderr %q; want 0", code, errs)
	}
}

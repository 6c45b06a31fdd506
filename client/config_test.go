package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore/client"
)

func TestCredentialsNeverPrint(t *testing.T) {
	cr := client.Credentials{SubscriptionKey: "isk_SECRET", ClientID: "cli", ClientSecret: "SECRET2"}
	for _, s := range []string{fmt.Sprint(cr), fmt.Sprintf("%+v", cr), fmt.Sprintf("%#v", cr), fmt.Sprint(client.Config{Online: cr})} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("formatted credentials show a secret: %s", s)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "creds", cr)
	if strings.Contains(buf.String(), "SECRET") {
		t.Errorf("slog shows a secret: %s", buf.String())
	}
}

func TestNewChecksConfig(t *testing.T) {
	ok := client.Credentials{SubscriptionKey: "k", AccessToken: "t"}
	cases := []struct {
		name string
		cfg  client.Config
		want string // part of the error; "" for none
	}{
		{"online only", client.Config{OnlineAPIURL: "http://127.0.0.1:8080/", Online: ok}, ""},
		{"access only", client.Config{AccessAPIURL: "https://access.example", Access: ok}, ""},
		{"no URL", client.Config{Online: ok}, "no base URL"},
		{"not http", client.Config{OnlineAPIURL: "ftp://x", Online: ok}, "not an http"},
		{"credentials in URL", client.Config{OnlineAPIURL: "http://u:p@x", Online: ok}, "must not hold credentials"},
		{"no key", client.Config{OnlineAPIURL: "http://x", Online: client.Credentials{AccessToken: "t"}}, "no subscription key"},
		{"no token", client.Config{OnlineAPIURL: "http://x", Online: client.Credentials{SubscriptionKey: "k"}}, "no access token"},
		{"half client credentials", client.Config{OnlineAPIURL: "http://x", Online: client.Credentials{SubscriptionKey: "k", ClientID: "c"}}, "client secret"},
		{"access without its credentials", client.Config{OnlineAPIURL: "http://x", Online: ok, AccessAPIURL: "http://y"}, "Access API: no subscription key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.cfg)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("New = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestAccessCallWithoutAccessURL(t *testing.T) {
	c, s := newScripted(t, client.Config{}, reply{200, nil, `{}`})
	_, err := c.GetTerminalInfo(context.Background(), "10000001")
	if err == nil || !strings.Contains(err.Error(), "no Access API base URL") {
		t.Errorf("GetTerminalInfo without AccessAPIURL = %v", err)
	}
	if s.count() != 0 {
		t.Errorf("a request was sent")
	}
}

func TestConfigFromEnv(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secretFile, []byte("from-file\n"), 0o600)
	cases := []struct {
		name    string
		env     map[string]string
		want    client.Config
		wantErr string
	}{
		{
			name: "online with a token",
			env:  map[string]string{client.EnvOnlineAPIURL: "http://127.0.0.1:8080", client.EnvSubscriptionKey: "isk", client.EnvAccessToken: "tok"},
			want: client.Config{OnlineAPIURL: "http://127.0.0.1:8080", Online: client.Credentials{SubscriptionKey: "isk", AccessToken: "tok"}},
		},
		{
			name: "both surfaces, secret from a file",
			env: map[string]string{
				client.EnvOnlineAPIURL: "http://o", client.EnvSubscriptionKey: "isk", client.EnvClientID: "cli", client.EnvClientSecret + "_FILE": secretFile,
				client.EnvAccessAPIURL: "http://a", client.EnvAccessAPISubscriptionKey: "ask", client.EnvAccessAPIToken: "atok",
			},
			want: client.Config{
				OnlineAPIURL: "http://o", Online: client.Credentials{SubscriptionKey: "isk", ClientID: "cli", ClientSecret: "from-file"},
				AccessAPIURL: "http://a", Access: client.Credentials{SubscriptionKey: "ask", AccessToken: "atok"},
			},
		},
		{name: "nothing set", env: map[string]string{}, wantErr: "neither"},
		{name: "missing secret file", env: map[string]string{client.EnvOnlineAPIURL: "http://o", client.EnvSubscriptionKey + "_FILE": "/nonexistent"}, wantErr: "INSTORE_SUBSCRIPTION_KEY_FILE"},
	}
	all := []string{client.EnvOnlineAPIURL, client.EnvSubscriptionKey, client.EnvAccessToken, client.EnvClientID, client.EnvClientSecret,
		client.EnvAccessAPIURL, client.EnvAccessAPISubscriptionKey, client.EnvAccessAPIToken, client.EnvAccessAPIClientID, client.EnvAccessAPIClientSecret}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range all {
				t.Setenv(k, "")
				os.Unsetenv(k)
				t.Setenv(k+"_FILE", "")
				os.Unsetenv(k + "_FILE")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := client.ConfigFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ConfigFromEnv error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b func() time.Time) bool { return a == nil && b == nil })); diff != "" {
				t.Errorf("ConfigFromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadBuild(t *testing.T) {
	vcs := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/instore-dev/instore", Version: version}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		name                string
		ldVersion, ldCommit string
		ldDate              string
		bi                  *debug.BuildInfo
		want                build
	}{
		{"nothing known", "", "", "", nil,
			build{"dev", "unknown", "unknown", runtime.Version(), platform}},
		{"devel build without vcs", "", "", "", vcs("(devel)"),
			build{"dev", "unknown", "unknown", "go1.99", platform}},
		{"from build info", "", "", "", vcs("v1.4.0", "vcs.revision", "0123abcd", "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "false"),
			build{"v1.4.0", "0123abcd", "2025-06-01T10:00:00Z", "go1.99", platform}},
		{"modified tree is dirty", "", "", "", vcs("(devel)", "vcs.revision", "0123abcd", "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "true"),
			build{"dev", "0123abcd-dirty", "2025-06-01T10:00:00Z", "go1.99", platform}},
		{"ldflags win", "v2.0.0", "feedbeef", "2025-07-01T00:00:00Z", vcs("v1.4.0", "vcs.revision", "0123abcd", "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "true"),
			build{"v2.0.0", "feedbeef", "2025-07-01T00:00:00Z", "go1.99", platform}},
		{"ldflags version only", "v2.0.0", "", "", vcs("(devel)", "vcs.revision", "0123abcd", "vcs.time", "2025-06-01T10:00:00Z"),
			build{"v2.0.0", "0123abcd", "2025-06-01T10:00:00Z", "go1.99", platform}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := readBuild(tc.ldVersion, tc.ldCommit, tc.ldDate, tc.bi)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readBuild() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	want := currentBuild().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || out != want {
			t.Errorf("instore %v = exit %d, %q (stderr %q); want exit 0, %q", args, code, out, errs, want)
		}
	}
	out, errs, code := runCmd(t, "version", "--json")
	if code != 0 {
		t.Fatalf("instore version --json = exit %d: %s", code, errs)
	}
	var got build
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("instore version --json printed %q: %v", out, err)
	}
	if diff := cmp.Diff(currentBuild(), got); diff != "" {
		t.Errorf("instore version --json mismatch (-want +got):\n%s", diff)
	}
}

// TestBinaryVersionLdflags builds the binary as a release does, with the
// version, commit and date given by -ldflags -X, and checks that it exits
// 2 on wrong usage.
func TestBinaryVersionLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t, "-ldflags", "-X main.version=v9.8.7 -X main.commit=c0ffee1234 -X main.date=2025-05-04T03:02:01Z")
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("instore %s: %v", arg, err)
		}
		want := "instore v9.8.7 (commit c0ffee1234, built 2025-05-04T03:02:01Z, "
		if got := string(out); !strings.HasPrefix(got, want) {
			t.Errorf("instore %s = %q, want it to start with %q", arg, got, want)
		}
	}
	// main exits with run's code: wrong usage is 2.
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "bogus")
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "Run 'instore --help' for usage.") {
		t.Errorf("instore bogus = %v, stderr %q; want exit status 2 and the usage hint", err, stderr.String())
	}
}

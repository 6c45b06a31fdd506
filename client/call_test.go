package client

import (
	"runtime/debug"
	"testing"
)

// TestModuleVersion reads the SDK's version from build information as the
// go command records it for a program that depends on the module, one
// that replaces it, and one built inside the module.
func TestModuleVersion(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/till", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/term", Version: "v0.30.0"}, {Path: path, Version: version, Replace: replace}}}
	}
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"a dependency", dep(modulePath, "v1.4.2", nil), true, "v1.4.2"},
		{"a pseudo-version", dep(modulePath, "v0.0.0-20260101120000-0123456789ab", nil), true, "v0.0.0-20260101120000-0123456789ab"},
		{"replaced by a version", dep(modulePath, "v1.4.2", &debug.Module{Path: "example.com/fork", Version: "v1.4.3"}), true, "v1.4.3"},
		{"replaced by a directory", dep(modulePath, "v1.4.2", &debug.Module{Path: "../instore"}), true, "v1.4.2"},
		{"the main module, stamped", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.5.0"}}, true, "v1.5.0"},
		{"the main module, go test", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true, "devel"},
		{"another module only", dep("example.com/other", "v1.0.0", nil), true, "devel"},
		{"no build information", nil, false, "devel"},
	}
	for _, tc := range cases {
		if got := moduleVersion(tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s: moduleVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestUserAgent(t *testing.T) {
	for program, want := range map[string]string{
		"":                "instore-go/" + Version,
		"till/2.1":        "till/2.1 instore-go/" + Version,
		" instore-ecr/1 ": "instore-ecr/1 instore-go/" + Version,
	} {
		if got := userAgent(program); got != want {
			t.Errorf("userAgent(%q) = %q, want %q", program, got, want)
		}
	}
}

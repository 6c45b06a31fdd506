package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAdminPackagesListPrintsIntegers imports a catalogue into a real
// store and lists it for a person: sizes are printed as the integers they
// are, never in float notation.
func TestAdminPackagesListPrintsIntegers(t *testing.T) {
	dir := t.TempDir()
	catalogue := filepath.Join(t.TempDir(), "packages.json")
	must(t, os.WriteFile(catalogue, []byte(`{"packages": [
  {"packageId": "countertop-1.2.0", "model": "countertop", "name": "Countertop payment application", "version": "1.2.0",
   "sizeBytes": 50331648, "sha256": "2ef7c7926a0d8d72bd75d83db2c0cd53bacfbe34b11536101ca35b9ce4f8f7c4", "releasedAt": "2026-02-02T08:00:00Z"},
  {"packageId": "countertop-1.3.0", "model": "countertop", "name": "Countertop payment application", "version": "1.3.0", "mandatory": true,
   "sizeBytes": 1099511627776, "sha256": "3ef7c7926a0d8d72bd75d83db2c0cd53bacfbe34b11536101ca35b9ce4f8f7c4", "releasedAt": "2026-03-02T08:00:00Z"}
]}`), 0o600))
	if _, errs, code := runCmd(t, "admin", "--data", dir, "packages", "import", catalogue); code != 0 {
		t.Fatalf("packages import = exit %d: %s", code, errs)
	}
	out, errs, code := runCmd(t, "admin", "--data", dir, "packages", "list", "--model", "countertop")
	if code != 0 {
		t.Fatalf("packages list = exit %d: %s", code, errs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^sizeBytes\s+50331648$`),
		regexp.MustCompile(`(?m)^sizeBytes\s+1099511627776$`),
		regexp.MustCompile(`(?m)^mandatory\s+true$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("packages list output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "e+") {
		t.Errorf("packages list prints a number in float notation:\n%s", out)
	}
}

package server_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportDirections keeps the packages' dependencies pointing one way:
// the domain imports nothing of the project, the API surfaces share
// plumbing through httpapi and not each other.
func TestImportDirections(t *testing.T) {
	const mod = "github.com/instore-dev/instore"
	forbidden := map[string][]string{
		"../..":        {mod + "/internal/", mod + "/client", mod + "/cmd/"}, // the domain: standard library only
		"../accessapi": {mod + "/internal/onlineapi", mod + "/internal/sandbox", mod + "/internal/sim"},
		"../onlineapi": {mod + "/internal/accessapi", mod + "/internal/sim", mod + "/internal/sandbox"},
		"../httpapi":   {mod + "/internal/onlineapi", mod + "/internal/accessapi", mod + "/internal/sandbox"},
		"../sandbox":   {mod + "/internal/onlineapi", mod + "/internal/accessapi", mod + "/internal/server"},
		"../../client": {mod + "/internal/"},
		"../sqlstore":  {mod + "/internal/onlineapi", mod + "/internal/accessapi", mod + "/internal/gateway"},
		"../gateway":   {mod + "/internal/onlineapi", mod + "/internal/accessapi", mod + "/internal/sqlstore"},
	}
	for dir, bad := range forbidden {
		abs, err := filepath.Abs(dir)
		must(t, err)
		p, err := build.ImportDir(abs, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range p.Imports {
			if slices.ContainsFunc(bad, func(b string) bool { return imp == b || strings.HasSuffix(b, "/") && strings.HasPrefix(imp, b) }) {
				t.Errorf("%s (%s) imports %s", dir, p.ImportPath, imp)
			}
		}
	}
}

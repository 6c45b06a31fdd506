package instore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The module's import directions, read from the source (non-test files):
// the root package is the contract and does no I/O; the lifecycles
// (lifecycle/) depend on the contract alone; the application
// (internal/service) depends on them, never on an adapter.

const module = "github.com/instore-dev/instore"

// rootRefused are the standard packages the root may not import: they
// reach the network, the file system, the process, a database, the
// kernel's randomness, a log or loaded code. Below net, only net/netip and
// net/url (parsing) are allowed; embed (the code lists, compiled in) is.
var rootRefused = []string{"net", "database/sql", "os", "syscall", "io/ioutil", "io/fs", "plugin",
	"crypto/rand", "log", "runtime", "unsafe"}

// rootAllowedBelow are the packages below a refused one that parse and
// reach nothing.
var rootAllowedBelow = map[string]bool{"net/netip": true, "net/url": true}

// goroutineStarters are the calls of the standard library that start a
// goroutine or a timer's: the root makes none.
var goroutineStarters = map[string]bool{"time.AfterFunc": true, "time.NewTimer": true, "time.NewTicker": true,
	"time.Tick": true, "time.After": true}

// serviceRefused are the adapters: they call the service, not the reverse.
var serviceRefused = []string{"internal/httpapi", "internal/onlineapi", "internal/accessapi", "internal/sqlstore",
	"internal/gateway", "internal/server", "internal/sandbox", "internal/cluster", "internal/webhook",
	"internal/admin", "internal/protocol", "internal/metrics"}

var fset = token.NewFileSet()

// sources parses the non-test Go files of dir (relative to the root).
func sources(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// checkSources fails t for every import of the Go files of dir that refusal
// refuses and, unless noGoroutine is "", for every goroutine they start,
// saying noGoroutine.
func checkSources(t *testing.T, dir string, refusal func(path string) string, noGoroutine string) {
	t.Helper()
	for name, f := range sources(t, dir) {
		for _, p := range importsOf(f) {
			if why := refusal(p); why != "" {
				t.Errorf("%s imports %s, which %s", name, p, why)
			}
		}
		if noGoroutine == "" {
			continue
		}
		for _, at := range startsGoroutines(f) {
			t.Errorf("%s: %s", at, noGoroutine)
		}
	}
}

func importsOf(f *ast.File) []string {
	var out []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		out = append(out, p)
	}
	return out
}

// rootRefusal says why a file of the root may not import path ("" if it
// may).
func rootRefusal(path string) string {
	for _, r := range rootRefused {
		if path == r || strings.HasPrefix(path, r+"/") && !rootAllowedBelow[path] {
			return "does I/O"
		}
	}
	if strings.Contains(strings.Split(path, "/")[0], ".") {
		return "is not the standard library (the root depends on nothing)"
	}
	return ""
}

// serviceRefusal says why a file of internal/service may not import path
// ("" if it may).
func serviceRefusal(path string) string {
	for _, r := range serviceRefused {
		if path == module+"/"+r || strings.HasPrefix(path, module+"/"+r+"/") {
			return "is an adapter"
		}
	}
	return ""
}

func TestImportRules(t *testing.T) {
	for _, tc := range []struct {
		path string
		want string
	}{
		{"net/http", "does I/O"}, {"net/http/httptest", "does I/O"}, {"database/sql", "does I/O"},
		{"os", "does I/O"}, {"log/slog", "does I/O"}, {"net", "does I/O"},
		{"net/rpc", "does I/O"}, {"net/smtp", "does I/O"}, {"io/ioutil", "does I/O"}, {"plugin", "does I/O"},
		{"os/exec", "does I/O"}, {"log/slog", "does I/O"}, {"runtime/debug", "does I/O"},
		{"net/netip", ""}, {"net/url", ""}, {"time", ""}, {"embed", ""}, {"encoding/json", ""},
		{module + "/internal/service", "is not the standard library (the root depends on nothing)"},
		{"github.com/google/uuid", "is not the standard library (the root depends on nothing)"},
	} {
		if got := rootRefusal(tc.path); got != tc.want {
			t.Errorf("rootRefusal(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{module + "/internal/onlineapi", "is an adapter"}, {module + "/internal/sqlstore", "is an adapter"},
		{module + "/internal/httpapi", "is an adapter"}, {module, ""}, {"context", ""},
		{module + "/internal/servicex", ""},
	} {
		if got := serviceRefusal(tc.path); got != tc.want {
			t.Errorf("serviceRefusal(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestRootIsTheContract: the root package imports nothing that does I/O,
// nothing outside the standard library (none of the module's internal
// packages), and starts no goroutine.
func TestRootIsTheContract(t *testing.T) {
	checkSources(t, ".", rootRefusal, "the root starts no goroutine")
}

// TestServiceImportsNoAdapter: the application (internal/service) imports
// no adapter: they call it, not the reverse.
func TestServiceImportsNoAdapter(t *testing.T) {
	checkSources(t, filepath.Join("internal", "service"), serviceRefusal, "")
}

// lifecycleRefusal says why a file of lifecycle/ may not import path ("" if
// it may): the lifecycles are pure, on the contract alone.
func lifecycleRefusal(path string) string {
	if path == module {
		return ""
	}
	return rootRefusal(path)
}

// TestLifecycleImportsOnlyTheRoot: the lifecycles (lifecycle/) import the
// root and the standard library only, nothing that does I/O, and start no
// goroutine.
func TestLifecycleImportsOnlyTheRoot(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{module, ""}, {"time", ""}, {"fmt", ""},
		{module + "/internal/service", "is not the standard library (the root depends on nothing)"},
		{"net/http", "does I/O"},
	} {
		if got := lifecycleRefusal(tc.path); got != tc.want {
			t.Errorf("lifecycleRefusal(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	checkSources(t, "lifecycle", lifecycleRefusal, "a lifecycle starts no goroutine")
}

// startsGoroutines lists where f starts a goroutine: a go statement, or a
// call of the standard library that starts one (goroutineStarters).
func startsGoroutines(f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, fset.Position(n.Pos()).String()+": a go statement")
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && goroutineStarters[id.Name+"."+n.Sel.Name] {
				out = append(out, fset.Position(n.Pos()).String()+": "+id.Name+"."+n.Sel.Name)
			}
		}
		return true
	})
	return out
}

func TestStartsGoroutines(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"package p\nfunc f() { go f() }", 1},
		{"package p\nimport \"time\"\nfunc f() { time.AfterFunc(0, f) }", 1},
		{"package p\nimport \"time\"\nvar _ = time.NewTicker", 1},
		{"package p\nimport \"time\"\nfunc f() time.Time { return time.Now() }", 0},
	} {
		f, err := parser.ParseFile(fset, "x.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := startsGoroutines(f); len(got) != tc.want {
			t.Errorf("startsGoroutines(%q) = %v, want %d", tc.src, got, tc.want)
		}
	}
}

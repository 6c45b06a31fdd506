package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// saveProfile saves a profile of the server from its ops listener
// (started with --pprof): "cpu" over seconds, "heap" (after a GC) or
// "goroutine" (what every goroutine waits on now, as text), as
// ProfileDir/SCENARIO-BACKEND-KIND.pprof.
func (e *env) saveProfile(ctx context.Context, kind string, seconds int) {
	if e.o.ProfileDir == "" || e.srv == nil || e.srv.ops == "" {
		return
	}
	path := "/debug/pprof/heap?gc=1"
	switch kind {
	case "cpu":
		path = fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(seconds, 1))
	case "goroutine":
		path = "/debug/pprof/goroutine?debug=1" // text: the stacks by count
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.ops+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.logf("profile %s: %v", kind, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		e.logf("profile %s: %s (is the server started with --pprof?)", kind, resp.Status)
		return
	}
	name := e.scenario + "-" + e.backend
	if e.backend == "sqlite" {
		name += "-" + strings.ToLower(e.o.Synchronous)
	}
	if err := os.MkdirAll(e.o.ProfileDir, 0o755); err != nil {
		e.logf("profile: %v", err)
		return
	}
	file := filepath.Join(e.o.ProfileDir, name+"-"+kind+".pprof")
	f, err := os.Create(file)
	if err != nil {
		e.logf("profile: %v", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		e.logf("profile: %v", err)
		return
	}
	e.logf("saved %s", file)
}

// profileCPU saves a CPU profile of the next seconds (with ProfileDir) in
// the background; the returned func waits for it.
func (e *env) profileCPU(ctx context.Context, seconds int) (wait func()) {
	if e.o.ProfileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.saveProfile(ctx, "cpu", seconds)
	}()
	time.Sleep(50 * time.Millisecond) // the profile is on before the work starts
	return func() { <-done }
}

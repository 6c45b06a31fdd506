package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// procStats is what the load tool reads of a process: its resident memory
// and the CPU time it used so far.
type procStats struct {
	RSS int64         // bytes (VmRSS)
	HWM int64         // bytes (VmHWM: the peak RSS)
	CPU time.Duration // user + system
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// readProc reads /proc/PID/status and /proc/PID/stat (pid 0: this
// process).
func readProc(pid int) (procStats, error) {
	dir := "/proc/self"
	if pid > 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	var s procStats
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		for _, f := range []struct {
			name string
			dst  *int64
		}{{"VmRSS:", &s.RSS}, {"VmHWM:", &s.HWM}} {
			if rest, ok := strings.CutPrefix(line, f.name); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return s, fmt.Errorf("%s/status: %s: %w", dir, f.name, err)
				}
				*f.dst = kb << 10
			}
		}
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces; fields start after ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("%s/stat: unexpected format", dir)
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return s, fmt.Errorf("%s/stat: too few fields", dir)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("%s/stat: bad utime or stime", dir)
	}
	s.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	return s, nil
}

// processCPU sums the CPU time of every process whose command name is
// comm ("postgres": the database server and its backends, when it runs on
// this machine), so that the store's own CPU shows beside the server's.
func processCPU(comm string) (cpuSnapshot, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	snap := cpuSnapshot{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil || !bytes.Contains(stat, []byte("("+comm+")")) {
			continue
		}
		if s, err := readProc(pid); err == nil {
			snap[pid] = s.CPU
		}
	}
	if len(snap) == 0 {
		return nil, fmt.Errorf("no %s process", comm)
	}
	return snap, nil
}

// cpuSnapshot is the CPU time of each process of a kind, by pid.
type cpuSnapshot map[int]time.Duration

// since is the CPU the processes of s used after before: each one's growth
// (from zero if it started since). A process that ended in between is left
// out, so that a connection closing never makes the figure negative; the
// figure is then a lower bound.
func (s cpuSnapshot) since(before cpuSnapshot) time.Duration {
	var total time.Duration
	for pid, cpu := range s {
		if d := cpu - before[pid]; d > 0 {
			total += d
		}
	}
	return total
}

// readMetrics reads a running instore's RSS and CPU from its ops listener
// (the Prometheus process collector), for a --target server whose process
// is not ours.
func readMetrics(ctx context.Context, opsURL string) (procStats, error) {
	m, err := scrapeMetrics(ctx, opsURL)
	if err != nil {
		return procStats{}, err
	}
	rss, ok1 := m["process_resident_memory_bytes"]
	cpu, ok2 := m["process_cpu_seconds_total"]
	if !ok1 || !ok2 {
		return procStats{}, fmt.Errorf("GET /metrics: no process_resident_memory_bytes or process_cpu_seconds_total")
	}
	return procStats{RSS: int64(rss), HWM: int64(rss), CPU: time.Duration(cpu * float64(time.Second))}, nil
}

// scrapeMetrics reads the unlabelled samples of an instore's /metrics.
func scrapeMetrics(ctx context.Context, opsURL string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", opsURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			m[name] = v
		}
	}
	return m, nil
}

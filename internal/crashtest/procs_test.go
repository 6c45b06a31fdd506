package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/instore-dev/instore/internal/testwait"
)

// buildInstore builds the instore binary into dir.
func buildInstore(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "instore")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/instore-dev/instore/cmd/instore").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is a child process this test started: the only kind it kills.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string // its stderr (and stdout unless captured)
	done chan struct{}
}

// startProc starts bin with args and extra environment; stdout, when not
// nil, receives the standard output instead of the log file.
func startProc(name, bin string, args, env []string, logPath string, stdout io.Writer) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(name, cmd, logPath, stdout)
}

// startCmd is startProc of a command built by the caller (another user's,
// for one).
func startCmd(name string, cmd *exec.Cmd, logPath string, stdout io.Writer) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logTail is the end of the process's log, for a failure message.
func (p *proc) logTail(lines int) string {
	b, _ := os.ReadFile(p.log)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// warnings returns up to n of the server's log lines at level WARN or
// ERROR since its last start (the lines are redacted by the server).
func (s *server) warnings(n int) string {
	if s.p == nil {
		return ""
	}
	b, _ := os.ReadFile(s.p.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// freePorts returns n free TCP ports of the loopback interface.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// server is `instore serve`, started again on the same ports and data after
// every kill.
type server struct {
	bin, dir string
	args     []string
	env      []string
	ports    []int // online, access, terminal, ops
	starts   int
	p        *proc
	upSince  time.Time
}

func (s *server) online() string { return fmt.Sprintf("http://127.0.0.1:%d", s.ports[0]) }
func (s *server) terminal() string {
	return fmt.Sprintf("ws://127.0.0.1:%d/terminal/v1/connect", s.ports[2])
}
func (s *server) ops() string { return fmt.Sprintf("http://127.0.0.1:%d", s.ports[3]) }

// start runs the server and waits until it is ready (/readyz).
func (s *server) start(ctx context.Context) error {
	s.starts++
	args := append([]string{"serve",
		"--listen-online", fmt.Sprintf("127.0.0.1:%d", s.ports[0]), "--listen-access", fmt.Sprintf("127.0.0.1:%d", s.ports[1]),
		"--listen-terminal", fmt.Sprintf("127.0.0.1:%d", s.ports[2]), "--listen-ops", fmt.Sprintf("127.0.0.1:%d", s.ports[3]),
	}, s.args...)
	p, err := startProc("server", s.bin, args, s.env, filepath.Join(s.dir, fmt.Sprintf("server-%02d.log", s.starts)), nil)
	if err != nil {
		return err
	}
	s.p = p
	ready := false
	testwait.Until(testwait.Timeout, func() bool {
		if p.exited() || ctx.Err() != nil {
			return true
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", s.ops()+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
		return ready
	})
	switch {
	case ready:
		s.upSince = time.Now()
		return nil
	case p.exited():
		return fmt.Errorf("the server exited at start:\n%s", p.logTail(20))
	default:
		p.kill()
		return fmt.Errorf("the server was not ready within %v:\n%s", testwait.Timeout, p.logTail(20))
	}
}

// kill9 kills the server with SIGKILL.
func (s *server) kill9() { s.p.kill() }

// freeze stops the server (SIGSTOP): it runs no more code until killed.
func (s *server) freeze() error { return s.p.cmd.Process.Signal(syscall.SIGSTOP) }

// terminalProc is `instore terminal`: a virtual terminal in its own process,
// which reconnects by itself after the server dies.
type terminalProc struct {
	p    *proc
	code chan string // the link code, once shown
}

var linkCodeLine = regexp.MustCompile(`Link code ([0-9]{6})`)

// startTerminal starts `instore terminal` for a provisioned device that
// takes delay to read a card.
func startTerminal(bin, dir, gateway, serial, secret string, delay time.Duration) (*terminalProc, error) {
	tp := &terminalProc{code: make(chan string, 1)}
	pr, pw := io.Pipe()
	args := []string{"terminal", "--gateway", gateway, "--serial", serial, "--model", "countertop",
		"--delay", delay.String(), "--reconnect-max", "1s", "--log-format", "json"}
	p, err := startProc("terminal "+serial, bin, args, []string{"INSTORE_DEVICE_SECRET=" + secret}, filepath.Join(dir, serial+".log"), pw)
	if err != nil {
		return nil, err
	}
	tp.p = p
	go func() {
		<-p.done
		pw.Close()
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := linkCodeLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case tp.code <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return tp, nil
}

// linkCode waits for the code the terminal shows while unlinked.
func (tp *terminalProc) linkCode(ctx context.Context) (string, error) {
	return awaitLinkCode(ctx, tp.code)
}

// awaitLinkCode waits for a terminal's link code on codes, 15 s at most.
func awaitLinkCode(ctx context.Context, codes <-chan string) (string, error) {
	select {
	case c := <-codes:
		return c, nil
	case <-time.After(15 * time.Second):
		return "", errors.New("no link code within 15 s")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

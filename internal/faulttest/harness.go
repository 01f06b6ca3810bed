package faulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binaries builds the harness's programs once per test binary and returns
// the directory holding them: ledgerworker and nats-server (from the
// pinned module). Call Cleanup from TestMain.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "toolwire-faulttest-")
		if buildErr != nil {
			return
		}
		for name, pkg := range map[string]string{
			"ledgerworker": "github.com/toolwire/toolwire/internal/faulttest/ledgerworker",
			"nats-server":  "github.com/nats-io/nats-server/v2",
		} {
			cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", filepath.Join(binDir, name), pkg)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("faulttest: %v", buildErr)
	}
	return binDir
}

// Cleanup removes the built binaries.
func Cleanup() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Proc is a running child process.
type Proc struct {
	Cmd  *exec.Cmd
	Name string
	out  *syncBuffer
	done chan struct{}
	err  error
}

// Start runs bin with args; the process is killed when the test ends.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	return StartEnv(t, name, nil, bin, args...)
}

// StartEnv is Start with extra environment variables ("K=V").
func StartEnv(t testing.TB, name string, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.out, p.out
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("faulttest: start %s: %v", name, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	nameFailure(t)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of %s%s", name, failedOutput(t, name, p.out.String()))
		}
	})
	return p
}

// failedTail is how many of a process's last lines a failed test logs;
// the whole output goes to a file. A CI log keeps only its tail, and the
// whole output of three nats-servers buried the test's name and its error.
const failedTail = 25

// failedOutput writes out to a file named after the test and the process
// and returns its last lines, saying where the rest is.
func failedOutput(t testing.TB, name, out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) <= failedTail {
		return ":\n" + strings.Join(lines, "\n")
	}
	where := "not kept"
	dir := filepath.Join(os.TempDir(), "toolwire-faulttest-output", strings.ReplaceAll(t.Name(), "/", "_"))
	file := filepath.Join(dir, name+".log")
	if err := os.MkdirAll(dir, 0o755); err == nil && os.WriteFile(file, []byte(out), 0o644) == nil {
		where = file
	}
	return fmt.Sprintf(" (last %d of %d lines; all in %s):\n%s", failedTail, len(lines), where,
		strings.Join(lines[len(lines)-failedTail:], "\n"))
}

var named sync.Map // testing.TB → struct{}: nameFailure registered

// nameFailure makes a failed test name itself after the output of its
// processes (cleanups run last-registered first, so this one, registered
// before the first process's, runs after all of them).
func nameFailure(t testing.TB) {
	if _, done := named.LoadOrStore(t, struct{}{}); done {
		return
	}
	t.Cleanup(func() {
		named.Delete(t)
		if t.Failed() {
			t.Logf("faulttest: %s FAILED; its errors are above its processes' output", t.Name())
		}
	})
}

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to d for the process to exit and returns its exit code
// (-1 when killed by a signal); it fails the test on timeout.
func (p *Proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("faulttest: %s did not exit within %s", p.Name, d)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Output is what the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Entry is one ledger line.
type Entry struct {
	CallID  string `json:"call_id"`
	Attempt int32  `json:"attempt"`
	PID     int    `json:"pid"`
	Phase   string `json:"phase"`
	Text    string `json:"text"`
	// At is when the entry was written (Unix nanoseconds).
	At int64 `json:"at"`
}

// ReadLedger reads every entry of a ledger file.
func ReadLedger(t testing.TB, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("faulttest: ledger: %v", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("faulttest: ledger line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// Executions counts "start" entries per call id.
func Executions(entries []Entry) map[string]int {
	m := map[string]int{}
	for _, e := range entries {
		if e.Phase == "start" {
			m[e.CallID]++
		}
	}
	return m
}

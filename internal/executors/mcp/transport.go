package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioProcess is the child process of a stdio server, for killing its
// process group.
type stdioProcess struct {
	cmd *exec.Cmd
}

// killGroup sends SIGKILL to the process group of the server (its pid, as
// it was started with Setpgid), reaching grandchildren the server started.
// The group id stays reserved while any member lives, so the signal
// cannot reach an unrelated process while there is something to kill.
func (p *stdioProcess) killGroup() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// stdioEnv is the environment of a stdio server: the allowlisted variables
// of the worker's environment, then the fixed ones.
func stdioEnv(c *StdioConfig) []string {
	env := map[string]string{}
	for _, n := range c.Env {
		if v, ok := os.LookupEnv(n); ok {
			env[n] = v
		}
	}
	maps.Copy(env, c.SetEnv)
	out := make([]string, 0, len(env))
	for _, n := range slices.Sorted(maps.Keys(env)) {
		out = append(out, n+"="+env[n])
	}
	return out
}

// newStdioTransport returns the transport of one start of a stdio server.
// Its stderr is logged line by line at Debug.
func newStdioTransport(s ServerConfig, terminate time.Duration, log *slog.Logger) (*sdk.CommandTransport, *stdioProcess) {
	c := s.Stdio
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env = stdioEnv(c)
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the worker's environment
	}
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &lineLogger{log: log}
	// A grandchild holding stderr open must not hold Wait forever.
	cmd.WaitDelay = terminate
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: terminate}, &stdioProcess{cmd: cmd}
}

// lineLogger logs what a server writes to stderr, one record a line.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Debug("server stderr", "line", string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a server writing without newlines
		l.log.Debug("server stderr", "line", string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*lineLogger)(nil)

// newHTTPTransport returns the transport of one connection to a streamable
// HTTP server, its messages seen by capture. Secret headers are resolved
// now, so a rotated file or variable takes effect at the next connection.
func newHTTPTransport(s ServerConfig, capture *rawCapture) (*sdk.StreamableClientTransport, error) {
	h := make(http.Header, len(s.HTTP.Headers)+len(s.HTTP.SecretHeaders))
	for k, v := range s.HTTP.Headers {
		h.Set(k, v)
	}
	for k, ref := range s.HTTP.SecretHeaders {
		r, err := parseSecretRef(ref)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		v, err := r.resolve()
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		h.Set(k, v)
	}
	client := &http.Client{Transport: &headerTransport{base: http.DefaultTransport, header: h, capture: capture}}
	return &sdk.StreamableClientTransport{Endpoint: s.HTTP.URL, HTTPClient: client, MaxRetries: 2}, nil
}

// headerTransport adds fixed headers to every request, and shows the
// messages to capture (captureRoundTrip).
type headerTransport struct {
	base    http.RoundTripper
	header  http.Header
	capture *rawCapture
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) == 0 {
		return captureRoundTrip(t.capture, t.base, req)
	}
	r := req.Clone(req.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return captureRoundTrip(t.capture, t.base, r)
}

// errNoSession is the cause of calls that found their server down.
var errNoSession = errors.New("no session")

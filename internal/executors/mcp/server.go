package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// server holds the one session to one configured MCP server and keeps it
// up: it connects, imports the tools, follows tools/list_changed, and
// reconnects (restarting a stdio server) with backoff when the session
// ends.
type server struct {
	e      *Executor
	cfg    ServerConfig
	log    *slog.Logger
	client *sdk.Client

	// listChanged is signalled by the notification handler; the run loop
	// lists the tools again (never on the SDK's receiving goroutine).
	listChanged chan struct{}

	// first is closed after the first connection attempt; firstErr is its
	// outcome.
	first    chan struct{}
	firstErr error

	mu sync.Mutex
	// capture sees the messages of the current connection (rawCapture);
	// listed is what the tools/list results of the discovery under way
	// said that the SDK's Tool type drops (by MCP tool name).
	capture *rawCapture
	listed  map[string]listedTool
	sess    *sdk.ClientSession
	// up is closed while sess is set and replaced by an open channel when
	// the session ends, so calls can wait for the next one; down is closed
	// when sess ends.
	up, down chan struct{}
	proc     *stdioProcess

	// pool holds the sessions of calls when cfg.Sessions is not "shared";
	// nil otherwise (calls use sess).
	pool *sessionPool
}

func newServer(e *Executor, cfg ServerConfig) *server {
	s := &server{
		e:           e,
		cfg:         cfg,
		log:         e.log.With("server", cfg.Name),
		listChanged: make(chan struct{}, 1),
		first:       make(chan struct{}),
		up:          make(chan struct{}),
	}
	if cfg.Sessions != SessionsShared {
		s.pool = newSessionPool(s)
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "toolwire", Version: "1"}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: a worker has no user or model
		// to ask.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) {
			if s.pool != nil {
				s.pool.toolsChanged(req.Session)
			}
			s.relist()
		},
		ProgressNotificationHandler: e.onProgress,
	})
	return s
}

// relist has the discovery session list the tools again.
func (s *server) relist() {
	select {
	case s.listChanged <- struct{}{}:
	default:
	}
}

// run keeps the server connected until ctx ends.
func (s *server) run(ctx context.Context) {
	defer s.e.wg.Done()
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(time.Duration(s.e.cfg.MinBackoff)),
		backoff.WithMaxInterval(time.Duration(s.e.cfg.MaxBackoff)),
		backoff.WithMaxElapsedTime(0),
	)
	firstAttempt := true
	for {
		started := time.Now()
		served, err := s.serve(ctx, firstAttempt)
		firstAttempt = false
		if ctx.Err() != nil {
			return
		}
		if served && time.Since(started) > time.Duration(s.e.cfg.MaxBackoff) {
			b.Reset() // a session that lived long is not a crash loop
		}
		delay := b.NextBackOff()
		s.log.WarnContext(ctx, "MCP server session ended; reconnecting", "error", err, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// serve makes one connection, imports the tools and serves the session
// until it ends or ctx does. served reports whether a session came up.
func (s *server) serve(ctx context.Context, firstAttempt bool) (served bool, err error) {
	sess, proc, err := s.connect(ctx)
	if firstAttempt {
		s.firstErr = err
		close(s.first)
	}
	if err != nil {
		return false, err
	}
	down := make(chan struct{})
	s.mu.Lock()
	s.sess, s.proc, s.down = sess, proc, down
	close(s.up)
	s.mu.Unlock()
	s.log.InfoContext(ctx, "MCP server connected")

	done := make(chan struct{})
	go func() { _ = sess.Wait(); close(done) }()
	defer func() {
		s.mu.Lock()
		s.sess = nil
		s.up = make(chan struct{})
		s.mu.Unlock()
		close(down)
		_ = sess.Close()
		proc.killGroup()
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		<-done
	}()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-done:
			return true, errors.New("connection lost")
		case <-s.listChanged:
			lctx, cancel := context.WithTimeout(ctx, time.Duration(s.e.cfg.ConnectTimeout))
			err := s.discover(lctx, sess)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "listing tools after tools/list_changed", "error", err)
			}
		}
	}
}

// connect starts or dials the server, initializes a session and imports
// its tools, within Config.ConnectTimeout.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, *stdioProcess, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.e.cfg.ConnectTimeout))
	defer cancel()
	capture := newRawCapture(s.onToolsList, s.e.onCallResult)
	s.mu.Lock()
	s.capture = capture
	s.mu.Unlock()
	sess, proc, err := s.open(ctx, capture)
	if err != nil {
		return nil, nil, err
	}
	if err := s.discover(ctx, sess); err != nil {
		_ = sess.Close()
		proc.killGroup()
		return nil, nil, err
	}
	return sess, proc, nil
}

// open starts or dials the server and initializes a session whose
// messages capture sees. ctx bounds the attempt.
func (s *server) open(ctx context.Context, capture *rawCapture) (*sdk.ClientSession, *stdioProcess, error) {
	var (
		t    sdk.Transport
		proc *stdioProcess
	)
	if s.cfg.Stdio != nil {
		var ct *sdk.CommandTransport
		ct, proc = newStdioTransport(s.cfg, time.Duration(s.e.cfg.TerminateDuration), s.log)
		t = captureTransport{Transport: ct, capture: capture}
	} else {
		ht, err := newHTTPTransport(s.cfg, capture)
		if err != nil {
			return nil, nil, err
		}
		t = ht
	}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		proc.killGroup()
		if proc != nil && proc.cmd.Process != nil {
			_ = proc.cmd.Wait()
		}
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return sess, proc, nil
}

// discover lists the server's tools and reconciles the executor's.
func (s *server) discover(ctx context.Context, sess *sdk.ClientSession) error {
	s.mu.Lock()
	s.listed = map[string]listedTool{}
	s.mu.Unlock()
	var tools []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	s.mu.Lock()
	listed := s.listed
	s.listed = nil
	s.mu.Unlock()
	return s.e.reconcile(ctx, s, tools, listed)
}

// listedTool is what a tools/list result says of a tool that the SDK's
// Tool type drops.
type listedTool struct {
	// TaskSupport is the tool's execution.taskSupport: "forbidden",
	// "optional", "required" or empty.
	TaskSupport string
}

// onToolsList records the fields of a tools/list result (one page) that
// the SDK drops, for the discovery under way.
func (s *server) onToolsList(raw json.RawMessage) {
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		s.log.Debug("tools/list result not read for its execution fields", "error", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed == nil {
		return // not listed by discover
	}
	for _, t := range res.Tools {
		if t.Execution != nil {
			s.listed[t.Name] = listedTool{TaskSupport: t.Execution.TaskSupport}
		}
	}
}

// forget drops what the current connection keeps for the call with
// progress token.
func (s *server) forget(token string) {
	s.mu.Lock()
	c := s.capture
	s.mu.Unlock()
	c.forget(token)
}

// session returns the current session other than stale, waiting up to
// wait for one.
func (s *server) session(ctx context.Context, wait time.Duration, stale *sdk.ClientSession) (*sdk.ClientSession, error) {
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		sess, up, down := s.sess, s.up, s.down
		s.mu.Unlock()
		if sess != nil && sess != stale {
			return sess, nil
		}
		if sess != nil { // stale and not yet cleared: wait until it is
			up = down
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("%w after %s", errNoSession, wait)
		case <-s.e.ctx.Done():
			return nil, errors.New("executor closed")
		}
	}
}

// killNow kills the process group of a stdio server at once (Close past
// its grace period).
func (s *server) killNow() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	p.killGroup()
}

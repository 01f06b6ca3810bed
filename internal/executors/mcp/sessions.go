package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// sessionKey names the callers that share an upstream session of a server
// whose ServerConfig.Sessions is not "shared": a tenant, and a caller
// session id under "per_session".
type sessionKey struct{ tenant, session string }

// keyOf returns the key of call under mode. Tenant and session are the
// Caller fields the dispatcher set, never anything of the arguments.
func keyOf(mode SessionMode, call *toolwirev1.ToolCall) sessionKey {
	k := sessionKey{tenant: call.GetCaller().GetTenant()}
	if mode == SessionsPerSession {
		k.session = call.GetCaller().GetSession() // empty: the tenant's
	}
	return k
}

// callSession is one upstream session of a pool.
type callSession struct {
	key     sessionKey
	capture *rawCapture
	// ready is closed once the connection attempt ended: sess, proc and
	// hashes are set, or err is.
	ready chan struct{}
	sess  *sdk.ClientSession
	proc  *stdioProcess
	// hashes maps the name of each tool this session lists to its
	// definition hash, checked against the discovery session's at each
	// call.
	hashes map[string]string
	err    error
	// stop is closed to close the session (idle, evicted, broken).
	stop     chan struct{}
	stopOnce sync.Once

	// Guarded by the pool's mu.
	inflight int
	lastUsed time.Time
	gone     bool // removed from the pool (closing, or closing once idle)
}

func (cs *callSession) close() { cs.stopOnce.Do(func() { close(cs.stop) }) }

// isReady reports whether the connection attempt ended.
func (cs *callSession) isReady() bool {
	select {
	case <-cs.ready:
		return true
	default:
		return false
	}
}

// waiter is a call waiting for room in the pool.
type waiter struct {
	key  sessionKey
	done chan struct{} // closed when cs or err is set
	cs   *callSession
	err  error
}

// sessionPool holds the caller sessions of one server: at most
// ServerConfig.MaxSessions alive (closing ones included), under
// "per_session" at most ServerConfig.MaxSessionsPerTenant of one tenant;
// each closed after ServerConfig.SessionIdle without a call, all closed
// when the executor closes. Calls that find no room wait in line.
type sessionPool struct {
	s *server

	mu    sync.Mutex
	byKey map[sessionKey]*callSession
	// live holds every session whose run has not ended, in the pool or
	// closing: the sessions counted against the caps, and killed by
	// killNow.
	live map[*callSession]struct{}
	// tenantLive and tenantClosing count the live and the closing
	// (gone) sessions of each tenant.
	tenantLive, tenantClosing map[string]int
	// waiters are the calls waiting for room, oldest first.
	waiters []*waiter
}

func newSessionPool(s *server) *sessionPool {
	return &sessionPool{s: s, byKey: map[sessionKey]*callSession{}, live: map[*callSession]struct{}{},
		tenantLive: map[string]int{}, tenantClosing: map[string]int{}}
}

// errPoolFull is the cause of calls refused because no room was made in
// the pool within Config.SessionWait.
var errPoolFull = errors.New("every upstream session of the server is busy")

// acquire returns the session of key, opening it when there is none, and
// counts the caller in until release. Without room in the pool the call
// waits in line (see serveLocked) up to Config.SessionWait, then fails
// with errPoolFull. ctx bounds the wait; the connection itself is bounded
// by Config.ConnectTimeout.
func (p *sessionPool) acquire(ctx context.Context, key sessionKey) (*callSession, error) {
	p.mu.Lock()
	cs := p.byKey[key]
	if cs != nil {
		cs.inflight++
		p.mu.Unlock()
	} else {
		w := &waiter{key: key, done: make(chan struct{})}
		p.waiters = append(p.waiters, w)
		p.serveLocked()
		p.mu.Unlock()
		var err error
		if cs, err = p.wait(ctx, w); err != nil {
			return nil, err
		}
	}
	select {
	case <-cs.ready:
	case <-ctx.Done():
		p.release(cs)
		return nil, ctx.Err()
	}
	if cs.err != nil {
		p.release(cs)
		return nil, cs.err
	}
	return cs, nil
}

// wait waits until w is served, ctx ends, the executor closes or
// Config.SessionWait passed.
func (p *sessionPool) wait(ctx context.Context, w *waiter) (*callSession, error) {
	timer := time.NewTimer(time.Duration(p.s.e.cfg.SessionWait))
	defer timer.Stop()
	var err error
	select {
	case <-w.done:
		return w.cs, w.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = errPoolFull
	case <-p.s.e.ctx.Done():
		err = errExecutorClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-w.done: // served meanwhile: the caller takes it
		return w.cs, w.err
	default:
	}
	p.waiters = slices.DeleteFunc(p.waiters, func(x *waiter) bool { return x == w })
	p.serveLocked()
	return nil, err
}

// errExecutorClosed fails calls that arrive while the executor closes.
var errExecutorClosed = errors.New("executor closed")

// serveLocked gives the waiters what room there is, oldest first: a
// waiter whose key got a session meanwhile joins it; one whose tenant is
// at MaxSessionsPerTenant (per_session) waits for a session of its
// tenant to close, closing its tenant's least recently used idle one
// when none is closing; otherwise a waiter gets a new session while
// fewer than MaxSessions are alive, waits for a closing session to end
// (one waiter per closing session), or has the least recently used idle
// session closed for it (its own tenant's first).
func (p *sessionPool) serveLocked() {
	closing := len(p.live) - len(p.byKey)
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if !p.tryLocked(w, &closing) {
			kept = append(kept, w)
			continue
		}
		close(w.done)
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
}

// tryLocked serves w if it can (see serveLocked) and reports whether it
// did. closing counts the closing sessions not yet promised to a waiter.
func (p *sessionPool) tryLocked(w *waiter, closing *int) bool {
	if cs := p.byKey[w.key]; cs != nil {
		cs.inflight++
		w.cs = cs
		return true
	}
	cfg := p.s.cfg
	if cfg.Sessions == SessionsPerSession && p.tenantLive[w.key.tenant] >= cfg.MaxSessionsPerTenant {
		if p.tenantClosing[w.key.tenant] == 0 {
			p.evictLocked(w.key.tenant, true)
		}
		return false
	}
	if len(p.live) < cfg.MaxSessions {
		w.cs, w.err = p.openLocked(w.key)
		return true
	}
	if *closing > 0 {
		*closing--
		return false
	}
	p.evictLocked(w.key.tenant, false)
	return false
}

// openLocked starts a session of key in the pool, counted in once.
func (p *sessionPool) openLocked(key sessionKey) (*callSession, error) {
	cs := &callSession{key: key, ready: make(chan struct{}), stop: make(chan struct{}), inflight: 1}
	cs.capture = newRawCapture(func(json.RawMessage) {}, p.s.e.onCallResult)
	if !p.s.e.goTracked(func() { p.run(cs) }) {
		return nil, errExecutorClosed
	}
	p.byKey[key] = cs
	p.live[cs] = struct{}{}
	p.tenantLive[key.tenant]++
	return cs, nil
}

// evictLocked closes the least recently used session of the pool without
// a call in flight, of tenant if there is one (only of tenant when own),
// and reports whether there was one.
func (p *sessionPool) evictLocked(tenant string, own bool) bool {
	var lru, lruOwn *callSession
	for _, cs := range p.byKey {
		if cs.inflight != 0 || !cs.isReady() {
			continue
		}
		if lru == nil || cs.lastUsed.Before(lru.lastUsed) {
			lru = cs
		}
		if cs.key.tenant == tenant && (lruOwn == nil || cs.lastUsed.Before(lruOwn.lastUsed)) {
			lruOwn = cs
		}
	}
	if lruOwn != nil || own {
		lru = lruOwn
	}
	if lru == nil {
		return false
	}
	p.s.log.Info("MCP caller session closed to make room", "tenant", lru.key.tenant,
		"for_tenant", tenant, "max_sessions", p.s.cfg.MaxSessions)
	p.removeLocked(lru)
	return true
}

// retireLocked takes cs out of the pool, so that the next call of its key
// opens another, and closes it once no call is in flight.
func (p *sessionPool) retireLocked(cs *callSession) {
	if !cs.gone {
		cs.gone = true
		delete(p.byKey, cs.key)
		p.tenantClosing[cs.key.tenant]++
	}
	if cs.inflight == 0 {
		cs.close()
	}
}

// removeLocked takes cs out of the pool and closes it.
func (p *sessionPool) removeLocked(cs *callSession) {
	p.retireLocked(cs)
	cs.close()
}

// release counts a caller of cs out.
func (p *sessionPool) release(cs *callSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs.inflight--
	cs.lastUsed = time.Now()
	if cs.gone && cs.inflight == 0 {
		cs.close()
	}
	p.serveLocked()
}

// discard drops cs from the pool (its connection is closing), so that the
// next acquire opens another.
func (p *sessionPool) discard(cs *callSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(cs)
}

// retire drops cs from the pool, closing it once its calls ended (its
// tools changed).
func (p *sessionPool) retire(cs *callSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retireLocked(cs)
}

// toolsChanged retires the caller session sess, which announced
// tools/list_changed: its tools are checked again on a new session.
func (p *sessionPool) toolsChanged(sess *sdk.ClientSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cs := range p.byKey {
		if cs.isReady() && cs.sess == sess {
			p.s.log.Info("MCP caller session closed: its tools changed", "tenant", cs.key.tenant)
			p.retireLocked(cs)
			return
		}
	}
}

// ended takes cs, whose run ended, out of the counts and gives its room
// to the waiters.
func (p *sessionPool) ended(cs *callSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, cs)
	t := cs.key.tenant
	if p.tenantLive[t]--; p.tenantLive[t] == 0 {
		delete(p.tenantLive, t)
	}
	if p.tenantClosing[t]--; p.tenantClosing[t] == 0 {
		delete(p.tenantClosing, t)
	}
	p.serveLocked()
}

// run opens the session of cs, lists its tools, and holds it until it is
// closed, its connection ends or the executor closes; then it closes the
// connection, kills a stdio server's process group and leaves the pool.
func (p *sessionPool) run(cs *callSession) {
	defer p.ended(cs)
	e := p.s.e
	ctx, cancel := context.WithTimeout(e.ctx, time.Duration(e.cfg.ConnectTimeout))
	sess, proc, err := p.s.open(ctx, cs.capture)
	if err == nil {
		if cs.hashes, err = toolHashes(ctx, sess); err != nil {
			_ = sess.Close()
			proc.killGroup()
		}
	}
	cancel()
	if err != nil {
		// The cause may name hosts, paths or a URL: the operator's log
		// has it, the calling agent a generic message.
		p.s.log.Warn("MCP caller session not opened", "tenant", cs.key.tenant, "error", err)
		cs.err = &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true, SideEffects: sideEffectsNone,
			Message: fmt.Sprintf("MCP server %s: an upstream session could not be opened", p.s.cfg.Name)}
		p.discard(cs)
		close(cs.ready)
		return
	}
	cs.sess, cs.proc = sess, proc
	p.s.log.Debug("MCP caller session opened", "tenant", cs.key.tenant)
	close(cs.ready)

	done := make(chan struct{})
	go func() { _ = sess.Wait(); close(done) }()
	select {
	case <-cs.stop:
	case <-done:
	case <-e.ctx.Done():
	}
	p.discard(cs)
	_ = sess.Close()
	proc.killGroup()
	<-done
	p.s.log.Debug("MCP caller session closed", "tenant", cs.key.tenant)
}

// toolHashes lists the tools of sess and returns their definition hashes
// by name (tools whose definition cannot be hashed are left out: they
// match no imported tool).
func toolHashes(ctx context.Context, sess *sdk.ClientSession) (map[string]string, error) {
	hashes := map[string]string{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if h, err := DefinitionHash(t); err == nil {
			hashes[t.Name] = h
		}
	}
	return hashes, nil
}

// reap closes the sessions idle for ServerConfig.SessionIdle, until the
// executor closes.
func (p *sessionPool) reap() {
	idle := time.Duration(p.s.cfg.SessionIdle)
	t := time.NewTicker(min(max(idle/4, 10*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-p.s.e.ctx.Done():
			return
		case now := <-t.C:
			p.mu.Lock()
			for _, cs := range p.byKey {
				if cs.inflight == 0 && cs.isReady() && now.Sub(cs.lastUsed) >= idle {
					p.removeLocked(cs)
				}
			}
			p.mu.Unlock()
		}
	}
}

// killNow kills the process groups of the pool's stdio servers at once.
func (p *sessionPool) killNow() {
	p.mu.Lock()
	var procs []*stdioProcess
	for cs := range p.live {
		if cs.isReady() {
			procs = append(procs, cs.proc)
		}
	}
	p.mu.Unlock()
	for _, pr := range procs {
		pr.killGroup()
	}
}

package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/mcpcontent"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Options are the dependencies of an Executor.
type Options struct {
	// Registry is the registry KV bucket: approvals of tool definitions
	// are read and watched there. Nil keeps approvals in memory (the first
	// definition seen by this process is the approved one) and publishes
	// nothing.
	Registry jetstream.KeyValue
	// Writer writes the registry through the dispatchers (the executor's
	// worker never writes it itself): the first approval of a definition
	// (trust on first use) and the specs of tools whose state changes
	// after Specs handed them out, announced as the MCP pool Writer.Pool.
	// Required with Registry.
	Writer registry.PoolWriter
	// Conn hears approvals as they are written: a core subscription on the
	// registry's approval keys ($KV.<bucket>.approval.>), not a KV watch,
	// so that a worker's NATS credentials need no consumer on the registry
	// stream (a role that may create consumers on a stream it also writes
	// could have the server deliver its writes onto any subject). Required
	// with Registry.
	Conn *nats.Conn
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// The worker's owner closes an Executor through executors.Closer.
var _ executors.Closer = (*Executor)(nil)

// Executor runs the tools of the configured MCP servers. It is safe for
// concurrent use.
type Executor struct {
	cfg     Config
	log     *slog.Logger
	kv      jetstream.KeyValue
	writer  registry.PoolWriter
	servers []*server

	mu          sync.RWMutex
	tools       map[string]*toolState // by toolwire name
	handed      map[string]bool       // names Specs returned: their changes are published
	memApproved map[string]string     // approvals without a registry

	changed  chan struct{}
	progress sync.Map // progress token -> *pendingCall
	tokens   atomic.Uint64

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	// lifeMu orders goTracked before Close: no goroutine is started once
	// closed is set.
	lifeMu sync.Mutex
	closed bool
}

// goTracked runs f on a goroutine Close waits for, unless the executor is
// closing; it reports whether f was started.
func (e *Executor) goTracked(f func()) bool {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// toolState is one imported tool as currently known. It is never mutated
// once stored: a change stores a new one.
type toolState struct {
	server *server
	tool   *sdk.Tool
	// hash of the server's current definition; approved is the hash
	// recorded in the registry. The tool is served when they are equal
	// and unavailable is empty.
	hash, approved string
	// unavailable says why the tool cannot be called whatever its
	// approval (it requires task augmentation); empty when it can.
	unavailable string
	spec        *toolwirev1.ToolSpec
	input       *jsonschema.Schema
}

// enabled reports whether the tool is served: its definition is the
// approved one and nothing makes it unavailable.
func (ts *toolState) enabled() bool { return ts.hash == ts.approved && ts.unavailable == "" }

// pendingCall is a call on its way to the server, by progress token.
type pendingCall struct {
	ctx context.Context
	// raw is the JSON of the call's result as the server sent it (see
	// rawCapture), when it was captured.
	raw atomic.Pointer[json.RawMessage]
}

// onCallResult keeps the raw result of the call with progress token.
func (e *Executor) onCallResult(token string, raw json.RawMessage) {
	if v, ok := e.progress.Load(token); ok {
		v.(*pendingCall).raw.Store(&raw)
	}
}

var _ executors.Executor = (*Executor)(nil)

// New connects to every configured server, imports its tools and returns
// once each server has answered or failed its first attempt (at most
// Config.StartupWait). A server that fails is logged and retried in the
// background with backoff, unless it is Required: then New fails. ctx
// bounds the start-up only; the executor lives until Close.
//
// It returns an error when cfg is invalid, the registry cannot be watched,
// or a required server cannot be reached.
func New(ctx context.Context, cfg Config, opts Options) (*Executor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mcp: config: %w", err)
	}
	e := &Executor{
		cfg:         cfg,
		log:         cmp.Or(opts.Logger, slog.Default()).With("component", "executor", "executor", "mcp"),
		kv:          opts.Registry,
		writer:      opts.Writer,
		tools:       map[string]*toolState{},
		handed:      map[string]bool{},
		memApproved: map[string]string{},
		changed:     make(chan struct{}, 1),
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if e.kv != nil {
		if opts.Conn == nil || opts.Writer.Writer == nil {
			e.cancel()
			return nil, errors.New("mcp: Options.Conn and Options.Writer are required with Options.Registry")
		}
		// The subscription lives until Close, not just New's ctx.
		approvals := make(chan *nats.Msg, 64)
		prefix := "$KV." + e.kv.Bucket() + "."
		sub, err := opts.Conn.ChanSubscribe(prefix+registry.ApprovalPrefix+">", approvals)
		if err != nil {
			e.cancel()
			return nil, fmt.Errorf("mcp: watch approvals: %w", err)
		}
		e.wg.Add(1)
		go e.watchApprovals(sub, approvals, prefix)
	}
	for _, sc := range cfg.Servers {
		s := newServer(e, sc)
		e.servers = append(e.servers, s)
		e.wg.Add(1)
		go s.run(e.ctx)
		if s.pool != nil {
			e.goTracked(s.pool.reap)
		}
	}
	timer := time.NewTimer(time.Duration(cfg.StartupWait))
	defer timer.Stop()
	var errs []error
	waiting := true
	for _, s := range e.servers {
		if waiting {
			select {
			case <-s.first:
			case <-timer.C:
				waiting = false
			case <-ctx.Done():
				waiting = false
			}
		}
		var err error
		select {
		case <-s.first:
			err = s.firstErr
		default:
			err = cmp.Or(ctx.Err(), errors.New("no answer within the start-up wait"))
		}
		if err == nil {
			continue
		}
		if s.cfg.Required {
			errs = append(errs, fmt.Errorf("required server %s: %w", s.cfg.Name, err))
		} else {
			e.log.WarnContext(ctx, "MCP server not available at start-up; retrying in the background", "server", s.cfg.Name, "error", err)
		}
	}
	if len(errs) > 0 {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Duration(cfg.TerminateDuration)+time.Second)
		defer cancel()
		_ = e.Close(closeCtx)
		return nil, fmt.Errorf("mcp: %w", errors.Join(errs...))
	}
	return e, nil
}

// Specs returns the specs of the tools imported so far, sorted by name,
// for the worker to publish at start-up. A tool whose definition differs
// from the approved one is included, disabled. From then on the Executor
// publishes every change of these tools' state (disabled, re-enabled,
// removed by the server) into Options.Registry itself. Tools discovered
// later (a server that came up late, a tool added by the server) appear in
// later Specs results and Changed fires; they are published by whoever
// serves them (see the package doc).
func (e *Executor) Specs() []*toolwirev1.ToolSpec {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*toolwirev1.ToolSpec, 0, len(e.tools))
	for _, name := range slices.Sorted(maps.Keys(e.tools)) {
		e.handed[name] = true
		out = append(out, proto.CloneOf(e.tools[name].spec))
	}
	return out
}

// Changed receives a value (coalesced) after the set of tools or the state
// of one changed, so that a worker serving specs dynamically can read
// Specs again.
func (e *Executor) Changed() <-chan struct{} { return e.changed }

func (e *Executor) notifyChanged() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// Execute calls the tool of req on its server.
//
// Before anything reaches the server it refuses, with no side effects:
// a tool it does not hold (NOT_FOUND); a tool whose current definition is
// not the approved one (PERMISSION_DENIED, with the approval command as
// suggestion); a call whose spec pins another definition hash than the
// server's current one (NOT_FOUND: that definition is gone, and the call
// must not silently reach a different tool); arguments that do not match
// the input schema (VALIDATION, with field violations); a server that
// stays disconnected for Config.SessionWait, or whose caller session
// cannot be opened, or lists another definition of the tool (TRANSIENT,
// retryable); and a server whose caller sessions gave no room within
// Config.SessionWait (OVERLOADED, retryable). The call goes to its caller's upstream session (see
// ServerConfig.Sessions).
// Errors of the call itself are mapped as described at callError and
// resultError.
func (e *Executor) Execute(ctx context.Context, req *executors.Request) (*tool.Result, error) {
	name := cmp.Or(req.Spec.GetName(), req.Call.GetTool())
	e.mu.RLock()
	ts := e.tools[name]
	e.mu.RUnlock()
	if ts == nil {
		return nil, refused(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, "no MCP tool %q in this worker", name)
	}
	if ts.unavailable != "" {
		return nil, refused(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, "tool %s is disabled: %s", name, ts.unavailable)
	}
	if !ts.enabled() {
		te := refused(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, "tool %s is disabled: %s", name, ts.spec.GetDisabledReason())
		te.Suggestion = fmt.Sprintf("toolctl tools approve %s --hash %s", name, ts.hash)
		return nil, te
	}
	if m := req.Spec.GetMcp(); m != nil && (m.DefinitionHash != ts.hash || m.Server != ts.server.cfg.Name || m.Tool != ts.tool.Name) {
		return nil, refused(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			"the call was admitted for definition %s of tool %s, but server %s now offers definition %s; the call was not sent, call the tool again",
			m.DefinitionHash, name, ts.server.cfg.Name, ts.hash)
	}
	args := req.Call.GetArguments()
	if len(args) == 0 {
		args = []byte("{}")
	}
	if v := registry.ValidateArgs(ts.input, args); len(v) > 0 {
		te := refused(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "invalid argument %q: %s", v[0].GetField(), v[0].GetMessage())
		te.Violations = v
		return nil, te
	}
	token := "toolwire-" + strconv.FormatUint(e.tokens.Add(1), 10)
	pc := &pendingCall{ctx: ctx}
	e.progress.Store(token, pc)
	defer e.progress.Delete(token)
	params := &sdk.CallToolParams{Name: ts.tool.Name, Arguments: json.RawMessage(args)}
	params.SetProgressToken(token)
	var (
		res *sdk.CallToolResult
		err error
	)
	if ts.server.pool != nil {
		res, err = e.callPooled(ctx, ts, req.Call, params)
	} else {
		res, err = e.callShared(ctx, ts, params)
	}
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if r := pc.raw.Load(); r != nil {
		raw = *r
	}
	return resultFromMCP(ts, res, raw)
}

// callShared sends the call on the server's one session (Sessions
// "shared"), waiting up to Config.SessionWait for it.
func (e *Executor) callShared(ctx context.Context, ts *toolState, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	defer ts.server.forget(params.GetProgressToken().(string))
	var stale *sdk.ClientSession
	for {
		sess, err := ts.server.session(ctx, time.Duration(e.cfg.SessionWait), stale)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("mcp: waiting for server %s: %w", ts.server.cfg.Name, ctx.Err())
			}
			te := refused(toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, "MCP server %s is not connected: %v", ts.server.cfg.Name, err)
			te.Retryable = true
			return nil, te
		}
		res, err := sess.CallTool(ctx, params)
		if err != nil && ctx.Err() == nil && errors.Is(err, sdk.ErrConnectionClosed) {
			// The session was closing (its server just died): the SDK
			// refused to send the request, so it is safe to send it again
			// on the next session.
			stale = sess
			continue
		}
		if err != nil {
			return nil, callError(ctx, ts, err)
		}
		return res, nil
	}
}

// callPooled sends the call on the upstream session of its caller (its
// tenant, or tenant and session), opening one when there is none.
func (e *Executor) callPooled(ctx context.Context, ts *toolState, call *toolwirev1.ToolCall, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	pool := ts.server.pool
	key := keyOf(ts.server.cfg.Sessions, call)
	for range 3 {
		cs, err := pool.acquire(ctx, key)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, fmt.Errorf("mcp: waiting for a session of server %s: %w", ts.server.cfg.Name, ctx.Err())
		case errors.Is(err, errPoolFull):
			te := refused(toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED,
				"MCP server %s: no upstream session free within %s (max_sessions %d)", ts.server.cfg.Name,
				time.Duration(e.cfg.SessionWait), ts.server.cfg.MaxSessions)
			te.Retryable, te.RetryAfter = true, time.Second
			return nil, te
		case err != nil:
			var te *tool.Error
			if errors.As(err, &te) {
				return nil, te
			}
			return nil, refused(toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, "MCP server %s: %v", ts.server.cfg.Name, err)
		}
		if h := cs.hashes[ts.tool.Name]; h != ts.hash {
			// The session lists another definition than the one imported
			// and approved: never call it; discover the tools again.
			ts.server.log.Warn("MCP caller session lists another definition of a tool; session closed, tools listed again",
				"tool", ts.tool.Name, "tenant", cs.key.tenant, "hash", h, "imported", ts.hash)
			pool.release(cs)
			pool.retire(cs)
			ts.server.relist()
			te := refused(toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, "MCP server %s: the definition of tool %s changed on the server", ts.server.cfg.Name, ts.tool.Name)
			te.Retryable = true
			return nil, te
		}
		res, err := cs.sess.CallTool(ctx, params)
		cs.capture.forget(params.GetProgressToken().(string))
		pool.release(cs)
		if err != nil && ctx.Err() == nil && errors.Is(err, sdk.ErrConnectionClosed) {
			// Never sent (see callShared): again, on a new session.
			pool.discard(cs)
			continue
		}
		if err != nil {
			return nil, callError(ctx, ts, err)
		}
		return res, nil
	}
	te := refused(toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, "MCP server %s: its sessions keep closing", ts.server.cfg.Name)
	te.Retryable = true
	return nil, te
}

// resultFromMCP maps a CallToolResult: content blocks one to one (zero
// priorities from raw, the result's JSON when it was captured),
// structured content as JSON, `_meta` as it is and intents from it,
// isError as an error.
func resultFromMCP(ts *toolState, res *sdk.CallToolResult, raw json.RawMessage) (*tool.Result, error) {
	invalid := func(format string, args ...any) *tool.Error {
		return &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, SideEffects: sideEffectsMaybe,
			Message: fmt.Sprintf("MCP server %s returned an invalid result: ", ts.server.cfg.Name) + fmt.Sprintf(format, args...)}
	}
	content, err := mcpcontent.FromMCP(res.Content)
	if err != nil {
		return nil, invalid("%v", err)
	}
	mcpcontent.ZeroPriorities(content, raw)
	meta, err := mcpcontent.MetaJSON(res.Meta)
	if err != nil {
		return nil, invalid("_meta: %v", err)
	}
	var structured []byte
	if res.StructuredContent != nil {
		if structured, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, invalid("structured content: %v", err)
		}
	}
	if res.IsError {
		return nil, resultError(ts, res, content, structured, []byte(meta))
	}
	intents, err := intentsFromMeta(res.Meta)
	if err != nil {
		return nil, invalid("%v", err)
	}
	r := &tool.Result{Content: content, Structured: structured, Intents: intents}
	if meta != "" {
		r.Meta = []byte(meta)
	}
	return r, nil
}

// onProgress forwards a progress notification to the call that sent its
// token, as tool.Progress on the call's context. Percent is
// progress/total*100 when the server gives a total, else unknown (-1).
func (e *Executor) onProgress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	if req.Params == nil {
		return
	}
	v, ok := e.progress.Load(fmt.Sprint(req.Params.ProgressToken))
	if !ok {
		return // the call has returned
	}
	ctx := v.(*pendingCall).ctx
	pct := -1.0
	if t := req.Params.Total; t > 0 {
		pct = min(max(req.Params.Progress/t*100, 0), 100)
	}
	msg := req.Params.Message
	if msg == "" && req.Params.Total > 0 {
		msg = fmt.Sprintf("%g/%g", req.Params.Progress, req.Params.Total)
	}
	tool.Progress(ctx, msg, pct)
}

// Close stops the executor in this order: stop reconnecting and watching;
// close every session (a stdio server gets its stdin closed, then SIGTERM
// and SIGKILL each after Config.TerminateDuration; its process group is
// killed in any case); wait for every goroutine. If ctx ends first, every
// stdio server's process group is killed at once and Close still waits
// for the goroutines, then returns ctx's error. Calls in flight fail
// TRANSIENT. Close is idempotent.
func (e *Executor) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.lifeMu.Lock()
		e.closed = true
		e.lifeMu.Unlock()
		e.cancel()
	})
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, s := range e.servers {
		s.killNow()
		if s.pool != nil {
			s.pool.killNow()
		}
	}
	<-done
	return fmt.Errorf("mcp: close: %w", ctx.Err())
}

// approve returns the approved definition hash of name, recording hash
// when none is (trust on first use).
func (e *Executor) approve(ctx context.Context, name, hash string) (string, error) {
	if e.kv != nil {
		return e.writer.ApproveFirst(ctx, name, hash)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.memApproved[name]; ok {
		return a, nil
	}
	e.memApproved[name] = hash
	return hash, nil
}

// reconcile replaces the tools of s with those the server lists now (with
// extra, what the listing said that the SDK's Tool drops), and publishes
// what changed for tools already handed out.
func (e *Executor) reconcile(ctx context.Context, s *server, listed []*sdk.Tool, extra map[string]listedTool) error {
	byName := map[string][]*sdk.Tool{}
	for _, t := range listed {
		name, err := ToolName(s.cfg.Name, t.Name)
		if err != nil {
			s.log.WarnContext(ctx, "MCP tool not imported", "tool", t.Name, "error", err)
			continue
		}
		byName[name] = append(byName[name], t)
	}
	next := map[string]*toolState{}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		ts := byName[name]
		if len(ts) > 1 {
			var orig []string
			for _, t := range ts {
				orig = append(orig, t.Name)
			}
			s.log.WarnContext(ctx, "MCP tools not imported: their names collide once sanitized", "name", name, "tools", orig)
			continue
		}
		t := ts[0]
		hash, err := DefinitionHash(t)
		if err != nil {
			s.log.WarnContext(ctx, "MCP tool not imported", "tool", t.Name, "error", err)
			continue
		}
		spec, dropped, err := buildSpec(s.cfg.Name, name, t, hash, extra[t.Name])
		if err != nil {
			s.log.WarnContext(ctx, "MCP tool not imported", "tool", t.Name, "error", err)
			continue
		}
		if len(dropped) > 0 {
			s.log.WarnContext(ctx, "MCP tool fields left out of its spec: too large", "tool", t.Name, "fields", dropped)
		}
		approved, err := e.approve(ctx, name, hash)
		if err != nil {
			return err
		}
		input, err := registry.DefaultSchemas.Compile(spec.InputSchemaJson)
		if err != nil { // Check compiled it already
			return fmt.Errorf("tool %s: input schema: %w", name, err)
		}
		st := &toolState{server: s, tool: t, hash: hash, approved: approved, spec: spec, input: input,
			unavailable: unavailableReason(s.cfg.Name, t.Name, extra[t.Name])}
		switch {
		case st.unavailable != "":
			spec.Disabled, spec.DisabledReason = true, st.disabledReason(name)
			s.log.WarnContext(ctx, "MCP tool requires task augmentation; tool disabled", "tool", name)
		case !st.enabled():
			spec.Disabled, spec.DisabledReason = true, st.disabledReason(name)
			s.log.WarnContext(ctx, "MCP tool definition differs from the approved one; tool disabled",
				"tool", name, "approved", approved, "current", hash)
		}
		next[name] = st
	}

	var publish []*toolwirev1.ToolSpec
	changed := false
	e.mu.Lock()
	for name, old := range e.tools {
		if old.server != s {
			continue
		}
		if _, ok := next[name]; ok {
			continue
		}
		delete(e.tools, name)
		changed = true
		s.log.WarnContext(ctx, "MCP server no longer offers the tool; tool disabled", "tool", name)
		if e.handed[name] {
			gone := proto.CloneOf(old.spec)
			gone.Disabled = true
			gone.DisabledReason = fmt.Sprintf("MCP server %s no longer offers tool %q", s.cfg.Name, old.tool.Name)
			publish = append(publish, gone)
		}
	}
	for name, st := range next {
		old := e.tools[name]
		if old != nil && proto.Equal(old.spec, st.spec) && old.approved == st.approved {
			continue
		}
		e.tools[name] = st
		changed = true
		if e.handed[name] {
			publish = append(publish, proto.CloneOf(st.spec))
		}
	}
	e.mu.Unlock()

	s.log.DebugContext(ctx, "MCP tools discovered", "tools", len(next), "changed", changed)
	if changed {
		e.notifyChanged()
	}
	if err := e.publish(ctx, publish); err != nil {
		return err
	}
	// An approval recorded while this discovery ran may have been applied
	// to the state it replaced: read the approvals of the disabled tools
	// again now that their state is stored.
	for name, st := range next {
		if st.enabled() || e.kv == nil {
			continue
		}
		approved, ok, err := registry.Approved(ctx, e.kv, name)
		if err != nil {
			return err
		}
		if ok {
			if err := e.applyApproval(ctx, name, approved); err != nil {
				return err
			}
		}
	}
	return nil
}

// publish writes specs into the registry, if there is one.
func (e *Executor) publish(ctx context.Context, specs []*toolwirev1.ToolSpec) error {
	if e.kv == nil || len(specs) == 0 {
		return nil
	}
	slices.SortFunc(specs, func(a, b *toolwirev1.ToolSpec) int { return cmp.Compare(a.Name, b.Name) })
	if err := e.writer.Publish(ctx, specs, false); err != nil {
		return fmt.Errorf("mcp: publish specs: %w", err)
	}
	for _, s := range specs {
		e.log.InfoContext(ctx, "MCP tool spec published", "tool", s.Name, "disabled", s.Disabled,
			"definition_hash", s.GetMcp().GetDefinitionHash())
	}
	return nil
}

// watchApprovals applies approvals recorded in the registry (ApproveTool,
// toolctl tools approve) to the tools held, until Close.
func (e *Executor) watchApprovals(sub *nats.Subscription, approvals <-chan *nats.Msg, prefix string) {
	defer e.wg.Done()
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-e.ctx.Done():
			return
		case m := <-approvals:
			// A core subscription also hears publishes the stream refused
			// (a trust-on-first-use create of a key that exists): the
			// message only says that an approval may have changed, the
			// stored value says what it is.
			name := strings.TrimPrefix(m.Subject, prefix+registry.ApprovalPrefix)
			approved, ok, err := e.storedApproval(name, string(m.Data))
			if err == nil && ok {
				err = e.applyApproval(e.ctx, name, approved)
			}
			if err != nil && e.ctx.Err() == nil {
				e.log.Error("applying an approval", "tool", name, "error", err)
			}
		}
	}
}

// storedApproval reads the approval of name as stored, giving the stream
// up to about two seconds to store heard (a core subscriber hears a
// publish as the stream receives it, before it is stored, and also when
// the stream refuses it).
func (e *Executor) storedApproval(name, heard string) (string, bool, error) {
	wait := 20 * time.Millisecond
	for {
		approved, ok, err := registry.Approved(e.ctx, e.kv, name)
		if err != nil || (ok && approved == heard) || wait > time.Second {
			return approved, ok, err
		}
		select {
		case <-e.ctx.Done():
			return "", false, e.ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// applyApproval records approved as the approved hash of name and
// enables or disables the tool accordingly.
func (e *Executor) applyApproval(ctx context.Context, name, approved string) error {
	e.mu.Lock()
	old := e.tools[name]
	if old == nil || old.approved == approved {
		e.mu.Unlock()
		return nil
	}
	st := *old
	st.approved = approved
	st.spec = proto.CloneOf(old.spec)
	st.spec.Disabled, st.spec.DisabledReason = false, ""
	if !st.enabled() {
		st.spec.Disabled, st.spec.DisabledReason = true, st.disabledReason(name)
	}
	e.tools[name] = &st
	handed := e.handed[name]
	e.mu.Unlock()

	e.log.InfoContext(ctx, "MCP tool approval changed", "tool", name, "approved", approved,
		"current", st.hash, "enabled", st.enabled())
	e.notifyChanged()
	if !handed {
		return nil
	}
	return e.publish(ctx, []*toolwirev1.ToolSpec{proto.CloneOf(st.spec)})
}

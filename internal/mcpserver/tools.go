package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpcontent"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// receive answers tools/list and tools/call from the registry and the
// dispatcher; resources/read of a call's output or a skill's file; the
// Skills extension's methods (skills.go) and its resources/list entries;
// the Tasks extension's methods; and refuses prompts/list and prompts/get
// (method not found) unless an Extra declares prompts. Every other method
// is the SDK's.
func (s *Server) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list", "tools/call":
			id, err := s.caller(ctx, req)
			if err != nil {
				return nil, err
			}
			// The client's rendering profile (profile.go), at the edge.
			if ctx, err = s.withProfile(ctx, req); err != nil {
				return nil, err
			}
			if method == "tools/list" {
				return s.listTools(ctx, id, req.(*mcp.ListToolsRequest))
			}
			return s.callTool(ctx, id, req.(*mcp.CallToolRequest))
		case "resources/read":
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok && p != nil && (isOutputURI(p.URI) || isSkillURI(p.URI)) {
				id, err := s.caller(ctx, req)
				if err != nil {
					return nil, err
				}
				if isSkillURI(p.URI) {
					return s.readSkill(ctx, id, req.(*mcp.ReadResourceRequest))
				}
				return s.readOutput(ctx, id, p.URI)
			}
		case "resources/list", "skills/list", "skills/get", directoryRead:
			id, err := s.caller(ctx, req)
			if err != nil {
				return nil, err
			}
			switch method {
			case directoryRead:
				return s.readSkillDirectory(ctx, id, req)
			case "skills/list", "skills/get":
				return s.skillsMethod(ctx, id, method, req)
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return nil, err
			}
			return s.listSkillResources(ctx, id, req, res)
		case "prompts/list", "prompts/get":
			if s.cfg.Extra == nil {
				// Served only when declared (an Extra's): the SDK would
				// answer an empty list for a capability not declared.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: method + ": this server declares no prompts capability"}
			}
		case "tasks/get", "tasks/update", "tasks/cancel":
			id, err := s.caller(ctx, req)
			if err != nil {
				return nil, err
			}
			if ctx, err = s.withProfile(ctx, req); err != nil {
				return nil, err
			}
			return s.task(ctx, id, method, req)
		}
		return next(ctx, method, req)
	}
}

// statelessClient reports whether the client speaks the stateless
// revision (2026-07-28 and later), whose results carry a resultType: the
// SDK gives a session of such a client no initialize parameters.
func statelessClient(ss *mcp.ServerSession) bool {
	if ss == nil {
		return true
	}
	p := ss.InitializeParams()
	return p == nil || p.ProtocolVersion >= "2026-07-28"
}

// toolResult is a tool result as the endpoint writes it: the SDK's, with
// what the SDK's types cannot say. Complete marks it complete
// ("resultType": "complete"), as the stateless revision wants every result
// of tools/call marked (the SDK marks the results of the tools it runs
// itself, and tools/call is answered here, not by the SDK). Zero are the
// content blocks whose annotations have a priority of 0, which the SDK's
// Annotations omit (a float64 with omitempty): it is written back.
type toolResult struct {
	*mcp.CallToolResult
	complete bool
	zero     []int
}

func (r toolResult) MarshalJSON() ([]byte, error) {
	b, err := r.CallToolResult.MarshalJSON()
	if err == nil && len(r.zero) > 0 {
		b, err = zeroPriorities(b, r.zero)
	}
	if err != nil || !r.complete {
		return b, err
	}
	return markComplete(b), nil
}

// markComplete returns the JSON object b with "resultType": "complete"
// first (b itself when it is not an object).
func markComplete(b []byte) []byte {
	if len(b) < 2 || b[0] != '{' {
		return b
	}
	head := `{"resultType":"complete"`
	if len(b) > 2 {
		head += ","
	}
	return append([]byte(head), b[1:]...)
}

// zeroPriorities sets "priority": 0 in the annotations of the content
// blocks at indexes zero of the tool result encoded in b.
func zeroPriorities(b []byte, zero []int) ([]byte, error) {
	var res map[string]json.RawMessage
	var content []map[string]json.RawMessage
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(res["content"], &content); err != nil {
		return nil, err
	}
	for _, i := range zero {
		if i < 0 || i >= len(content) {
			continue
		}
		ann := map[string]json.RawMessage{}
		if raw, ok := content[i]["annotations"]; ok {
			if err := json.Unmarshal(raw, &ann); err != nil || ann == nil {
				ann = map[string]json.RawMessage{}
			}
		}
		ann["priority"] = json.RawMessage("0")
		var err error
		if content[i]["annotations"], err = json.Marshal(ann); err != nil {
			return nil, err
		}
	}
	var err error
	if res["content"], err = json.Marshal(content); err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// caller is the authenticated caller of req: from the request context
// (authenticate), or, where the SDK runs the method on a context of its
// own, from the request's headers, checked again.
func (s *Server) caller(ctx context.Context, req mcp.Request) (identity.Identity, error) {
	if id, err := callerOf(ctx); err == nil {
		return id, nil
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		id, err := s.auth.Authenticate(&http.Request{Header: ex.Header})
		if err == nil && identity.TenantRe.MatchString(id.Tenant) {
			return id, nil
		}
	}
	return identity.Identity{}, errUnauthenticated
}

// listTools answers one page of the tools the caller may see, in name
// order, as the registry names them. The cursor is the last name of the
// page before (opaque to clients). The page is written from each tool's
// cached MCP form (registry.ExportOne's JSON), which has fields the SDK's
// Tool has not (execution.taskSupport). A request whose _meta names a
// toolwire session (MetaSession) lists the tools of that session: those
// its mode forbids outright are left out (dispatch's VisibleToolsFor);
// one that names a model (model.go) lists what its family's toolset
// offers.
// Disabled tools are left out too (an MCP tool whose definition changed,
// or that requires task augmentation toolwire cannot give it): every call
// of one is refused, so a client is not offered it; the API and toolctl
// still show them, with the reason.
func (s *Server) listTools(ctx context.Context, id identity.Identity, req *mcp.ListToolsRequest) (mcp.Result, error) {
	after, session := "", ""
	if p := req.Params; p != nil {
		if p.Cursor != "" {
			b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
			}
			after = string(b)
		}
		var err error
		if session, err = sessionOf(p.Meta); err != nil {
			return nil, err
		}
	}
	model, err := modelOf(req)
	if err != nil {
		return nil, err
	}
	specs, err := s.d.VisibleToolsFor(ctx, id, registry.Filter{}, dispatch.ListFor{Session: session, Model: model})
	if err != nil {
		return nil, err
	}
	// Private: the list is this caller's (scopes and policy).
	page := toolPage{CacheScope: "private", Tools: []json.RawMessage{}}
	if statelessClient(req.Session) {
		page.ResultType = "complete"
	}
	last, prof := "", s.profileFrom(ctx)
	for _, spec := range specs {
		if spec.Name <= after || spec.Disabled {
			continue
		}
		if len(page.Tools) == s.cfg.PageSize {
			page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(last))
			break
		}
		t, err := s.tool(spec, prof)
		if err != nil {
			s.log.Warn("a tool has no MCP form; left out of tools/list", "tool", spec.Name, "err", err)
			continue
		}
		page.Tools, last = append(page.Tools, t), spec.Name
	}
	return newReply(page)
}

// toolPage is a tools/list result.
type toolPage struct {
	// ResultType is "complete" for clients of the stateless revision.
	ResultType string            `json:"resultType,omitempty"`
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"nextCursor,omitempty"`
	CacheScope string            `json:"cacheScope,omitempty"`
	// TTLMs is 0: a list depends on the registry and the policy, which
	// change at any time.
	TTLMs int `json:"ttlMs"`
}

// tool is spec's MCP form (registry.ExportOne's JSON) as the clients of
// the profile p get it (renderTool), cached per version and profile.
func (s *Server) tool(spec *toolwirev1.ToolSpec, p *profiles.Profile) (json.RawMessage, error) {
	key := spec.Name + "@" + spec.Version + "#" + p.Name
	s.mu.Lock()
	c, ok := s.tools[key]
	s.mu.Unlock()
	if ok && c.of(spec) {
		return c.t, nil
	}
	if ok {
		// Another view of the same version: a toolset's variant or a
		// spec's definition (docs/toolsets.md), or the registered spec
		// after one of those was cached first. Cached under the view's
		// hash too.
		sum := sha256.Sum256([]byte(spec.Summary + "\x00" + spec.Description + "\x00" + spec.InputSchemaJson))
		key += "#" + hex.EncodeToString(sum[:8])
		s.mu.Lock()
		c, ok = s.tools[key]
		s.mu.Unlock()
		if ok {
			return c.t, nil
		}
	}
	t, err := registry.ExportOne(toolwirev1.ToolFormat_TOOL_FORMAT_MCP, spec)
	if err != nil {
		return nil, err
	}
	t, dropped, err := renderTool(t, spec, p)
	if err != nil {
		return nil, err
	}
	if dropped { // logged once per version and profile: the form is cached
		s.log.Warn("a tool's _meta is not a JSON object; listed without it", "tool", spec.Name, "version", spec.Version)
	}
	s.mu.Lock()
	if len(s.tools) > 10000 { // bounded: versions come and go
		clear(s.tools)
	}
	s.tools[key] = cachedTool{summary: spec.Summary, description: spec.Description, schema: spec.InputSchemaJson, t: t}
	s.mu.Unlock()
	return t, nil
}

// cachedTool is a tool's MCP form for one profile, with what a view of
// its version may change (a toolset's variant, a spec's definition): the
// summary, description and input schema it was made from.
type cachedTool struct {
	summary, description, schema string
	t                            json.RawMessage
}

// of reports whether c was made from spec's view.
func (c cachedTool) of(spec *toolwirev1.ToolSpec) bool {
	return c.summary == spec.Summary && c.description == spec.Description && c.schema == spec.InputSchemaJson
}

// callTool runs a tools/call as a toolwire call: admission, policy,
// approvals, limits and the loop guard apply unchanged. It waits for the
// call's result (through an approval, too), relaying the worker's
// progress when the client sent a progress token; the client going away
// (its context ends) cancels the call.
func (s *Server) callTool(ctx context.Context, id identity.Identity, req *mcp.CallToolRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
	}
	args := string(p.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	// A request of a revision before 2026-07-28 gets a context from the
	// SDK that never ends: the HTTP request's ending is the client going
	// away.
	if rc, ok := ctx.Value(httpRequestKey{}).(context.Context); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(rc, cancel)()
	}
	cr := &toolwirev1.CallRequest{Tool: p.Name, ArgumentsJson: args}
	session, err := sessionOf(p.Meta)
	if err != nil {
		return nil, err
	}
	cr.Session = session
	if cr.Model, err = modelOf(req); err != nil {
		return nil, err
	}
	stateless := statelessClient(req.Session)
	if stateless {
		if err := inputOf(p, cr); err != nil {
			return nil, err
		}
	}
	tasks, err := s.taskMode(p, stateless)
	if err != nil {
		return nil, err
	}
	if stateless {
		if done, err := s.confirmation(ctx, id, p, cr); done != nil || err != nil {
			return done, err
		}
	}
	sub, err := s.d.Submit(ctx, id, cr)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	if sub.Rejected != nil {
		res, err := refused(sub.Rejected, s.profileFrom(ctx))
		return mark(res, err, stateless)
	}
	if sub.Awaiting != nil && stateless && !tasks {
		if res := s.askToConfirm(sub.Awaiting, cr.ArgumentsJson, cr.ClientCapabilitiesJson); res != nil {
			return res, nil
		}
	}
	drain := true
	if token := p.GetProgressToken(); token != nil && req.Session != nil {
		stop := s.startRelay(ctx, id, sub.CallID, token, req.Session)
		defer func() { stop(drain) }()
	}
	if tasks {
		if res := s.asTask(ctx, id, cr, sub.CallID); res != nil {
			drain = false
			return res, nil
		}
	}
	resp, err := s.await(ctx, id, sub.CallID)
	if err != nil {
		// Nobody waits for the call any more (the client went away, or
		// the wait was refused): it is cancelled, not left to run.
		s.cancel(ctx, id, sub.CallID)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	if resp.GetInputRequired() != nil {
		return askInput(resp, stateless, cr.ClientCapabilitiesJson, s.profileFrom(ctx))
	}
	res, err := result(resp, s.profileFrom(ctx))
	return mark(res, err, stateless)
}

// startRelay relays the call's progress to the client (relayProgress)
// until the returned stop is called; stop(true) first lets the relay
// deliver the progress before the call's end (bounded by progressDrain).
func (s *Server) startRelay(ctx context.Context, id identity.Identity, callID string, token any, ss *mcp.ServerSession) (stop func(drain bool)) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.relayProgress(pctx, id, callID, token, ss)
	}()
	return func(drain bool) {
		if drain {
			// The watch ends by itself at the call's FINISHED event.
			t := time.NewTimer(progressDrain)
			select {
			case <-done:
			case <-t.C:
			}
			t.Stop()
		}
		cancel()
		<-done
	}
}

// asTask answers the call as a task when it has not ended within
// Config.TaskAfter; nil when it has, or when the task could not be
// recorded (the request then waits for the result, as without tasks).
func (s *Server) asTask(ctx context.Context, id identity.Identity, cr *toolwirev1.CallRequest, callID string) mcp.Result {
	g, err := s.d.GetResult(ctx, id, callID, s.cfg.TaskAfter)
	if err != nil || g.State == toolwirev1.CallState_CALL_STATE_DONE {
		return nil
	}
	res, err := s.createTask(ctx, id, cr, callID, g)
	if err != nil {
		s.log.Warn("a call could not become a task; the request waits for its result", "call_id", callID, "err", err)
		return nil
	}
	return res
}

// mark marks a tool result complete for a client of the stateless
// revision (toolResult).
func mark(res toolResult, err error, stateless bool) (mcp.Result, error) {
	switch {
	case err != nil:
		return nil, err
	case !stateless && len(res.zero) == 0:
		return res.CallToolResult, nil
	}
	res.complete = stateless
	return res, nil
}

// progressDrain bounds the wait for a call's last progress
// notifications once its result is in.
const progressDrain = 15 * time.Second

// await waits for the call's terminal response; a call parked for an
// approver is looked at again every second.
func (s *Server) await(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.ToolResponse, error) {
	wait := s.d.Config().MaxWait
	for {
		started := time.Now()
		g, err := s.d.GetResult(ctx, id, callID, wait)
		if err != nil {
			return nil, err
		}
		switch g.State {
		case toolwirev1.CallState_CALL_STATE_DONE:
			return g.Response, nil
		case toolwirev1.CallState_CALL_STATE_UNKNOWN:
			return nil, fmt.Errorf("call %s is unknown (its records are gone)", callID)
		}
		if time.Since(started) < time.Second {
			if err := pause(ctx, time.Second); err != nil {
				return nil, err
			}
		}
	}
}

// refused answers a call admission refused: an unknown tool is the
// client's protocol error, anything else the tool's isError result.
func refused(resp *toolwirev1.ToolResponse, p *profiles.Profile) (toolResult, error) {
	e := resp.GetError()
	if e.GetType() == toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND || isInputViolation(e) {
		return toolResult{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.GetMessage()}
	}
	return result(resp, p)
}

// relayProgress sends the call's PROGRESS events to the client as
// progress notifications for token, in order, until ctx ends
// (progressParams: partial output in _meta, MetaPartial).
func (s *Server) relayProgress(ctx context.Context, id identity.Identity, callID string, token any, ss *mcp.ServerSession) {
	prev := 0.0 // the progress of the last notification: it only increases
	err := s.d.Watch(ctx, id, callID, func(ev *toolwirev1.CallEvent) error {
		if ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS {
			return nil
		}
		pp := progressParams(token, prev, ev)
		prev = pp.Progress
		return ss.NotifyProgress(ctx, pp)
	})
	if err != nil && ctx.Err() == nil {
		s.log.Debug("progress relay ended", "call_id", callID, "err", err)
	}
}

// cancel cancels a call whose client went away or cancelled it
// (cancelReason).
func (s *Server) cancel(ctx context.Context, id identity.Identity, callID string) {
	cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	if _, err := s.d.Cancel(cctx, id, callID, cancelReason(ctx)); err != nil {
		s.log.Warn("cancelling the call of a client that went away failed", "call_id", callID, "err", err)
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// result maps a toolwire response, as the clients of the profile p get it
// (profiles.Profile.Response: `_meta` filtered, fallbacks for the content
// they cannot show), onto an MCP tool result, one to one: content blocks
// (internal/mcpcontent's mapping), structured content, the tool's
// `_meta`, and a failure as isError with the error's message as text and
// its type, retryability and side effects in `_meta`. A block's priority
// of 0 is kept (toolResult).
func result(resp *toolwirev1.ToolResponse, p *profiles.Profile) (toolResult, error) {
	noContent := len(resp.GetContent()) == 0
	resp = p.Response(resp)
	content, err := mcpcontent.ToMCP(resp.GetContent())
	if err != nil {
		return toolResult{}, fmt.Errorf("toolwire: the result has no MCP form: %w", err)
	}
	var zero []int
	for i, c := range resp.GetContent() {
		if a := c.GetAnnotations(); a != nil && a.Priority != nil && *a.Priority == 0 {
			zero = append(zero, i)
		}
	}
	res := &mcp.CallToolResult{Content: content, IsError: !resp.GetOk()}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	if m := resp.GetMeta(); m.GetTruncated() && (m.GetFullText() != nil || m.GetFullOutput() != nil) {
		// Cut to the inline limits: the whole of it is a resource away.
		// (Cut with the whole not stored — a full blob store — the
		// result says truncated in its text, and no link is given.)
		res.Content = append(res.Content, linkFor(outputLink(resp), p))
	}
	if sj := resp.GetStructuredJson(); sj != "" {
		res.StructuredContent = json.RawMessage(sj)
	}
	meta := mcp.Meta{}
	if mj := resp.GetMetaJson(); mj != "" {
		// Anything but an object ("null" too) is no _meta.
		if err := json.Unmarshal([]byte(mj), &meta); err != nil || meta == nil {
			meta = mcp.Meta{}
		}
	}
	delete(meta, MetaError) // toolwire's keys: the tool's own never pass for them
	delete(meta, MetaLatencyBudget)
	meta[MetaCallID] = resp.GetCallId()
	if o := resp.GetMeta().GetLatencyBudgetExceeded(); o != nil {
		meta[MetaLatencyBudget] = map[string]any{"budget_ms": o.GetBudget().AsDuration().Milliseconds(),
			"elapsed_ms": o.GetElapsed().AsDuration().Milliseconds(), "source": o.GetSource(), "entry": o.GetEntry(),
			"policy_version": o.GetPolicyVersion(), "mode": o.GetMode()}
	}
	if e := resp.GetError(); e != nil {
		if noContent {
			// The tool gave no content: the error's message is the text,
			// before what the profile added (structured content as text).
			res.Content = append([]mcp.Content{&mcp.TextContent{Text: e.GetMessage()}}, res.Content...)
		}
		te := map[string]any{"type": e.GetType().String(), "message": e.GetMessage(), "retryable": e.GetRetryable(),
			"side_effects": e.GetPartialSideEffects().String()}
		if e.GetSuggestion() != "" {
			te["suggestion"] = e.GetSuggestion()
		}
		if ra := e.GetRetryAfter(); ra != nil {
			te["retry_after_ms"] = ra.AsDuration().Milliseconds()
		}
		meta[MetaError] = te
	}
	res.Meta = meta
	return toolResult{CallToolResult: res, zero: zero}, nil
}

// linkFor is the link l as the clients of p get it: a text block when p
// has the resource_link text fallback (profiles.LinkText).
func linkFor(l *mcp.ResourceLink, p *profiles.Profile) mcp.Content {
	if p == nil || p.Fallbacks.ResourceLink != "text" {
		return l
	}
	return &mcp.TextContent{Text: profiles.LinkText(&toolwirev1.ResourceLink{Uri: l.URI, Name: l.Name, Title: l.Title,
		Description: l.Description})}
}

// Keys of toolwire's `_meta` in tool results.
const (
	// MetaCallID is the toolwire call id: GetResult, Watch and audits name
	// the call by it.
	MetaCallID = "io.toolwire/call_id"
	// MetaError is a failed call's error: type, message, retryable,
	// side_effects, suggestion, retry_after_ms.
	MetaError = "io.toolwire/error"
	// MetaLatencyBudget is set when the call took longer than its soft
	// latency budget (docs/policy.md, "Latency budgets"; never a
	// failure): budget_ms, elapsed_ms, source ("spec" or "policy"),
	// entry, policy_version, mode.
	MetaLatencyBudget = "io.toolwire/latency_budget_exceeded"
	// MetaSession, in a request's _meta, is the toolwire session the
	// request belongs to (a string): a tools/call's call carries it
	// (CallRequest.session), so that the session's state (ended) applies.
	MetaSession = "io.toolwire/session"
)

// sessionOf is the toolwire session a request's _meta names (MetaSession);
// "" for none. A value other than a string is invalid params.
func sessionOf(meta mcp.Meta) (string, error) {
	v, ok := meta[MetaSession]
	if !ok || v == nil {
		return "", nil
	}
	session, ok := v.(string)
	if !ok {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: MetaSession + " must be a string"}
	}
	return session, nil
}

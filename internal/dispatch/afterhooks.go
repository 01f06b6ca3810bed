package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/bus"
	mcpexec "github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// After-hooks (doc.go, "Hooks"): admission names in the call the
// after-hooks the policy in force binds to its tool (bindAfterHooks).
// The worker that ran the call sends its response, secrets redacted, to
// bus.AfterHookSubject before storing it; a dispatcher (one queue group of
// every replica) calls each hook through the fleet in order and answers
// what they made of it (an AfterHookReply), which the worker applies and
// stores. The audit therefore keeps only what the hooks let through.

// AfterHookRequest is what an after-hook gets as its arguments.
type AfterHookRequest struct {
	Hook        string          `json:"hook"`
	Phase       string          `json:"phase"` // always "after"
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	SpecVersion string          `json:"spec_version"`
	Arguments   json.RawMessage `json:"arguments"`
	Caller      HookCaller      `json:"caller"`
	Response    HookResponse    `json:"response"`
}

// HookResponse is the response an after-hook looks at, as an earlier
// hook of the call left it. Content blocks are MCP's
// (`{"type":"text","text":…}`).
type HookResponse struct {
	OK                bool            `json:"ok"`
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	Error             *HookError      `json:"error,omitempty"`
	// InputRequests, when the tool asks its caller for input instead of
	// answering (docs/mcp.md), are what it asks, by key: each
	// {"method":…,"params":…}. Such a response can be passed, annotated or
	// withheld, not redacted or replaced: a hook that must change what is
	// asked withholds it.
	InputRequests map[string]HookInputRequest `json:"input_requests,omitempty"`
}

// HookInputRequest is one thing a tool asks its caller for.
type HookInputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// HookError is the error of a failed call an after-hook looks at.
type HookError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AfterHookAnswer is an after-hook's answer.
type AfterHookAnswer struct {
	// Action is continue (the default), annotate (record Annotations),
	// redact (Content and StructuredContent are what may pass: one left
	// out is dropped), replace (Content and StructuredContent replace the
	// response's: one left out is kept), or withhold (the caller gets no
	// result: an ok call is answered PERMISSION_DENIED, a failed one keeps
	// its error without content).
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Content replaces the content blocks (MCP's form).
	Content json.RawMessage `json:"content,omitempty"`
	// StructuredContent replaces the structured output (an object, or
	// null to drop it).
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	// Annotations are recorded in the response's meta (ResponseMeta.hooks)
	// with any action.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Bounds of an after-hook's annotations.
const (
	maxHookAnnotations     = 16
	maxHookAnnotationKey   = 64
	maxHookAnnotationValue = 1024
	// maxHookReason bounds the reason an after-hook gives: it is kept in
	// the response's meta and, for a withhold, in its error.
	maxHookReason = 1024
	// maxAfterHooksPerCall bounds the after-hooks one request may name (a
	// policy binds far fewer to a tool).
	maxAfterHooksPerCall = 64
	// maxAfterHookWork bounds the after-hook requests one dispatcher
	// serves at once; past it a request is answered "busy" and the worker
	// asks again (any replica may take it).
	maxAfterHookWork = 256
)

// bindAfterHooks names in the call the after-hooks the policy in force
// binds to its tool: the worker sends its response to them, and the
// audit shows which looked at it. A hook's own call has none.
func (d *Dispatcher) bindAfterHooks(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) {
	if isHookCall(ctx) {
		return
	}
	for _, h := range d.policyFor(id.Tenant).AfterHooks(call.Tool) {
		call.AfterHooks = append(call.AfterHooks, &toolwirev1.AfterHookBinding{Id: h.ID, Tool: h.Tool,
			Timeout: durationpb.New(h.Timeout), FailOpen: h.FailOpen})
	}
}

// serveAfterHooks answers the workers' AfterHookRequests (one queue group
// of every replica) until stopped; each is served on a goroutine of its
// own, at most maxAfterHookWork at once.
func (d *Dispatcher) serveAfterHooks(ctx context.Context) (stopper, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var work sync.WaitGroup
	slots := make(chan struct{}, maxAfterHookWork)
	workerInboxes := bus.InboxPrefix(d.bus.Config, bus.RoleWorker) + "."
	sub, err := d.bus.NC.QueueSubscribe(bus.AfterHookSubject(d.bus.Config), "dispatchers", func(m *nats.Msg) {
		// A worker's request (its inboxes) or an in-process worker's
		// (_INBOX.): a message a push consumer was pointed here with
		// carries a $JS.ACK reply, and is nobody's request.
		if !strings.HasPrefix(m.Reply, workerInboxes) && !strings.HasPrefix(m.Reply, nats.InboxPrefix) {
			d.log.Warn("after-hook request refused: not from a worker", "reply", m.Reply)
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			d.respondAfterHooks(m, &toolwirev1.AfterHookReply{RetryReason: "busy"})
			return
		}
		work.Add(1)
		go func() {
			defer work.Done()
			defer func() { <-slots }()
			d.respondAfterHooks(m, d.runAfterHooks(sctx, m.Data))
		}()
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dispatch: serve after-hooks: %w", err)
	}
	stopSub := subscriptionStopper(sub)
	return func() <-chan struct{} {
		subDone := stopSub()
		cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-subDone // no callback adds work after this
			work.Wait()
		}()
		return done
	}, nil
}

// respondAfterHooks answers a worker. A reply that cannot be sent (one
// over the connection's payload limit) is replaced by a small one that
// withholds the result: the worker must not take the silence for hooks
// that did not answer, which fail open ones would let pass.
func (d *Dispatcher) respondAfterHooks(m *nats.Msg, reply *toolwirev1.AfterHookReply) {
	data, err := proto.Marshal(reply)
	if err == nil {
		err = m.Respond(data)
	}
	if err == nil {
		return
	}
	d.log.Warn("after-hook reply failed; the result is withheld", "err", err)
	if data, err = proto.Marshal(&toolwirev1.AfterHookReply{Notes: reply.Notes,
		Withheld: hookWithheld("", fmt.Errorf("the after-hooks' answer could not be sent: %w", err))}); err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		d.log.Warn("after-hook reply failed", "err", err)
	}
}

// runAfterHooks runs the after-hooks a request's call names, in order, as
// the policy in force binds them now (a hook no longer bound is noted
// "unbound" and skipped), and returns what they made of the response.
func (d *Dispatcher) runAfterHooks(ctx context.Context, data []byte) *toolwirev1.AfterHookReply {
	var req toolwirev1.AfterHookRequest
	if err := proto.Unmarshal(data, &req); err != nil || req.Call == nil || req.Response == nil {
		return &toolwirev1.AfterHookReply{Withheld: hookWithheld("", fmt.Errorf("undecodable after-hook request"))}
	}
	call, resp := req.Call, req.Response
	tenant := call.GetCaller().GetTenant()
	if !bus.ValidTenant(tenant) {
		return &toolwirev1.AfterHookReply{Withheld: hookWithheld("", fmt.Errorf("the call names no valid tenant"))}
	}
	ent, err := d.reg.GetVersion(ctx, call.Tool, call.SpecVersion)
	if err != nil {
		return &toolwirev1.AfterHookReply{RetryReason: "the tool's spec could not be read: " + err.Error()}
	}
	if len(call.AfterHooks) > maxAfterHooksPerCall {
		return &toolwirev1.AfterHookReply{Withheld: hookWithheld("", fmt.Errorf("the call names %d after-hooks (at most %d)",
			len(call.AfterHooks), maxAfterHooksPerCall))}
	}
	p := d.policyFor(tenant)
	v := hookView{content: resp.Content, structured: resp.StructuredJson, input: resp.GetInputRequired() != nil}
	reply := &toolwirev1.AfterHookReply{}
	seen := make(map[string]bool, len(call.AfterHooks))
	for _, b := range call.AfterHooks {
		if seen[b.GetId()] {
			continue // each hook looks once
		}
		seen[b.GetId()] = true
		h := p.Hook(b.GetId())
		if h == nil || !h.After || !h.Covers(call.Tool) || p.IsHook(call.Tool) {
			reply.Notes = append(reply.Notes, &toolwirev1.HookNote{Hook: b.GetId(), Action: "unbound", PolicyVersion: p.Version()})
			continue
		}
		note := &toolwirev1.HookNote{Hook: h.ID, PolicyVersion: p.Version()}
		reply.Notes = append(reply.Notes, note)
		ans, err := d.callAfterHook(ctx, h, ent.Spec, call, resp, v)
		if err == nil {
			err = v.apply(ans, note)
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrStopped) {
				// Not the hook's failure: another replica runs them.
				return &toolwirev1.AfterHookReply{RetryReason: "the dispatcher is stopping"}
			}
			note.Action, note.Reason = "failed", err.Error()
			if h.FailOpen {
				d.log.WarnContext(ctx, "an after-hook failed; the response goes on (failure: open)", "hook", h.ID, "call_id", call.CallId, "err", err)
				continue
			}
			reply.Withheld = hookWithheld(h.ID, err)
			return reply
		}
		if note.Action == "withhold" {
			reply.Withheld = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				Message: fmt.Sprintf("hook %q withheld the result of this call of %q: %s", h.ID, call.Tool, note.Reason)}
			return reply
		}
	}
	if v.changed {
		reply.Changed, reply.Content, reply.StructuredJson, reply.Redacted = true, v.content, v.structured, v.redacted
	}
	return reply
}

// hookWithheld is the error of a result withheld because after-hook id
// (none: the request itself) could not look at it.
func hookWithheld(id string, err error) *toolwirev1.ToolError {
	who := "the after-hooks"
	if id != "" {
		who = fmt.Sprintf("after-hook %q", id)
	}
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
		Message:    fmt.Sprintf("%s could not look at the result (%v); it is withheld (failure: closed)", who, err),
		Suggestion: "the tool ran: check its effect before calling again"}
}

// callAfterHook calls after-hook h on the response as v has it.
func (d *Dispatcher) callAfterHook(ctx context.Context, h *policy.Hook, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse, v hookView) (*AfterHookAnswer, error) {
	hr, err := v.hookResponse(resp)
	if err != nil {
		return nil, err
	}
	req := AfterHookRequest{Hook: h.ID, Phase: "after", CallID: call.CallId, Tool: call.Tool, SpecVersion: call.SpecVersion,
		Arguments: hookArguments(spec, call), Caller: hookCaller(call), Response: hr}
	var ans AfterHookAnswer
	if err := d.hookCall(ctx, call.GetCaller().GetTenant(), h, req, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// hookView is the response's content and structured output as the
// after-hooks so far left them.
type hookView struct {
	content    []*toolwirev1.Content
	structured string
	changed    bool
	redacted   bool
	// input: the response asks the caller for input.
	input bool
}

func (v *hookView) hookResponse(resp *toolwirev1.ToolResponse) (HookResponse, error) {
	blocks, err := mcpexec.ContentToMCP(v.content)
	if err != nil {
		return HookResponse{}, fmt.Errorf("the response's content has no MCP form: %w", err)
	}
	if blocks == nil {
		blocks = []sdk.Content{}
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return HookResponse{}, err
	}
	hr := HookResponse{OK: resp.Ok, Content: content}
	if v.structured != "" {
		hr.StructuredContent = json.RawMessage(v.structured)
	}
	if e := resp.Error; e != nil {
		hr.Error = &HookError{Type: e.Type.String(), Message: e.Message}
	}
	if in := resp.GetInputRequired(); in != nil {
		hr.InputRequests = make(map[string]HookInputRequest, len(in.GetRequests()))
		for k, r := range in.GetRequests() {
			hr.InputRequests[k] = HookInputRequest{Method: r.GetMethod(), Params: json.RawMessage(r.GetParamsJson())}
		}
	}
	return hr, nil
}

// apply takes what an after-hook answered into v and its note, whole or
// not at all; an answer it cannot take is an error (the hook's failure
// mode decides), and leaves v as it was. The reason is cut to
// maxHookReason bytes.
func (v *hookView) apply(ans *AfterHookAnswer, note *toolwirev1.HookNote) error {
	note.Action, note.Reason = ans.Action, cutUTF8(ans.Reason, maxHookReason)
	if note.Action == "" {
		note.Action = "continue"
	}
	if err := checkAnnotations(ans.Annotations); err != nil {
		return err
	}
	note.Annotations = ans.Annotations
	next := *v
	if err := next.take(note.Action, ans); err != nil {
		return err
	}
	*v = next
	return nil
}

// cutUTF8 is s cut to at most n bytes on a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// take applies action's content and structured output to v.
func (v *hookView) take(action string, ans *AfterHookAnswer) error {
	switch action {
	case "continue", "annotate", "withhold":
		return nil
	case "redact", "replace":
		if v.input {
			return fmt.Errorf("%s of a request for input: it can be passed, annotated or withheld", action)
		}
	default:
		return fmt.Errorf("unknown action %q (want continue, annotate, redact, replace or withhold)", ans.Action)
	}
	if action == "redact" {
		// What the redactor does not give back does not pass.
		v.content, v.structured, v.changed, v.redacted = nil, "", true, true
	}
	if len(ans.Content) > 0 {
		var r sdk.CallToolResult
		if err := json.Unmarshal([]byte(`{"content":`+string(ans.Content)+`}`), &r); err != nil {
			return fmt.Errorf("its content is not MCP content blocks: %w", err)
		}
		content, err := mcpexec.ContentFromMCP(r.Content)
		if err != nil {
			return err
		}
		v.content, v.changed = content, true
	}
	if s := bytes.TrimSpace(ans.StructuredContent); len(s) > 0 {
		switch {
		case string(s) == "null":
			v.structured = ""
		case s[0] == '{' && json.Valid(s):
			v.structured = string(s)
		default:
			return errors.New("its structured_content is not a JSON object (or null)")
		}
		v.changed = true
	}
	return nil
}

func checkAnnotations(a map[string]string) error {
	if len(a) > maxHookAnnotations {
		return fmt.Errorf("%d annotations (at most %d)", len(a), maxHookAnnotations)
	}
	for k, val := range a {
		if k == "" || len(k) > maxHookAnnotationKey || len(val) > maxHookAnnotationValue || !utf8.ValidString(k) || !utf8.ValidString(val) {
			return fmt.Errorf("annotation %.64q: keys 1 to %d bytes, values at most %d, UTF-8", k, maxHookAnnotationKey, maxHookAnnotationValue)
		}
	}
	return nil
}

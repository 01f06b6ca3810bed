package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Tools that ask for input (docs/mcp.md, "Tools that ask for input"): a
// tool answers a call with an input-required response (its requests and
// its own state), and the caller answers with a new call that continues
// it, naming the first call's id. The state never travels through the
// caller: the dispatcher reads it from the stored response and checks
// that the response is the caller's tenant's (the results subject is per
// tenant), of the same tool, asked for input, is fresh (Config.InputTTL),
// and was made for the same arguments (their SHA-256), and that the caller
// may see the call (reaches: under VisibilityOwn another agent's call is
// answered as a made-up id). A caller can thus only continue exchanges it
// may see, with the same call; it cannot make up or alter a tool's state.

// Bounds of an answering call's input, checked before anything is read.
const (
	// maxInputResponses bounds the answers of one call (tool.MaxInputRequests).
	maxInputResponses = tool.MaxInputRequests
	// maxCapabilitiesBytes bounds the declared client capabilities.
	maxCapabilitiesBytes = 8 << 10
)

// ContinuesField names the request field of a refused continuation (the
// field of its violation): the MCP face answers it as invalid params.
const ContinuesField = "continues"

// continues is the input step: a call that answers a tool's request for
// input (CallRequest.continues) continues a stored input-required
// response (input); the client capabilities the request declares are
// checked here too.
func (a *admission) continues(ctx context.Context) verdict {
	in, te := a.readInput(ctx)
	if te != nil {
		return a.refused(te, nil)
	}
	a.round = in
	return next
}

// input returns the round the call continues (nil for none), or the
// refusal; it checks the client capabilities the request declares.
func (a *admission) readInput(ctx context.Context) (*toolwirev1.InputRound, *toolwirev1.ToolError) {
	o := a.req
	if c := o.ClientCapabilitiesJson; c != "" {
		if len(c) > maxCapabilitiesBytes || !isObject([]byte(c)) {
			return nil, registry.Violation("client_capabilities_json", fmt.Sprintf("must be a JSON object of at most %d bytes", maxCapabilitiesBytes))
		}
	}
	if o.Continues == "" && len(o.InputResponsesJson) == 0 {
		return nil, nil
	}
	if len(o.InputResponsesJson) > maxInputResponses {
		return nil, registry.Violation("input_responses_json", fmt.Sprintf("%d answers, at most %d", len(o.InputResponsesJson), maxInputResponses))
	}
	for k, v := range o.InputResponsesJson {
		if k == "" || len(k) > 128 || !isObject([]byte(v)) {
			return nil, registry.Violation("input_responses_json", fmt.Sprintf("answer %.128q: the key must have 1 to 128 bytes and the answer be a JSON object", k))
		}
	}
	if o.Continues == "" {
		// Answers without the round they answer (MCP's requestState is
		// optional): the tool gets them as the caller's word alone, with
		// no previous call and no state (tool.Answers).
		return &toolwirev1.InputRound{ResponsesJson: o.InputResponsesJson}, nil
	}
	in := &toolwirev1.InputRound{}
	asked, te := a.askedInput(ctx)
	if te != nil {
		return nil, te
	}
	in.PreviousCallId, in.State = o.Continues, asked.State
	// Only the answers to what was asked reach the tool.
	in.ResponsesJson = make(map[string]string, len(asked.Requests))
	for k, v := range o.InputResponsesJson {
		if _, ok := asked.Requests[k]; ok {
			in.ResponsesJson[k] = v
		}
	}
	return in, nil
}

// askedInput reads and checks the input-required response the call
// continues: its tenant's, of its tool at the spec version it runs now,
// asked for input at most Config.InputTTL ago, for the same arguments;
// a call outside the caller's reach (reaches) is answered as an id no
// call has.
func (a *admission) askedInput(ctx context.Context) (*toolwirev1.InputRequired, *toolwirev1.ToolError) {
	d := a.d
	id, o, specVersion, args, now := a.id, a.req, a.spec.Version, a.args, a.now
	bad := func(msg string) *toolwirev1.ToolError {
		return registry.Violation(ContinuesField, msg)
	}
	if _, err := ulid.ParseStrict(o.Continues); err != nil {
		return nil, bad("not a call id")
	}
	// A call the caller may not see (another agent's, under
	// Config.AgentVisibility) answers as a made-up id: nothing of it is read.
	seen, err := d.reaches(ctx, id, o.Continues)
	var tool string
	if err == nil && seen {
		tool, err = d.callTool(ctx, id.Tenant, o.Continues)
	}
	var resp *toolwirev1.ToolResponse
	if err == nil && seen {
		resp, err = d.findResult(ctx, d.subj.ResultAnyDispatcher(id.Tenant, o.Continues), tool)
	}
	if err != nil {
		d.log.WarnContext(ctx, "reading the call an answer continues failed", "continues", o.Continues, "err", err)
		return nil, envelope.Overloaded("the call this one continues could not be read; try again", time.Second)
	}
	switch {
	case resp == nil:
		return nil, bad("no finished call " + o.Continues + " of this tenant")
	case resp.GetInputRequired() == nil:
		return nil, bad("call " + o.Continues + " did not ask for input")
	case resp.GetTool() != o.Tool:
		return nil, bad(fmt.Sprintf("call %s was of tool %q, not %q", o.Continues, resp.GetTool(), o.Tool))
	case now.After(resp.GetMeta().GetFinishedAt().AsTime().Add(d.cfg.InputTTL)):
		return nil, bad(fmt.Sprintf("call %s asked for input more than %s ago: start over", o.Continues, d.cfg.InputTTL))
	case resp.GetMeta().GetSpecVersion() != specVersion:
		return nil, bad(fmt.Sprintf("tool %q changed since call %s asked for input: start over", o.Tool, o.Continues))
	}
	digest, err := policy.ArgsDigest(args)
	if err != nil || !bytes.Equal(digest, resp.GetInputRequired().GetArgsSha256()) {
		return nil, bad("the arguments differ from those of call " + o.Continues + ": send the same ones")
	}
	return resp.GetInputRequired(), nil
}

// isObject reports whether b is one JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 1 && b[0] == '{' && json.Valid(b)
}

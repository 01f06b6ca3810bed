package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Tools that ask for input (SEP-2322, the input-required result): a
// toolwire tool that answers tool.NeedInput is an MCP input-required
// result, its requestState the call's id (statePrefix + id); the client's
// retry, with inputResponses and that requestState, is a new call that
// continues the first (CallRequest.continues), and the dispatcher hands
// the tool its own state back from the stored response. So the state
// cannot be altered: a requestState that is
// not one of ours, or names a call that is not this tenant's, of this
// tool and arguments, and fresh, is invalid params (-32602).
//
// Only clients of the stateless revision (2026-07-28) get input-required
// results: they declare what they can answer in each request's _meta
// (clientCapabilities). A tool asking for what the client did not declare
// is answered MissingRequiredClientCapability (-32021). Older revisions
// would need the server to send requests to the client on a stream that a
// stateless fleet cannot route back; their clients get an error naming
// the revision to use.

// statePrefix starts every requestState the endpoint issues.
const statePrefix = "toolwire-input."

// metaClientCapabilities is the request _meta key of a stateless client's
// capabilities.
const metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// inputOf puts a stateless client's capabilities, answers and request
// state into cr.
func inputOf(p *mcp.CallToolParamsRaw, cr *toolwirev1.CallRequest) error {
	if caps, ok := p.Meta[metaClientCapabilities]; ok && caps != nil {
		b, err := json.Marshal(caps)
		if err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "clientCapabilities: " + err.Error()}
		}
		cr.ClientCapabilitiesJson = string(b)
	}
	if p.RequestState != "" && !strings.HasPrefix(p.RequestState, approvalStatePrefix) {
		id, ok := strings.CutPrefix(p.RequestState, statePrefix)
		if _, err := ulid.ParseStrict(id); !ok || err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued"}
		}
		cr.Continues = id
	}
	if len(p.InputResponses) > 0 {
		cr.InputResponsesJson = make(map[string]string, len(p.InputResponses))
		for k, v := range p.InputResponses {
			b, err := json.Marshal(v)
			if err != nil {
				return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q]: %v", k, err)}
			}
			cr.InputResponsesJson[k] = string(b)
		}
	}
	return nil
}

// isInputViolation reports whether te refuses a call's input fields (its
// request state, answers or capabilities): the client's protocol error.
func isInputViolation(te *toolwirev1.ToolError) bool {
	if te.GetType() != toolwirev1.ErrorType_ERROR_TYPE_VALIDATION || len(te.GetViolations()) != 1 {
		return false
	}
	switch te.GetViolations()[0].GetField() {
	case dispatch.ContinuesField, "input_responses_json", "client_capabilities_json":
		return true
	}
	return false
}

// askInput answers a response that asks for input: the input-required
// result, rendered for the client's profile p, or the error of a client
// that cannot answer it.
func askInput(resp *toolwirev1.ToolResponse, stateless bool, capsJSON string, p *profiles.Profile) (mcp.Result, error) {
	in := resp.GetInputRequired()
	if !stateless {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("tool %q asks its caller for input, which this endpoint serves at MCP revision %s and later", resp.GetTool(), ProtocolVersions[0])}
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal([]byte(capsJSON), &caps) // checked by the dispatcher
	missing := map[string]any{}
	for _, r := range in.GetRequests() {
		c := tool.CapabilityFor(r.GetMethod())
		if _, ok := caps[c]; !ok {
			missing[c] = map[string]any{}
		}
	}
	if len(missing) > 0 {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": missing})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
			Message: fmt.Sprintf("tool %q needs client capabilities the request did not declare", resp.GetTool())}
	}
	return newInputResult(resp, p)
}

// newInputResult is the input-required result of tools/call for resp:
// the tool's requests (their params' _meta as the profile p passes it:
// profiles.Profile.InputParams), our request state, and the call id in
// _meta.
func newInputResult(resp *toolwirev1.ToolResponse, p *profiles.Profile) (mcp.Result, error) {
	reqs := make(map[string]any, len(resp.GetInputRequired().GetRequests()))
	for k, r := range resp.GetInputRequired().GetRequests() {
		reqs[k] = map[string]any{"method": r.GetMethod(), "params": json.RawMessage(p.InputParams(r.GetParamsJson()))}
	}
	return newReply(map[string]any{
		"resultType":    "input_required",
		"inputRequests": reqs,
		"requestState":  statePrefix + resp.GetCallId(),
		"_meta":         map[string]any{MetaCallID: resp.GetCallId()},
	})
}

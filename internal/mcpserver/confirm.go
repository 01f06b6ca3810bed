package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Confirming an ask with the client's own user: a call the policy parks
// for approval (an ask) whose caller may confirm its own calls (the
// dispatchers hold approval token keys and the key has the "confirm"
// scope: the dispatcher then issues a token bound to this exact call) is
// answered, to a stateless client that declared elicitation, as an
// input-required result asking the user to confirm the call, its
// arguments shown; the requestState is the token. The retry with the
// user's "approve" runs the exact call the token binds (dispatch redeems
// it); a user who declines cancels the parked call. Other callers, and
// clients that cannot elicit, wait for an approver as before (or get a
// task waiting for one).

// approvalStatePrefix starts a requestState that is an approval token.
const approvalStatePrefix = "toolwire-approval."

// confirmKey is the key of the confirmation request.
const confirmKey = "approve"

// askToConfirm is the input-required result asking the client's user to
// confirm the parked call of resp (its CONFIRMATION_REQUIRED answer), or
// nil when the call cannot be confirmed so: no token for this caller, or
// a client that did not declare elicitation.
func askToConfirm(resp *toolwirev1.ToolResponse, args, capsJSON string) mcp.Result {
	token := resp.GetError().GetApproval().GetToken()
	if token == "" || !declares(capsJSON, "elicitation") {
		return nil
	}
	params, err := json.Marshal(map[string]any{
		"message": fmt.Sprintf("Run %s with these arguments?\n%s\n(%s)", resp.GetTool(), args, resp.GetError().GetMessage()),
		"requestedSchema": map[string]any{"type": "object", "required": []string{"approve"},
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve this call"}}},
	})
	if err != nil {
		return nil
	}
	raw, err := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{confirmKey: map[string]any{"method": "elicitation/create", "params": json.RawMessage(params)}},
		"requestState":  approvalStatePrefix + token,
		"_meta":         map[string]any{MetaCallID: resp.GetCallId()},
	})
	if err != nil {
		return nil
	}
	return inputResult{CallToolResult: &mcp.CallToolResult{}, raw: raw}
}

// declares reports whether client capabilities (JSON) declare name.
func declares(capsJSON, name string) bool {
	var caps map[string]json.RawMessage
	if json.Unmarshal([]byte(capsJSON), &caps) != nil {
		return false
	}
	_, ok := caps[name]
	return ok
}

// confirmation handles a retry that answers askToConfirm: the user's
// approval puts the token on cr (the call then runs as the one parked);
// anything else cancels the parked call, and done is the answer.
func (s *Server) confirmation(ctx context.Context, id dispatch.Identity, p *mcp.CallToolParamsRaw, cr *toolwirev1.CallRequest) (done mcp.Result, err error) {
	token, ok := strings.CutPrefix(p.RequestState, approvalStatePrefix)
	if !ok {
		return nil, nil
	}
	keys := s.d.Config().TokenKeys
	if keys == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued"}
	}
	a, err := keys.Verify(token)
	if err != nil || a.Tenant != id.Tenant {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued"}
	}
	if r, ok := p.InputResponses[confirmKey].(*mcp.ElicitResult); ok && r.Action == "accept" && r.Content["approve"] == true {
		// The answer is the fleet's, not the tool's: the call runs as it
		// was parked.
		cr.ApprovalToken, cr.InputResponsesJson = token, nil
		return nil, nil
	}
	if _, err := s.d.Cancel(ctx, id, a.ID, "the MCP client's user did not confirm it"); err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not run: the user did not confirm the call"}},
		Meta: mcp.Meta{MetaCallID: a.ID}}
	return completeResult{res}, nil
}

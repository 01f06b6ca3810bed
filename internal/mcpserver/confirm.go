package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/identity"
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
// a client that did not declare form elicitation. The arguments are shown
// as an approver sees them: secret values replaced, in canonical form,
// with every character beyond ASCII escaped (nothing hidden by padding or
// by text that reads backwards).
func (s *Server) askToConfirm(resp *toolwirev1.ToolResponse, args, capsJSON string) mcp.Result {
	token := resp.GetError().GetApproval().GetToken()
	if token == "" || !formElicitation(capsJSON) {
		return nil
	}
	shown := asciiJSON(s.d.ShownArguments(resp.GetTool(), []byte(args)))
	params, err := json.Marshal(map[string]any{
		"message": fmt.Sprintf("Run %s with these arguments?\n%s", resp.GetTool(), shown),
		"requestedSchema": map[string]any{"type": "object", "required": []string{"approve"},
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve this call"}}},
	})
	if err != nil {
		return nil
	}
	res, err := newReply(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{confirmKey: map[string]any{"method": "elicitation/create", "params": json.RawMessage(params)}},
		"requestState":  approvalStatePrefix + token,
		"_meta":         map[string]any{MetaCallID: resp.GetCallId()},
	})
	if err != nil {
		return nil
	}
	return res
}

// formElicitation reports whether client capabilities (JSON) declare
// form elicitation: "elicitation" with no modes, or with "form".
func formElicitation(capsJSON string) bool {
	var caps struct {
		Elicitation map[string]json.RawMessage `json:"elicitation"`
	}
	if json.Unmarshal([]byte(capsJSON), &caps) != nil || caps.Elicitation == nil {
		return false
	}
	_, form := caps.Elicitation["form"]
	_, url := caps.Elicitation["url"]
	return form || !url
}

// asciiJSON is JSON text s with every character beyond ASCII, and every
// control character, written as a \u escape.
func asciiJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		case r < 0x80:
			b.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		}
	}
	return b.String()
}

// confirmation handles a retry that answers askToConfirm: the user's
// approval puts the token on cr (the call then runs as the one parked);
// anything else cancels the parked call, and done is the answer.
func (s *Server) confirmation(ctx context.Context, id identity.Identity, p *mcp.CallToolParamsRaw, cr *toolwirev1.CallRequest) (done mcp.Result, err error) {
	token, ok := strings.CutPrefix(p.RequestState, approvalStatePrefix)
	if !ok {
		return nil, nil
	}
	keys := s.d.Config().TokenKeys
	if keys == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued"}
	}
	a, err := keys.Verify(token)
	if err != nil || a.Tenant != id.Tenant || a.Agent != id.Agent || a.Tool != p.Name {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued for this call"}
	}
	if r, ok := p.InputResponses[confirmKey].(*mcp.ElicitResult); ok && r.Action == "accept" && r.Content["approve"] == true {
		// The answer is the fleet's, not the tool's: the call runs as it
		// was parked.
		cr.ApprovalToken, cr.InputResponsesJson = token, nil
		return nil, nil
	}
	return s.declined(ctx, id, a.ID)
}

// declined answers a call whose confirmation the user declined: the
// parked call is cancelled and not run; one an approver let run meanwhile
// is answered with its result.
func (s *Server) declined(ctx context.Context, id identity.Identity, callID string) (mcp.Result, error) {
	g, err := s.d.GetResult(ctx, id, callID, 0)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	if g.State == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
		cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		out, err := s.d.Cancel(cctx, id, callID, "the MCP client's user did not confirm it")
		if err != nil {
			return nil, fmt.Errorf("toolwire: %w", err)
		}
		if out == toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED {
			res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not run: the user did not confirm the call"}},
				Meta: mcp.Meta{MetaCallID: callID}}
			return toolResult{CallToolResult: res, complete: true}, nil
		}
	}
	// Approved by an approver meanwhile: it runs, or ran.
	resp, err := s.await(ctx, id, callID)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	res, err := result(resp, s.profileFrom(ctx))
	return mark(res, err, true)
}

package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ApprovalRequiredError is returned by Call, GetResult and Submit
// (Submission.Approval) when the policy asked for approval: the call is
// parked, waiting for an approver (CONFIRMATION_REQUIRED). It carries the
// approval id — the call's id, by which an approver approves it
// (Client.Approve, `toolctl approvals approve ID`) and by which its result
// is fetched once it ran — and, for a caller with the "confirm" scope
// when the dispatchers hold token keys, a token: after the orchestrator's
// own user confirmed, the same call sent again with WithApprovalToken
// runs as the parked one.
//
// It unwraps to the *ToolError of the answer, so
// errors.Is(err, &ToolError{Type: ERROR_TYPE_CONFIRMATION_REQUIRED}) matches.
type ApprovalRequiredError struct {
	// CallID is the parked call's id; ApprovalID is the same id.
	CallID, ApprovalID string
	// Token is the approval token, "" when none was issued.
	Token string
	// ExpiresAt is when the approval expires unanswered (the call is then
	// answered EXPIRED).
	ExpiresAt time.Time
	// Reason says why the call needs approval (the policy's reason, never
	// its rule's text).
	Reason string
	// Err is the CONFIRMATION_REQUIRED answer.
	Err *ToolError
}

// Error says which approval the call waits for.
func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("toolwire: call %s waits for approval %s: %s", e.CallID, e.ApprovalID, e.Reason)
}

// Unwrap returns the CONFIRMATION_REQUIRED *ToolError.
func (e *ApprovalRequiredError) Unwrap() error { return e.Err }

// approvalRequired returns the *ApprovalRequiredError of a
// CONFIRMATION_REQUIRED response that names an approval; nil otherwise.
func approvalRequired(callID string, resp *toolwirev1.ToolResponse) *ApprovalRequiredError {
	a := resp.GetError().GetApproval()
	if resp.GetError().GetType() != toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED || a.GetApprovalId() == "" {
		return nil
	}
	e := &ApprovalRequiredError{CallID: callID, ApprovalID: a.GetApprovalId(), Token: a.GetToken(), Reason: resp.GetError().GetMessage(),
		Err: toolError(resp)}
	if a.GetExpiresAt() != nil {
		e.ExpiresAt = a.GetExpiresAt().AsTime()
	}
	return e
}

// WithWaitForApproval makes Call keep waiting (up to its wait) when the
// policy asks for approval: for the call's result once an approver
// approved it and it ran, or its denial. Without it Call returns an
// *ApprovalRequiredError at once; with it, when the wait ends while the
// call still waits for an approver.
func WithWaitForApproval() CallOption {
	return func(s *callSettings) { s.opts.WaitForApproval = true }
}

// ApproveOption shapes an approval (Client.Approve).
type ApproveOption func(*toolwirev1.ApproveRequest)

// ApproveFor makes the approval also a grant: for the parked call's
// session (APPROVAL_SCOPE_SESSION), agent (AGENT) or whole tenant
// (TENANT), covering later calls that match it, until it expires or is
// revoked. The default is the parked call only (ONCE).
func ApproveFor(scope toolwirev1.ApprovalScope) ApproveOption {
	return func(r *toolwirev1.ApproveRequest) { r.Scope = scope }
}

// WithArgsPattern narrows a grant to calls whose argument at field (a dot
// path, e.g. "repo.owner") matches glob; every value at the path must.
func WithArgsPattern(field, glob string) ApproveOption {
	return func(r *toolwirev1.ApproveRequest) {
		if r.ArgsPattern == nil {
			r.ArgsPattern = map[string]string{}
		}
		r.ArgsPattern[field] = glob
	}
}

// WithGrantTTL sets how long a grant lasts; the default is the
// dispatcher's (24h unless configured).
func WithGrantTTL(d time.Duration) ApproveOption {
	return func(r *toolwirev1.ApproveRequest) { r.Ttl = durationpb.New(d) }
}

// WithGrantTool sets the glob of tool names a grant covers; the default
// is the parked call's tool.
func WithGrantTool(glob string) ApproveOption {
	return func(r *toolwirev1.ApproveRequest) { r.Tool = glob }
}

// WithReason records why the approver approved.
func WithReason(reason string) ApproveOption {
	return func(r *toolwirev1.ApproveRequest) { r.Reason = reason }
}

// Approve approves the parked call id (it needs the "approve" scope):
// the call is published and runs; fetch its result with GetResult(id).
// It returns the approval and, for ApproveFor a session, agent or tenant,
// the grant stored. An approval decided already (or expired) is a
// transport error with connect.CodeFailedPrecondition; an unknown id
// CodeNotFound; missing scope CodePermissionDenied.
func (c *Client) Approve(ctx context.Context, id string, opts ...ApproveOption) (*toolwirev1.Approval, *toolwirev1.Grant, error) {
	req := &toolwirev1.ApproveRequest{Id: id}
	for _, o := range opts {
		o(req)
	}
	resp, err := c.rpc.Approve(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, nil, transportError("approve "+id, err)
	}
	return resp.Msg.GetApproval(), resp.Msg.GetGrant(), nil
}

// Deny denies the parked call id with reason, which its caller is told
// (PERMISSION_DENIED); it needs the "approve" scope. Errors as Approve's;
// an empty reason is CodeInvalidArgument.
func (c *Client) Deny(ctx context.Context, id, reason string) (*toolwirev1.Approval, error) {
	resp, err := c.rpc.Deny(ctx, connect.NewRequest(&toolwirev1.DenyRequest{Id: id, Reason: reason}))
	if err != nil {
		return nil, transportError("deny "+id, err)
	}
	return resp.Msg.GetApproval(), nil
}

// ApprovalFilter selects the approvals ListApprovals returns; the zero
// value lists the newest 100 of every state.
type ApprovalFilter struct {
	// State keeps one state (e.g. APPROVAL_STATE_PENDING); unset = all.
	State toolwirev1.ApprovalState
	// Tool is a glob of tool names; Agent and Session keep one agent's or
	// session's.
	Tool, Agent, Session string
	// Limit is the most returned: 0 = 100, at most 1000.
	Limit int
}

// ListApprovals lists the approvals of the caller's tenant, newest first
// (it needs the "approve" scope), and whether more matched than Limit.
// Arguments are shown with the tool's secret fields redacted.
func (c *Client) ListApprovals(ctx context.Context, f ApprovalFilter) ([]*toolwirev1.Approval, bool, error) {
	resp, err := c.rpc.ListApprovals(ctx, connect.NewRequest(&toolwirev1.ListApprovalsRequest{State: f.State, Tool: f.Tool,
		Agent: f.Agent, Session: f.Session, Limit: int32(min(max(f.Limit, 0), 1000))}))
	if err != nil {
		return nil, false, transportError("list approvals", err)
	}
	return resp.Msg.GetApprovals(), resp.Msg.GetTruncated(), nil
}

// GetApproval returns approval id (it needs the "approve" scope).
func (c *Client) GetApproval(ctx context.Context, id string) (*toolwirev1.Approval, error) {
	resp, err := c.rpc.GetApproval(ctx, connect.NewRequest(&toolwirev1.GetApprovalRequest{Id: id}))
	if err != nil {
		return nil, transportError("get approval "+id, err)
	}
	return resp.Msg.GetApproval(), nil
}

// ListGrants lists the grants in force for the caller's tenant, newest
// first, narrowed to one agent's or session's when given (it needs the
// "approve" scope).
func (c *Client) ListGrants(ctx context.Context, agent, session string) ([]*toolwirev1.Grant, error) {
	resp, err := c.rpc.ListGrants(ctx, connect.NewRequest(&toolwirev1.ListGrantsRequest{Agent: agent, Session: session}))
	if err != nil {
		return nil, transportError("list grants", err)
	}
	return resp.Msg.GetGrants(), nil
}

// RevokeGrant removes grant id (it needs the "approve" scope); it reports
// whether the grant existed.
func (c *Client) RevokeGrant(ctx context.Context, id string) (bool, error) {
	resp, err := c.rpc.RevokeGrant(ctx, connect.NewRequest(&toolwirev1.RevokeGrantRequest{Id: id}))
	if err != nil {
		return false, transportError("revoke grant "+id, err)
	}
	return resp.Msg.GetRevoked(), nil
}

// ApprovalStateName returns the short name of an approval state, e.g.
// "PENDING".
func ApprovalStateName(s toolwirev1.ApprovalState) string {
	return strings.TrimPrefix(s.String(), "APPROVAL_STATE_")
}

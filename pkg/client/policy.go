package client

import (
	"context"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The policy calls need credentials with the "admin" scope; they act on
// the caller's tenant (from the credentials). A refusal is an error whose
// connect.CodeOf says why: PermissionDenied without the scope,
// InvalidArgument for a document that does not parse or whose tests fail
// (the message names each problem's line), NotFound for an unknown tool
// or version. See docs/policy.md.

// ApplyPolicyOptions tune ApplyPolicy.
type ApplyPolicyOptions struct {
	// Comment is recorded with the apply (ListPolicyVersions shows it).
	Comment string
	// DryRun checks the document (it parses, its conditions compile, its
	// tests pass) and says whether it would change anything, without
	// applying it.
	DryRun bool
}

// ApplyPolicy puts the policy document (YAML) in force for the caller's
// tenant, in place of the installation's, once it parses and its own
// tests pass. It returns once the document is in force on the dispatcher
// that answered; the other replicas follow within about a second.
// Response.Changed is false when the document was already in force.
func (c *Client) ApplyPolicy(ctx context.Context, document []byte, o ApplyPolicyOptions) (*toolwirev1.ApplyPolicyResponse, error) {
	resp, err := c.rpc.ApplyPolicy(ctx, connect.NewRequest(&toolwirev1.ApplyPolicyRequest{Document: string(document),
		Comment: o.Comment, DryRun: o.DryRun}))
	if err != nil {
		return nil, transportError("apply policy", err)
	}
	return resp.Msg, nil
}

// RemovePolicy takes the caller's tenant's own policy document out of
// force: the tenant is under the installation document again (the
// response's InForce, unset when there is none). Removed is false when
// the tenant had no document of its own. Needs the "admin" scope.
func (c *Client) RemovePolicy(ctx context.Context) (*toolwirev1.RemovePolicyResponse, error) {
	resp, err := c.rpc.RemovePolicy(ctx, connect.NewRequest(&toolwirev1.RemovePolicyRequest{}))
	if err != nil {
		return nil, transportError("remove policy", err)
	}
	return resp.Msg, nil
}

// GetPolicy returns the policy document in force for the caller's tenant
// (its own, else the installation's, whose PolicyVersion.Tenant is "*"),
// as applied, comments kept; version, when not empty, names an earlier
// one. Without any policy the response has no Version.
func (c *Client) GetPolicy(ctx context.Context, version string) (*toolwirev1.GetPolicyResponse, error) {
	resp, err := c.rpc.GetPolicy(ctx, connect.NewRequest(&toolwirev1.GetPolicyRequest{Version: version}))
	if err != nil {
		return nil, transportError("get policy", err)
	}
	return resp.Msg, nil
}

// ListPolicyVersions lists the applies of the caller's tenant's policy
// (the installation's when it has none of its own), newest first, at most
// limit (0 = 20, at most 64).
func (c *Client) ListPolicyVersions(ctx context.Context, limit int) ([]*toolwirev1.PolicyVersion, error) {
	resp, err := c.rpc.ListPolicyVersions(ctx, connect.NewRequest(&toolwirev1.ListPolicyVersionsRequest{Limit: int32(min(max(limit, 0), 64))}))
	if err != nil {
		return nil, transportError("list policy versions", err)
	}
	return resp.Msg.GetVersions(), nil
}

// Explain decides a call as admission would, without running it, and
// says why: the outcome, the policy version, every rule that names the
// tool with its layer, whether it matched and why, and the grant or
// approval that covered an ask. The request names the tool, its
// arguments (arguments_json) and on whose behalf (agent, session, user,
// run; the tenant is the caller's).
func (c *Client) Explain(ctx context.Context, req *toolwirev1.ExplainRequest) (*toolwirev1.ExplainResponse, error) {
	resp, err := c.rpc.Explain(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, transportError("explain", err)
	}
	return resp.Msg, nil
}

// UsageOptions name whose usage GetUsage reads: empty = the caller's own
// agent. Another agent needs the "admin" scope.
type UsageOptions struct {
	Agent, Session, User, Run string
}

// GetUsage reads the limits in force for the caller's tenant: each
// limit's rate, concurrency (calls running) and budget (used, remaining,
// reset).
func (c *Client) GetUsage(ctx context.Context, o UsageOptions) (*toolwirev1.GetUsageResponse, error) {
	resp, err := c.rpc.GetUsage(ctx, connect.NewRequest(&toolwirev1.GetUsageRequest{Agent: o.Agent, Session: o.Session,
		User: o.User, Run: o.Run}))
	if err != nil {
		return nil, transportError("get usage", err)
	}
	return resp.Msg, nil
}

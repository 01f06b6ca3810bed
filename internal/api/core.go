package api

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/policyops"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Core is what the API asks of the dispatcher it is served by
// (*dispatch.Dispatcher): every RPC but the approval, policy and usage
// ones is one call of it, with the caller's identity, so that the API
// decides nothing itself.
type Core interface {
	// Config is the dispatcher's configuration: its request bounds
	// (MaxRequestBytes, MaxArgsValues, MaxRequestDepth), which Handler
	// applies before a request is decoded.
	Config() dispatch.Config

	// Calls: call, submit, wait, watch, read, cancel.
	Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error)
	Submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest) (*dispatch.Submitted, error)
	GetResult(ctx context.Context, id identity.Identity, callID string, wait time.Duration) (*toolwirev1.GetResultResponse, error)
	Watch(ctx context.Context, id identity.Identity, callID string, send func(*toolwirev1.CallEvent) error) error
	GetOutput(ctx context.Context, id identity.Identity, req *toolwirev1.GetOutputRequest) (*toolwirev1.GetOutputResponse, error)
	GetDelegation(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.GetDelegationResponse, error)
	Cancel(ctx context.Context, id identity.Identity, callID, reason string) (toolwirev1.CancelOutcome, error)

	// Tools: what a caller sees, and the approval of MCP tool definitions.
	VisibleTools(id identity.Identity, f registry.Filter) []*toolwirev1.ToolSpec
	VisibleToolsFor(ctx context.Context, id identity.Identity, f registry.Filter, lf dispatch.ListFor) ([]*toolwirev1.ToolSpec, error)
	VisibleToolFor(ctx context.Context, id identity.Identity, name string, gf dispatch.GetFor) (*toolwirev1.ToolSpec, error)
	ApproveTool(ctx context.Context, id identity.Identity, name, hash string) (*toolwirev1.ToolSpec, error)

	// Pools: the pools as this replica last read them; pause and resume.
	Pools() []dispatch.PoolStatus
	PausePool(ctx context.Context, id identity.Identity, pool, reason string) (*bus.PoolPause, error)
	ResumePool(ctx context.Context, id identity.Identity, pool string) error

	// Sessions: the reference applier's state and its intents.
	GetSession(ctx context.Context, id identity.Identity, session string) (*toolwirev1.Session, error)
	SetSessionMode(ctx context.Context, id identity.Identity, session, mode string) (*toolwirev1.Session, error)
	ListSessions(ctx context.Context, id identity.Identity, q intents.ListQuery) (intents.ListPage, error)
	EndSession(ctx context.Context, id identity.Identity, session, reason string) (*toolwirev1.Session, error)
	ClearSessionPins(ctx context.Context, id identity.Identity, session, tool string) (*toolwirev1.Session, error)
	ApplyIntents(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.ApplyIntentsResponse, error)
}

// Approvals is the approval flow the approval RPCs act through
// (*approvalflow.Flow, the dispatcher's Approvals()).
type Approvals interface {
	ListApprovals(ctx context.Context, id identity.Identity, req *toolwirev1.ListApprovalsRequest) ([]*toolwirev1.Approval, bool, error)
	GetApproval(ctx context.Context, id identity.Identity, approvalID string) (*toolwirev1.Approval, error)
	Approve(ctx context.Context, id identity.Identity, req *toolwirev1.ApproveRequest) (*toolwirev1.Approval, *toolwirev1.Grant, error)
	Deny(ctx context.Context, id identity.Identity, approvalID, reason string) (*toolwirev1.Approval, error)
	ListGrants(ctx context.Context, id identity.Identity, agent, session string) ([]*toolwirev1.Grant, error)
	RevokeGrant(ctx context.Context, id identity.Identity, grantID string) (bool, error)
}

// Policies are the policy operations the policy RPCs act through
// (*policyops.Ops, the dispatcher's PolicyOps()).
type Policies interface {
	Apply(ctx context.Context, id identity.Identity, r policyops.ApplyRequest) (*policyops.Applied, error)
	Remove(ctx context.Context, id identity.Identity) (*policyops.Removed, error)
	Document(ctx context.Context, id identity.Identity, version string) (*policystore.Document, error)
	Versions(ctx context.Context, id identity.Identity, limit int) ([]policystore.Version, error)
	Explain(ctx context.Context, id identity.Identity, r policyops.ExplainRequest) (*policyops.Explanation, error)
}

// Usage reads the limits in force for GetUsage (*limitgate.Gate, the
// dispatcher's LimitGate()).
type Usage interface {
	Report(ctx context.Context, id identity.Identity, f limitgate.UsageFilter) (limitgate.Report, error)
}

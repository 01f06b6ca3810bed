package dashboard

import (
	"context"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Core is what the dashboard asks of the dispatcher it is served by
// (*dispatch.Dispatcher): every action goes through it, with the user's
// identity, so that the dashboard decides nothing the API would not.
type Core interface {
	// Calls: a session's state on a call's page; cancel. Sessions: the
	// sessions page.
	GetSession(ctx context.Context, id identity.Identity, session string) (*toolwirev1.Session, error)
	ListSessions(ctx context.Context, id identity.Identity, q intents.ListQuery) (intents.ListPage, error)
	Cancel(ctx context.Context, id identity.Identity, callID, reason string) (toolwirev1.CancelOutcome, error)
	// A call's page: its place in its delegation chain.
	GetDelegation(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.GetDelegationResponse, error)

	// Tools: what a key sees, and the approval of MCP tool definitions.
	VisibleTools(id identity.Identity, f registry.Filter) []*toolwirev1.ToolSpec
	ApprovedDefinition(ctx context.Context, name string) (string, bool, error)
	ToolApprover(ctx context.Context, name string) (registry.Approver, bool, error)
	ApproveTool(ctx context.Context, id identity.Identity, name, hash string) (*toolwirev1.ToolSpec, error)

	// Pools and limits.
	Pools() []dispatch.PoolStatus
	PausePool(ctx context.Context, id identity.Identity, pool, reason string) (*bus.PoolPause, error)
	ResumePool(ctx context.Context, id identity.Identity, pool string) error
	PoolOf(tenant string, spec *toolwirev1.ToolSpec) string
	Stores() []telemetry.StoreLoad
	Usage(ctx context.Context, id identity.Identity, f dispatch.UsageFilter) ([]dispatch.Usage, error)
}

// Approvals is the approval flow the inbox acts through
// (*approvalflow.Flow, the dispatcher's Approvals()).
type Approvals interface {
	ListApprovals(ctx context.Context, id identity.Identity, req *toolwirev1.ListApprovalsRequest) ([]*toolwirev1.Approval, bool, error)
	GetApproval(ctx context.Context, id identity.Identity, approvalID string) (*toolwirev1.Approval, error)
	Approve(ctx context.Context, id identity.Identity, req *toolwirev1.ApproveRequest) (*toolwirev1.Approval, *toolwirev1.Grant, error)
	Deny(ctx context.Context, id identity.Identity, approvalID, reason string) (*toolwirev1.Approval, error)
}

// Registry is the dispatcher's copy of the registry (*registry.Store):
// the tools pages read specs from it, and the calls index the spec
// versions it redacts arguments with (callindex.Specs).
type Registry interface {
	Get(name string) (*registry.Entry, error)
	List(f registry.Filter) []*registry.Entry
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

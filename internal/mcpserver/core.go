package mcpserver

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Core is what the endpoint asks of the dispatcher it is served by
// (*dispatch.Dispatcher): every tools/list and tools/call goes through
// it, with the caller's identity, so that MCP decides nothing the API
// would not.
type Core interface {
	// Config is the dispatcher's configuration: its longest wait
	// (MaxWait), its request bound (MaxRequestBytes) and its approval
	// token keys (TokenKeys).
	Config() dispatch.Config

	// Tools: what a caller sees and may call.
	VisibleToolsFor(ctx context.Context, id identity.Identity, f registry.Filter, lf dispatch.ListFor) ([]*toolwirev1.ToolSpec, error)
	// SkillsFor is the `skill` tool as id sees it and the skills it may
	// load (MCP's Skills extension, skills.go).
	SkillsFor(ctx context.Context, id identity.Identity, lf dispatch.ListFor) (*toolwirev1.ToolSpec, []*toolwirev1.Skill, error)
	MissingScopes(id identity.Identity, name string) []string
	TaskSupport(name string) toolwirev1.TaskSupport
	ShownArguments(name string, args []byte) string
	OnToolsChanged(f func())

	// Calls: submit or call, wait, watch, read, cancel.
	Submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest) (*dispatch.Submitted, error)
	Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error)
	GetResult(ctx context.Context, id identity.Identity, callID string, wait time.Duration) (*toolwirev1.GetResultResponse, error)
	Watch(ctx context.Context, id identity.Identity, callID string, send func(*toolwirev1.CallEvent) error) error
	GetOutput(ctx context.Context, id identity.Identity, req *toolwirev1.GetOutputRequest) (*toolwirev1.GetOutputResponse, error)
	Cancel(ctx context.Context, id identity.Identity, callID, reason string) (toolwirev1.CancelOutcome, error)
	// CallArguments reads back the arguments of a stored call (tasks
	// keep them redacted).
	CallArguments(ctx context.Context, id identity.Identity, tool, callID string) ([]byte, error)
}

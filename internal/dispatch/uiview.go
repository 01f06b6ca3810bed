package dispatch

// What the dashboard (internal/dashboard) reads of a dispatcher beyond
// the API: the pools as admission's load view last read them, the pool a
// tool's calls go to, and the approval of a tool definition (one piece of
// logic for the ApproveTool RPC and the dashboard's Approve button).
//
// Decisions: the pool figures are the load view's last read (every
// Config.LoadRefresh; internal/poolview, status.go), not a read of their
// own, so a dashboard adds no load on the server.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// PoolStatus is one worker pool as this replica last read it
// (internal/poolview).
type PoolStatus = poolview.PoolStatus

// Pools returns the worker pools (the pool consumers of the calls
// stream) as the load view last read them, sorted by consumer name; none
// before the dispatcher's first read.
func (d *Dispatcher) Pools() []PoolStatus { return d.load.Pools() }

// Stores returns the use of the layout's stores (and of the JetStream
// account, named "account") at the last read.
func (d *Dispatcher) Stores() []telemetry.StoreLoad { return d.load.Stores() }

// PoolOf returns the name of the pool that consumes the calls of spec's
// tool for tenant, as admission routes them (the pool consumers' filters
// at the last read); "" when no pool does.
func (d *Dispatcher) PoolOf(tenant string, spec *toolwirev1.ToolSpec) string {
	if spec == nil {
		return ""
	}
	return d.load.PoolOf(d.subj.Call(spec.GetExecutor(), tenant, spec.GetProvider(), spec.GetName()))
}

// Errors of ApproveTool.
var (
	// ErrNeedAdminScope: approving a tool definition needs the "admin"
	// and "installation" scopes (identity.Identity.AdministersInstallation):
	// a definition serves every tenant, so a tenant's admin may not.
	ErrNeedAdminScope = errors.New(`dispatch: approving a tool definition needs the "admin" and "installation" scopes: a definition serves every tenant`)
	// ErrNoDefinition: the tool has no external (MCP) definition.
	ErrNoDefinition = errors.New("dispatch: tool has no external definition to approve")
	// ErrDefinitionChanged: the hash given is not the tool's current
	// definition (it changed since the approver looked).
	ErrDefinitionChanged = errors.New("dispatch: definition hash does not match the tool's current definition")
)

// ApproveTool records hash as the approved definition of tool name, an
// MCP tool disabled because its definition changed: the worker serving it
// sees the approval and enables it again. hash must be the tool's current
// definition hash, so that the approver approves what they were shown. It
// returns the spec as it stands before the worker acts. Errors:
// ErrNeedAdminScope, registry.ErrNotFound, ErrNoDefinition,
// ErrDefinitionChanged (naming the current hash), or the registry's.
func (d *Dispatcher) ApproveTool(ctx context.Context, id identity.Identity, name, hash string) (*toolwirev1.ToolSpec, error) {
	if !id.AdministersInstallation() {
		return nil, ErrNeedAdminScope
	}
	ent, err := d.reg.Get(name)
	if err != nil {
		return nil, err
	}
	cur := ent.Spec.GetMcp().GetDefinitionHash()
	switch {
	case cur == "":
		return nil, ErrNoDefinition
	case hash != cur:
		return nil, fmt.Errorf("%w %s", ErrDefinitionChanged, cur)
	}
	if err := registry.Approve(ctx, d.bus.Registry, name, cur); err != nil {
		return nil, err
	}
	by := registry.Approver{Hash: cur, By: id.Tenant + "/" + id.Agent, At: time.Now().UTC()}
	if err := registry.RecordApprover(ctx, d.bus.Registry, name, by); err != nil {
		return nil, fmt.Errorf("dispatch: the definition of %s is approved, but who approved it was not recorded: %w", name, err)
	}
	d.log.InfoContext(ctx, "tool definition approved", "tool", name, "definition_hash", cur, "by", id.Tenant+"/"+id.Agent)
	return ent.Spec, nil
}

// ToolApprover returns who last approved a definition of tool name, and
// false when no one is recorded.
func (d *Dispatcher) ToolApprover(ctx context.Context, name string) (registry.Approver, bool, error) {
	return registry.ApprovedBy(ctx, d.bus.Registry, name)
}

// ApprovedDefinition returns the definition hash approved for tool name,
// and false when none is recorded.
func (d *Dispatcher) ApprovedDefinition(ctx context.Context, name string) (string, bool, error) {
	return registry.Approved(ctx, d.bus.Registry, name)
}

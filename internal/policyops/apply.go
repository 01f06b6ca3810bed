package policyops

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
)

// ApplyRequest is a document to apply.
type ApplyRequest struct {
	// Document is the policy document's source (YAML), at most
	// policy.MaxDocumentBytes.
	Document []byte
	// Comment is recorded with the apply.
	Comment string
	// DryRun only checks the document and says whether it would change
	// what is in force.
	DryRun bool
}

// Applied is the outcome of Apply.
type Applied struct {
	*policystore.Applied
	// InForce says whether the document was in force on this replica
	// when Apply returned (never for a dry run).
	InForce bool
	// Fleet is what the dispatchers answered: those that enforce the
	// document and those that answered and did not within Config.Wait.
	Fleet policystore.FleetState
}

// Apply checks a policy document (it parses, its CEL compiles, its tests
// pass against the registry's specs) and, unless it is a dry run, stores
// it and puts it in force for the caller's tenant, in place of the
// installation document. It returns once the document is in force on this
// replica and on every dispatcher that answers the fleet's ask (at most
// Config.Wait; Applied.InForce and Applied.Fleet say where it is). Errors: ErrNotAdmin,
// ErrNoPolicySource, ErrBadRequest (a document over
// policy.MaxDocumentBytes), policystore.ErrBadScope, and those of
// policystore.Store.Apply (policy.ErrInvalid, policy.ErrTestsFailed,
// policystore.ErrBadComment, policystore.ErrQuota, a store failure).
func (o *Ops) Apply(ctx context.Context, id identity.Identity, r ApplyRequest) (*Applied, error) {
	if err := requireAdmin(id, "applying a policy"); err != nil {
		return nil, err
	}
	if o.cfg.Policies == nil {
		return nil, ErrNoPolicySource
	}
	if n := len(r.Document); n > policy.MaxDocumentBytes {
		return nil, ofKind(ErrBadRequest, fmt.Errorf("policy document of %d bytes; at most %d", n, policy.MaxDocumentBytes))
	}
	scope, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return nil, err
	}
	res, err := o.cfg.Documents.Apply(ctx, scope, r.Document, policystore.ApplyOptions{
		AppliedBy: id.Agent, Comment: r.Comment, DryRun: r.DryRun, Lookup: o.toolLookup})
	if err != nil {
		return nil, err
	}
	out := &Applied{Applied: res}
	if !r.DryRun {
		if out.InForce, out.Fleet, err = o.waitInForce(ctx, scope, res.Version.Version, res.Revision); err != nil || len(out.Fleet.NotInForce) > 0 {
			o.log.WarnContext(ctx, "applied policy not in force on every dispatcher", "tenant", id.Tenant,
				"version", res.Version.Version, "in_force_here", out.InForce, "not_in_force", out.Fleet.NotInForce, "err", err)
		}
	}
	return out, nil
}

// Removed is the outcome of Remove.
type Removed struct {
	// Removed is false when the tenant had no document of its own.
	Removed bool
	// InForce is the installation document's version, now in force for
	// the tenant; nil when there is none.
	InForce *policystore.Version
	// Fleet is what the dispatchers answered about the removal.
	Fleet policystore.FleetState
}

// Remove takes the caller's tenant's own document out of force; the
// tenant falls back to the installation document. It returns once this
// replica has the removal in force (at most Config.Wait). Errors:
// ErrNotAdmin, ErrNoPolicySource, policystore.ErrBadScope, and a store
// failure.
func (o *Ops) Remove(ctx context.Context, id identity.Identity) (*Removed, error) {
	if err := requireAdmin(id, "removing a policy"); err != nil {
		return nil, err
	}
	if o.cfg.Policies == nil {
		return nil, ErrNoPolicySource
	}
	scope, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return nil, err
	}
	removed, rev, err := o.cfg.Documents.Remove(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := &Removed{Removed: removed}
	if removed {
		var err error
		if _, out.Fleet, err = o.waitInForce(ctx, scope, "", rev); err != nil || len(out.Fleet.NotInForce) > 0 {
			o.log.WarnContext(ctx, "policy removal not in force on every dispatcher", "tenant", id.Tenant,
				"not_in_force", out.Fleet.NotInForce, "err", err)
		}
	}
	if doc, err := o.cfg.Documents.Current(ctx, policystore.Installation); err == nil {
		out.InForce = &doc.Version
	} else if !errors.Is(err, policystore.ErrNoPolicy) {
		return nil, err
	}
	if removed {
		o.log.InfoContext(ctx, "tenant policy removed", "tenant", id.Tenant, "by", id.Agent)
	}
	return out, nil
}

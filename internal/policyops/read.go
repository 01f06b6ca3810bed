package policyops

import (
	"context"
	"errors"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
)

// Document returns the document in force for the caller's tenant (its
// own, else the installation document, whose Version.Scope is the
// installation), or one version ("" = the one in force) of either; nil
// when the tenant has none and there is no installation document.
// Errors: ErrNotAdmin, policystore.ErrBadScope,
// policystore.ErrUnknownVersion, and a store failure.
func (o *Ops) Document(ctx context.Context, id identity.Identity, version string) (*policystore.Document, error) {
	if err := requireAdmin(id, "reading a policy"); err != nil {
		return nil, err
	}
	scope, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return nil, err
	}
	doc, err := o.document(ctx, scope, version)
	if errors.Is(err, policystore.ErrNoPolicy) {
		return nil, nil
	}
	return doc, err
}

// DefaultVersions is how many versions Versions lists when asked for
// none (0 or less).
const DefaultVersions = 20

// Versions lists the applies of the caller's tenant's own document,
// newest first, at most limit (DefaultVersions when 0 or less, at most
// policystore.HistoryDepth); a tenant that never had one gets the
// installation document's, and none when there is none either. Errors:
// ErrNotAdmin, policystore.ErrBadScope, and a store failure.
func (o *Ops) Versions(ctx context.Context, id identity.Identity, limit int) ([]policystore.Version, error) {
	if err := requireAdmin(id, "listing policy versions"); err != nil {
		return nil, err
	}
	scope, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return nil, err
	}
	switch {
	case limit <= 0:
		limit = DefaultVersions
	case limit > policystore.HistoryDepth:
		limit = policystore.HistoryDepth
	}
	hist, err := o.cfg.Documents.History(ctx, scope, limit)
	if errors.Is(err, policystore.ErrNoPolicy) {
		hist, err = o.cfg.Documents.History(ctx, policystore.Installation, limit)
	}
	if errors.Is(err, policystore.ErrNoPolicy) {
		return nil, nil
	}
	return hist, err
}

package policyops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Policies gives the policy in force for a tenant, nil for none (the
// dispatcher's dispatch.PolicySource). When it can also wait until this
// replica has a version in force (Waiter, as policystore.Holder can),
// Apply and Remove answer once their change is in force here.
type Policies interface {
	For(tenant string) *policy.Policy
}

// Waiter is a Policies that can wait until this replica has a version in
// force (policystore.Holder.Wait).
type Waiter interface {
	Wait(ctx context.Context, scope policystore.Scope, version string, revision uint64) error
}

// FleetWaiter is a Waiter that also waits for every live dispatcher
// (policystore.Holder.WaitFleet).
type FleetWaiter interface {
	Waiter
	WaitFleet(ctx context.Context, scope policystore.Scope, version string, revision uint64) (policystore.FleetState, error)
}

// Specs reads the registry's specs (registry.Store): the current ones for
// a document's tests, a pinned one for Explain.
type Specs interface {
	Get(name string) (*registry.Entry, error)
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

// Approvals reads an approval record (approvalflow.Flow.Record): Explain
// decides as if the call presented it.
type Approvals interface {
	Record(ctx context.Context, tenant, id string) (*approvals.Record, error)
}

// DefaultWait is Config.Wait's default.
const DefaultWait = 5 * time.Second

// Config configures Ops.
type Config struct {
	// Documents stores the policy documents (the policies bucket).
	// Required.
	Documents *policystore.Store
	// Policies is what decides; nil = nothing enforces documents: Apply
	// and Remove refuse (ErrNoPolicySource), Explain decides as with no
	// policy.
	Policies Policies
	// Specs reads the registry. Required.
	Specs Specs
	// Grants is where Explain finds grants; nil = none.
	Grants policy.GrantSource
	// Approvals reads the approvals Explain may present. Required.
	Approvals Approvals
	// Wait bounds how long Apply and Remove wait for their change to be in
	// force on this replica. Default 5 s.
	Wait time.Duration
	// Logger receives what Apply and Remove report. Default
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with the defaults filled in.
func (c Config) WithDefaults() Config {
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate returns an error naming the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case c.Documents == nil:
		return errors.New("policyops: Config.Documents is required")
	case c.Specs == nil:
		return errors.New("policyops: Config.Specs is required")
	case c.Approvals == nil:
		return errors.New("policyops: Config.Approvals is required")
	case c.Wait < 0:
		return errors.New("policyops: Config.Wait must not be negative")
	}
	return nil
}

// Ops are the policy operations of the API: apply, remove, show and list
// a tenant's policy documents, and explain a decision. Each takes the
// caller's identity and acts on its tenant; each needs the admin scope.
// Safe for concurrent use; it holds no state.
type Ops struct {
	cfg Config
	log *slog.Logger
}

// New returns Ops over cfg.
func New(cfg Config) (*Ops, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Ops{cfg: cfg, log: cfg.Logger}, nil
}

// Errors of the operations, besides those of internal/policy (ErrInvalid,
// ErrTestsFailed), internal/policystore (ErrBadComment, ErrBadScope,
// ErrUnknownVersion, ErrNoPolicy, ErrQuota), registry.ErrNotFound and the
// context's. Each one keeps the message it had; errors.Is matches both its
// kind and what it wraps.
var (
	// ErrNotAdmin: the caller does not hold identity.AdminScope.
	ErrNotAdmin = fmt.Errorf("policyops: needs the %q scope", identity.AdminScope)
	// ErrBadRequest: the request is refused as it is (a missing tool,
	// arguments that do not parse, a document too large).
	ErrBadRequest = errors.New("policyops: bad request")
	// ErrNoPolicySource: Config.Policies is nil, so a document applied
	// would be stored but not enforced here.
	ErrNoPolicySource = errors.New("this dispatcher enforces no policy documents (no policy source configured)")
	// ErrStoredPolicy: a stored document Explain was asked to use does
	// not parse.
	ErrStoredPolicy = errors.New("policyops: a stored policy does not parse")
	// ErrUnavailable: a store could not be read.
	ErrUnavailable = errors.New("policyops: unavailable")
)

// kindError is an error of one of the kinds above that keeps its own
// message.
type kindError struct {
	kind, err error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

func ofKind(kind, err error) error { return &kindError{kind: kind, err: err} }

// requireAdmin refuses (ErrNotAdmin, naming what needed it) a caller
// without the admin scope.
func requireAdmin(id identity.Identity, what string) error {
	if !registry.HasScopes(id.Scopes, []string{identity.AdminScope}) {
		return ofKind(ErrNotAdmin, fmt.Errorf("%s needs the %q scope", what, identity.AdminScope))
	}
	return nil
}

// policyFor returns the policy in force for tenant, nil without a source.
func (o *Ops) policyFor(tenant string) *policy.Policy {
	if o.cfg.Policies == nil {
		return nil
	}
	return o.cfg.Policies.For(tenant)
}

// waitInForce waits, at most Config.Wait, until this replica has the
// change (scope's record at revision naming version; "" = a removal) in
// force and, with a FleetWaiter, until every dispatcher that answered its
// ask does: it reports whether this replica enforces it and what the
// fleet said.
func (o *Ops) waitInForce(ctx context.Context, scope policystore.Scope, version string, revision uint64) (bool, policystore.FleetState, error) {
	w, ok := o.cfg.Policies.(Waiter)
	if !ok {
		return false, policystore.FleetState{}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.cfg.Wait)
	defer cancel()
	err := w.Wait(wctx, scope, version, revision)
	local := err == nil
	var fleet policystore.FleetState
	if fw, ok := w.(FleetWaiter); ok && local {
		fleet, err = fw.WaitFleet(wctx, scope, version, revision)
	}
	return local, fleet, err
}

// document returns the document of version ("" = the one in force) for
// scope, looking in the installation's when the tenant has none.
func (o *Ops) document(ctx context.Context, scope policystore.Scope, version string) (*policystore.Document, error) {
	docs := o.cfg.Documents
	if version == "" {
		doc, err := docs.Current(ctx, scope)
		if errors.Is(err, policystore.ErrNoPolicy) {
			return docs.Current(ctx, policystore.Installation)
		}
		return doc, err
	}
	doc, err := docs.Get(ctx, scope, version)
	if errors.Is(err, policystore.ErrUnknownVersion) && policystore.ValidVersion(version) {
		return docs.Get(ctx, policystore.Installation, version)
	}
	return doc, err
}

// toolLookup gives a policy document's tests the registry's current specs.
func (o *Ops) toolLookup(name string) *toolwirev1.ToolSpec {
	e, err := o.cfg.Specs.Get(name)
	if err != nil {
		return nil
	}
	return e.Spec
}

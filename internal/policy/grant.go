package policy

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Grant is a standing approval an approver made ("approve for the
// session / agent / tenant"): it turns an ask into an allow for every
// call it covers until it expires. It never covers a deny. Grants are
// stored outside the policy document; Decide gets them from
// Input.Grants.
type Grant struct {
	// ID names the grant in decisions and the audit.
	ID string `json:"id"`
	// Layer is LayerSession, LayerAgent or LayerTenant: whose calls the
	// grant covers.
	Layer Layer `json:"layer"`
	// Tenant is the tenant of the calls covered; always required.
	Tenant string `json:"tenant"`
	// Agent: LayerAgent: the agent of the calls covered (required);
	// LayerSession: when set, the session's calls by this agent only.
	Agent string `json:"agent,omitempty"`
	// Session: LayerSession: the session of the calls covered (required).
	Session string `json:"session,omitempty"`
	// Tool is a glob of the tool names covered.
	Tool string `json:"tool"`
	// Args optionally narrows the grant to calls whose arguments match
	// (field path → glob, as a rule's args; every value at a path must
	// match, as for allow rules).
	Args map[string]string `json:"args,omitempty"`
	// Expires ends the grant; zero = it does not expire.
	Expires time.Time `json:"expires,omitzero"`
	// ApprovalID and Approver say where the grant came from.
	ApprovalID string `json:"approval_id,omitempty"`
	Approver   string `json:"approver,omitempty"`
}

// ErrBadGrant is matched by the errors of Grant.Validate.
var ErrBadGrant = errors.New("policy: bad grant")

// Validate checks a grant before it is stored: a known layer, the
// bindings that layer needs, and valid globs. A grant that fails it never
// covers a call.
func (g *Grant) Validate() error {
	if g.Tenant == "" {
		return fmt.Errorf("%w: tenant is required", ErrBadGrant)
	}
	switch g.Layer {
	case LayerSession:
		if g.Session == "" {
			return fmt.Errorf("%w: a session grant needs the session", ErrBadGrant)
		}
	case LayerAgent:
		if g.Agent == "" {
			return fmt.Errorf("%w: an agent grant needs the agent", ErrBadGrant)
		}
	case LayerTenant:
	default:
		return fmt.Errorf("%w: layer must be session, agent or tenant", ErrBadGrant)
	}
	if _, err := compileGlob(g.Tool); err != nil {
		return fmt.Errorf("%w: tool: %w", ErrBadGrant, err)
	}
	for field, pat := range g.Args {
		if _, err := compileArgPattern(field, pat); err != nil {
			return fmt.Errorf("%w: args: %w", ErrBadGrant, err)
		}
	}
	return nil
}

// Covers reports whether the grant covers a call of tool with args by
// caller at now: the caller is in the grant's layer, the tool matches,
// the arguments match and the grant has not expired. An invalid grant
// covers nothing.
func (g *Grant) Covers(tool *toolwirev1.ToolSpec, caller *toolwirev1.Caller, args *Args, now time.Time) bool {
	if g.Tenant == "" || g.Tenant != caller.GetTenant() {
		return false
	}
	switch g.Layer {
	case LayerSession:
		if g.Session == "" || g.Session != caller.GetSession() || (g.Agent != "" && g.Agent != caller.GetAgent()) {
			return false
		}
	case LayerAgent:
		if g.Agent == "" || g.Agent != caller.GetAgent() {
			return false
		}
	case LayerTenant:
	default:
		return false
	}
	if !g.Expires.IsZero() && !now.Before(g.Expires) {
		return false
	}
	tg, err := compileGlob(g.Tool)
	if err != nil || !tg.match(tool.GetName()) {
		return false
	}
	for field, pat := range g.Args {
		ap, err := compileArgPattern(field, pat)
		if err != nil || !ap.matchEvery(args.Value()) {
			return false
		}
	}
	return true
}

// GrantSource gives Decide the grants that may cover a call. Decide asks
// only when its outcome would otherwise be ask, and checks every grant
// it gets (Covers), so a source may return more than apply.
type GrantSource interface {
	Grants(caller *toolwirev1.Caller, tool string) []Grant
}

// GrantList is a GrantSource over a fixed list.
type GrantList []Grant

// Grants returns the whole list.
func (l GrantList) Grants(*toolwirev1.Caller, string) []Grant { return l }

// coveringGrant returns the grant that covers the call, nil when none
// does. When several do it prefers the narrowest layer (session, then
// agent, then tenant), then the smallest id, so the choice does not
// depend on the order of the list.
func coveringGrant(gs []Grant, tool *toolwirev1.ToolSpec, caller *toolwirev1.Caller, args *Args, now time.Time) *Grant {
	var best *Grant
	for i := range gs {
		g := &gs[i]
		if !g.Covers(tool, caller, args, now) {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(best.Layer, g.Layer), cmp.Compare(g.ID, best.ID)) < 0 {
			best = g
		}
	}
	if best == nil {
		return nil
	}
	c := *best
	c.Args = cloneMap(best.Args)
	return &c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Approval is the record of one approved call ("approve once"): it is
// bound to the caller, the tool at one spec version and the exact
// arguments (the SHA-256 of their canonical form), and expires. Decide
// checks the binding and the expiry (Check); that the approval is used
// only once is the store's part: its Nonce is consumed by a KV create
// before the call is published, and the worker checks the record again
// before executing.
type Approval struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Agent       string    `json:"agent"`
	Session     string    `json:"session,omitempty"`
	Tool        string    `json:"tool"`
	SpecVersion string    `json:"spec_version"`
	ArgsSHA256  string    `json:"args_sha256"` // Args.Hash
	Expires     time.Time `json:"expires"`
	Approver    string    `json:"approver,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Nonce       string    `json:"nonce"`
}

// Errors of Approval.Check.
var (
	// ErrApprovalExpired: the approval's expiry has passed (or it has
	// none: an approval always expires).
	ErrApprovalExpired = errors.New("policy: approval expired")
	// ErrApprovalMismatch: the approval is bound to another caller, tool,
	// spec version or arguments.
	ErrApprovalMismatch = errors.New("policy: approval does not match the call")
)

// Check returns nil when the approval covers a call of tool (at its spec
// version) with args by caller at now, else an error matching
// ErrApprovalExpired or ErrApprovalMismatch that names the first
// difference (never the argument values).
func (a *Approval) Check(tool *toolwirev1.ToolSpec, caller *toolwirev1.Caller, args *Args, now time.Time) error {
	for _, c := range [...]struct{ what, want, got string }{
		{"tenant", a.Tenant, caller.GetTenant()},
		{"agent", a.Agent, caller.GetAgent()},
		{"session", a.Session, caller.GetSession()},
		{"tool", a.Tool, tool.GetName()},
		{"spec version", a.SpecVersion, tool.GetVersion()},
	} {
		if c.want != c.got {
			return fmt.Errorf("%w: it is for %s %q, the call's is %q", ErrApprovalMismatch, c.what, c.want, c.got)
		}
	}
	if a.ArgsSHA256 != args.Hash() {
		return fmt.Errorf("%w: it is for other arguments", ErrApprovalMismatch)
	}
	if a.Expires.IsZero() || !now.Before(a.Expires) {
		return fmt.Errorf("%w at %s", ErrApprovalExpired, a.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckCall is Check for a published call (the worker's re-check): the
// caller, tool, spec version and arguments are the call's. Arguments that
// ParseArgs refuses do not match.
func (a *Approval) CheckCall(call *toolwirev1.ToolCall, now time.Time) error {
	args, err := ParseArgs(call.GetArguments())
	if err != nil {
		return fmt.Errorf("%w: the call's arguments: %w", ErrApprovalMismatch, err)
	}
	spec := &toolwirev1.ToolSpec{Name: call.GetTool(), Version: call.GetSpecVersion()}
	return a.Check(spec, call.GetCaller(), args, now)
}
